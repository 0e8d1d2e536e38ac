/** Shared helpers of the shell tests: temp directories, pid files, liveness through /proc. */
import { mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isProcessAlive } from "../../src/tools/shell/process-tree.js";
import { until } from "../helpers/until.js";

/** A fresh real temp directory (symlinks resolved) and its cleanup. */
export function tempDir(prefix = "toolhost-shell-"): { dir: string; cleanup: () => void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The pids a test command appended to `file`, one per line. */
export function readPids(file: string): number[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split(/\s+/)
    .filter((s) => /^\d+$/.test(s))
    .map(Number);
}

/** The pids among `pids` that are still alive (not gone, not a zombie). */
export function survivors(pids: readonly number[]): number[] {
  return pids.filter((pid) => isProcessAlive(pid));
}

/** Polls until none of `pids` is alive or `ms` passed; returns the survivors. */
export async function survivorsAfter(pids: readonly number[], ms: number): Promise<number[]> {
  return until(() => survivors(pids), "every process gone", {
    accept: (alive) => alive.length === 0,
    timeoutMs: ms,
    intervalMs: 20,
  }).catch(() => survivors(pids));
}

/** Waits until `file` lists at least `count` pids (or `ms` passed). */
export async function waitForPids(file: string, count: number, ms = 3000): Promise<number[]> {
  return until(() => readPids(file), `${count} pids in ${file}`, {
    accept: (pids) => pids.length >= count,
    timeoutMs: ms,
    intervalMs: 20,
  }).catch(() => readPids(file));
}
