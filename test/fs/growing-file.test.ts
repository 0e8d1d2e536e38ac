import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MIB, openRegularFile, readAllCapped } from "../../src/tools/fs/common.js";
import { tempDir } from "../helpers/server.js";

describe("capped reads hold against files that grow after stat", () => {
  it("stops at the cap when the file grew past it between fstat and read", async () => {
    const dir = tempDir("toolhost-grow-");
    const file = join(dir, "log.txt");
    writeFileSync(file, "small\n");
    const { handle, info } = await openRegularFile(file, "log.txt");
    try {
      expect(info.size).toBe(6);
      // The file grows to 11 MiB after the descriptor was opened and stat'd.
      appendFileSync(file, Buffer.alloc(11 * MIB, 0x61));
      const read = await readAllCapped(handle, 10 * MIB, undefined, info.size);
      expect(read.exceeded).toBe(true);
      expect(read.bytes.length).toBe(10 * MIB);
    } finally {
      await handle.close();
    }
  });

  it("reads a file whose stat under-reports its size (procfs) to its end", async () => {
    const { handle, info } = await openRegularFile("/proc/self/status", "/proc/self/status");
    try {
      expect(info.size).toBe(0);
      const read = await readAllCapped(handle, 1 * MIB, undefined, info.size);
      expect(read.exceeded).toBe(false);
      expect(Buffer.from(read.bytes).toString("utf8")).toMatch(/^Name:/);
    } finally {
      await handle.close();
    }
  });
});
