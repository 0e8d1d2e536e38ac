/**
 * readDirectory: a directory's first entries are read synchronously and the rest of a larger one through the thread
 * pool; every entry arrives once either way, and the directory handle is closed when the read fails half-way.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readDirectory, SYNC_READDIR_MAX_ENTRIES } from "../../src/tools/fs/common.js";
import { tempDir } from "../helpers/server.js";

describe("readDirectory", () => {
  it("returns every entry of directories just under, at and over the synchronous limit", async () => {
    const dir = tempDir("toolhost-readdir-");
    for (const count of [
      0,
      1,
      SYNC_READDIR_MAX_ENTRIES,
      SYNC_READDIR_MAX_ENTRIES + 1,
      SYNC_READDIR_MAX_ENTRIES + 700,
    ]) {
      const folder = join(dir, `n-${count}`);
      mkdirSync(folder);
      for (let i = 0; i < count; i++) writeFileSync(join(folder, `e-${i}`), "");
      if (count > 0) mkdirSync(join(folder, "sub"));
      const entries = await readDirectory(folder);
      const names = entries.map((e) => e.name);
      expect(new Set(names).size).toBe(names.length);
      expect(names.length).toBe(count > 0 ? count + 1 : 0);
      if (count > 0) expect(entries.find((e) => e.name === "sub")?.isDirectory()).toBe(true);
    }
  });

  it("rejects with the system error of a directory that cannot be opened", async () => {
    const dir = tempDir("toolhost-readdir-");
    await expect(readDirectory(join(dir, "missing"))).rejects.toMatchObject({ code: "ENOENT" });
    writeFileSync(join(dir, "file"), "");
    await expect(readDirectory(join(dir, "file"))).rejects.toMatchObject({ code: "ENOTDIR" });
  });
});
