/**
 * list_directory classifies a failure of the directory read itself (after the path was resolved and checked) as it
 * classifies every other failure on a path argument: EACCES is access_denied with rule "permissions", naming the
 * path as the caller gave it, never the server's absolute path, and it is not logged as an unclassified error.
 * (Root bypasses permissions, so the read's failure is injected.)
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";

const failing = new Set<string>();
function eaccess(path: unknown): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`EACCES: permission denied, opendir '${String(path)}'`);
  error.code = "EACCES";
  error.syscall = "opendir";
  error.path = String(path);
  return error;
}

vi.mock("node:fs", async (original) => {
  const fs = await original<typeof import("node:fs")>();
  const opendirSync = ((path: string, ...rest: unknown[]) => {
    if (failing.has(String(path))) throw eaccess(path);
    return (fs.opendirSync as (...a: unknown[]) => unknown)(path, ...rest);
  }) as typeof fs.opendirSync;
  return { ...fs, default: { ...fs, opendirSync }, opendirSync };
});

// The setup file loaded the tools with the real node:fs: load them again, with the mocks above.
vi.resetModules();
const { fsRuntime, tempDir } = await import("./helpers.js");

afterEach(() => failing.clear());

describe("list_directory on a directory the system refuses to read", () => {
  it("is access_denied (permissions) naming the path as given, not an unclassified error", async () => {
    const { dir, cleanup } = tempDir();
    try {
      const closed = join(dir, "closed");
      mkdirSync(closed);
      failing.add(closed);
      const rt = fsRuntime(dir);
      const outcome = await rt.call("list_directory", { path: "closed" });
      expect(outcome.ok).toBe(false);
      if (outcome.ok) return;
      expect(outcome.error.code).toBe("access_denied");
      expect(outcome.error.details).toMatchObject({ rule: "permissions", path: "closed", argument: "path" });
      expect(outcome.error.message).toContain('"closed"');
      expect(outcome.error.message).not.toContain(dir);
      expect(rt.logger.lines.filter((l) => l.msg === "tool threw an unclassified error")).toEqual([]);
    } finally {
      cleanup();
    }
  });
});
