/** walk(): read-ahead never changes the order of visits, early stops, skips, errors or what a prediction says. */
import { type Dirent, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type WalkEntry, walk } from "../../src/tools/fs/walk.js";
import { tempDir } from "./helpers.js";

let t: { dir: string; cleanup: () => void };

beforeAll(() => {
  t = tempDir();
  // A deterministic pseudo-random tree: wide and deep directories, files, dot entries, a link cycle.
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const grow = (dir: string, depth: number) => {
    const n = depth === 0 ? 40 : rand(6);
    for (let i = 0; i < n; i++) {
      const name = `${rand(3) === 0 ? "." : ""}${String.fromCharCode(97 + rand(26))}${i}`;
      if (depth < 4 && rand(2) === 0) {
        mkdirSync(join(dir, name));
        grow(join(dir, name), depth + 1);
      } else {
        writeFileSync(join(dir, `${name}.txt`), "");
      }
    }
  };
  grow(t.dir, 0);
  symlinkSync(t.dir, join(t.dir, "loop"));
});
afterAll(() => t.cleanup());

/** The walk's contract spelled out sequentially: sorted entries, each directory's entries before its subtrees. */
function sequential(root: string, visit: (e: WalkEntry) => "stop" | "skip" | undefined): string[] {
  const out: string[] = [];
  const stack = [""];
  while (stack.length > 0) {
    const rel = stack.pop()!;
    const entries = readdirSync(rel ? join(root, rel) : root, { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
    const children: string[] = [];
    for (const dirent of entries) {
      const childRel = rel ? `${rel}/${dirent.name}` : dirent.name;
      const entry = { rel: childRel, parent: rel, name: dirent.name, dirent, depth: childRel.split("/").length };
      const verdict = visit(entry);
      if (verdict === "stop") return out;
      if (verdict === "skip") continue;
      out.push(childRel);
      if (dirent.isDirectory()) children.push(childRel);
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return out;
}

async function walked(
  visit: (e: WalkEntry) => "stop" | "skip" | undefined,
  extra: { descend?: (rel: string, name: string) => boolean; keep?: (d: Dirent) => boolean } = {},
): Promise<string[]> {
  const out: string[] = [];
  await walk({
    root: t.dir,
    ...extra,
    visit(entry) {
      const verdict = visit(entry);
      if (verdict === undefined) out.push(entry.rel);
      return verdict;
    },
  });
  return out;
}

describe("walk", () => {
  const hidden = (e: WalkEntry) => (e.name.startsWith(".") ? ("skip" as const) : undefined);
  it("visits in sequential order, with and without read-ahead predictions", async () => {
    const expected = sequential(t.dir, hidden);
    expect(expected.length).toBeGreaterThan(40);
    expect(await walked(hidden)).toEqual(expected);
    expect(await walked(hidden, { descend: (_rel, name) => !name.startsWith(".") })).toEqual(expected);
    // A wrong prediction (everything, or nothing) costs reads, never a different result.
    expect(await walked(hidden, { descend: () => true })).toEqual(expected);
    expect(await walked(hidden, { descend: () => false })).toEqual(expected);
  });
  it("stops where the visit says, and drops what keep rejects before sorting", async () => {
    let n = 0;
    const stopAt = (e: WalkEntry) => hidden(e) ?? (++n > 25 ? ("stop" as const) : undefined);
    const expected = sequential(t.dir, stopAt);
    n = 0;
    expect(await walked(stopAt, { descend: () => true })).toEqual(expected);
    const onlyDirs = (d: Dirent) => d.isDirectory();
    const dirs = sequential(t.dir, (e) => hidden(e) ?? (e.dirent.isDirectory() ? undefined : "skip"));
    expect(await walked(hidden, { keep: onlyDirs, descend: () => true })).toEqual(dirs);
  });
  it("reads each directory once when the predictions are right, and stops reading ahead when the walk stops", async () => {
    const visitHidden = { root: t.dir, visit: hidden };
    const exact = await walk({ ...visitHidden, descend: (_rel, name) => !name.startsWith(".") });
    expect(exact.reads).toBe(exact.directories);
    const wrong = await walk({ ...visitHidden, descend: () => true });
    expect(wrong.directories).toBe(exact.directories);
    expect(wrong.reads).toBeGreaterThan(wrong.directories);
    // A wide tree (400 directories of one file each) stopped at the third directory's file: the reads ahead stay
    // within the walk's budget instead of crawling the tree.
    const wide = tempDir();
    try {
      for (let i = 0; i < 400; i++) {
        mkdirSync(join(wide.dir, `d${String(i).padStart(3, "0")}`));
        writeFileSync(join(wide.dir, `d${String(i).padStart(3, "0")}`, "f"), "");
      }
      const stopped = await walk({
        root: wide.dir,
        descend: () => true,
        visit: (e) => (e.rel === "d002/f" ? "stop" : undefined),
      });
      expect(stopped).toMatchObject({ stopped: true, directories: 4 });
      expect(stopped.reads).toBeLessThan(100);
    } finally {
      wide.cleanup();
    }
  });
  it("ends with the signal's reason when aborted, also while waiting for a read", async () => {
    const aborted = new AbortController();
    aborted.abort(new Error("gone before"));
    await expect(walk({ root: t.dir, signal: aborted.signal, visit: hidden })).rejects.toThrow("gone before");
    // Aborted from outside the visits (as a timeout or a cancel does), at the first directory's first entry.
    const controller = new AbortController();
    let visits = 0;
    const walking = walk({
      root: t.dir,
      signal: controller.signal,
      descend: () => true,
      visit: (e) => {
        if (visits++ === 0) setImmediate(() => controller.abort(new Error("cancelled")));
        return hidden(e);
      },
    });
    await expect(walking).rejects.toThrow("cancelled");
  });
  it("reports a directory that vanished before its read, goes on, and never follows a link", async () => {
    const doomed = join(t.dir, "zz-doomed");
    mkdirSync(join(doomed, "inner"), { recursive: true });
    const errors: string[] = [];
    const seen: string[] = [];
    await walk({
      root: t.dir,
      visit(entry) {
        seen.push(entry.rel);
        if (entry.rel === "zz-doomed") rmSync(doomed, { recursive: true }); // gone before its read starts
        return hidden(entry);
      },
      onError: (rel, error) => errors.push(`${rel} ${error.code}`),
    });
    expect(errors).toEqual(["zz-doomed ENOENT"]);
    expect(seen).toContain("loop");
    expect(seen.filter((r) => r.startsWith("loop/"))).toEqual([]);
  });
});
