/** Temporary directories for tests (a module of its own, so that importing it loads nothing else). */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh temp directory. */
export function tempDir(prefix = "toolhost-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}
