/**
 * read_file refuses what is not a regular file with one answer (validation_failed, rule "regular_file", naming what
 * it is), also for the kinds the open itself fails on: a Unix socket (ENXIO), not an execution_failed quoting errno.
 */
import { execFileSync } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fsRuntime, tempDir } from "./helpers.js";

describe("read_file on special files", () => {
  it("refuses a Unix socket and a FIFO alike: validation_failed, rule regular_file", async () => {
    const { dir, cleanup } = tempDir();
    const server = createServer();
    try {
      await new Promise<void>((resolve) => server.listen(join(dir, "sock"), resolve));
      execFileSync("mkfifo", [join(dir, "fifo")]);
      const rt = fsRuntime(dir);
      for (const [path, what] of [
        ["sock", "a socket"],
        ["fifo", "a FIFO (named pipe)"],
      ] as const) {
        const outcome = await rt.call("read_file", { path });
        expect(outcome.ok).toBe(false);
        if (outcome.ok) continue;
        expect(outcome.error.code).toBe("validation_failed");
        expect(outcome.error.details).toMatchObject({ rule: "regular_file", path, argument: "path" });
        expect(outcome.error.message).toBe(`"${path}" is ${what}; only regular files can be read.`);
      }
    } finally {
      await new Promise((resolve) => server.close(resolve));
      cleanup();
    }
  });
});
