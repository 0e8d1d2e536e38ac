import { createHash } from "node:crypto";
import { appendFileSync, closeSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MIB, openRegularFile, readAllCapped, SYNC_READ_MAX_BYTES } from "../../src/tools/fs/common.js";
import { tempDir } from "../helpers/server.js";

describe("capped reads hold against files that grow after stat", () => {
  it("stops at the cap when the file grew past it between fstat and read", async () => {
    const dir = tempDir("toolhost-grow-");
    const file = join(dir, "log.txt");
    writeFileSync(file, "small\n");
    const { fd, info } = openRegularFile(file, "log.txt");
    try {
      expect(info.size).toBe(6);
      // The file grows to 11 MiB after the descriptor was opened and stat'd.
      appendFileSync(file, Buffer.alloc(11 * MIB, 0x61));
      const read = await readAllCapped(fd, 10 * MIB, undefined, info.size);
      expect(read.exceeded).toBe(true);
      expect(read.bytes.length).toBe(10 * MIB);
    } finally {
      closeSync(fd);
    }
  });

  it("reads a file whose stat under-reports its size (procfs) to its end", async () => {
    const { fd, info } = openRegularFile("/proc/self/status", "/proc/self/status");
    try {
      expect(info.size).toBe(0);
      const read = await readAllCapped(fd, 1 * MIB, undefined, info.size);
      expect(read.exceeded).toBe(false);
      expect(Buffer.from(read.bytes).toString("utf8")).toMatch(/^Name:/);
    } finally {
      closeSync(fd);
    }
  });

  it("reads a file just under and just over the synchronous limit whole, with the whole file's sha256", async () => {
    const dir = tempDir("toolhost-grow-");
    for (const size of [SYNC_READ_MAX_BYTES, SYNC_READ_MAX_BYTES + 1, 3 * SYNC_READ_MAX_BYTES + 7]) {
      const file = join(dir, `f-${size}.bin`);
      const data = Buffer.alloc(size);
      for (let i = 0; i < size; i++) data[i] = (i * 31 + (i >> 9)) & 0xff;
      writeFileSync(file, data);
      const { fd, info } = openRegularFile(file, file);
      try {
        const read = await readAllCapped(fd, 10 * MIB, undefined, info.size);
        expect(read.exceeded).toBe(false);
        expect(Buffer.compare(read.bytes, data)).toBe(0);
        expect(read.sha256).toBe(createHash("sha256").update(data).digest("hex"));
      } finally {
        closeSync(fd);
      }
    }
  });
});
