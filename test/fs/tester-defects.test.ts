/**
 * Defects a tester found in the filesystem tools, hostile cases first: concurrent stale writers, glob negation
 * leaking dotfiles, writes through a final symlink, and relative allowedPaths / deniedPaths settings.
 */
import { lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolParameterError } from "../../src/core/errors.js";
import { getTool } from "../../src/core/registry.js";
import { normalizeToolParameters } from "../../src/core/settings-policy.js";
import { withPathLock, withPathLocks } from "../../src/tools/fs/common.js";
import { fsRuntime, tempDir } from "./helpers.js";

let dir: string;
let cleanup: () => void;
let proj: string;
let outside: string;

beforeAll(() => {
  ({ dir, cleanup } = tempDir());
  proj = join(dir, "proj");
  outside = join(dir, "proj-secrets");
  mkdirSync(proj);
  mkdirSync(outside);
  writeFileSync(join(outside, "passwd"), "OUTSIDE-SECRET\n");
});
afterAll(() => cleanup());

describe("freshness race: check and write are atomic per real path", () => {
  it.each([2, 10])("%i chats read race.txt, then all write at once: exactly one succeeds", async (n) => {
    const file = join(proj, `race-${n}.txt`);
    writeFileSync(file, "original\n");
    const { runtime } = fsRuntime(proj);
    const chats = Array.from({ length: n }, (_, i) => `chat-${i}`);
    const call = (tool: string, args: unknown, chatId: string) =>
      runtime.executeTool(tool, args, { userId: "u1", chatId, workingDirectory: proj });
    for (const chat of chats) expect((await call("read_file", { path: file }, chat)).ok).toBe(true);
    const outcomes = await Promise.all(
      chats.map((chat, i) =>
        i % 2 === 0
          ? call("write_file", { path: file, content: `by ${chat}\n` }, chat)
          : call("apply_patch", { path: file, patch: `@@ -1 +1 @@\n-original\n+by ${chat}\n` }, chat),
      ),
    );
    const ok = outcomes.filter((o) => o.ok);
    expect(ok).toHaveLength(1);
    for (const o of outcomes) {
      if (!o.ok) expect(o.error.details?.rule ?? o.error.message).toMatch(/stale_read/);
    }
    // The winner's content is on disk, whole.
    expect(readFileSync(file, "utf8")).toMatch(/^by chat-\d+\n$/);
  });

  it("concurrent creators of a new file: one creates it, the others must read it first", async () => {
    const file = join(proj, "race-new.txt");
    const { runtime } = fsRuntime(proj);
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        runtime.executeTool(
          "write_file",
          { path: file, content: `by chat-${i}\n` },
          { userId: "u1", chatId: `chat-${i}`, workingDirectory: proj },
        ),
      ),
    );
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1);
    for (const o of outcomes) if (!o.ok) expect(o.error.message).toMatch(/has not read it/);
  });

  it("file_write shares the lock with write_file", async () => {
    const file = join(proj, "race-002.txt");
    writeFileSync(file, "original\n");
    const { runtime } = fsRuntime(proj);
    const chats = ["a", "b", "c", "d", "e", "f"];
    const call = (tool: string, args: unknown, chatId: string) =>
      runtime.executeTool(tool, args, { userId: "u1", chatId, workingDirectory: proj, allowDefaultDisabled: true });
    for (const chat of chats) expect((await call("read_file", { path: file }, chat)).ok).toBe(true);
    const outcomes = await Promise.all(
      chats.map((chat, i) =>
        call(i % 2 === 0 ? "write_file" : "file_write", { path: file, content: `by ${chat}\n` }, chat),
      ),
    );
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1);
    for (const o of outcomes) if (!o.ok) expect(o.error.message).toMatch(/changed since this chat last read it/);
  });
});

describe("withPathLock / withPathLocks", () => {
  it("serializes one path in arrival order, and overlapping multi-path locks in any order do not deadlock", async () => {
    const order: string[] = [];
    const step = (name: string) => async () => {
      order.push(`${name}:in`);
      await new Promise((r) => setImmediate(r));
      order.push(`${name}:out`);
    };
    await Promise.all([
      withPathLock("/x/a", step("1")),
      withPathLock("/x/a", step("2")),
      withPathLocks(["/x/b", "/x/a"], step("3")),
      withPathLocks(["/x/a", "/x/b", "/x/a"], step("4")),
      withPathLock("/x/b", step("5")),
    ]);
    // Everything on /x/a ran one at a time, in arrival order.
    const onA = order.filter((e) => /^[1234]:/.test(e));
    expect(onA).toEqual(["1:in", "1:out", "2:in", "2:out", "3:in", "3:out", "4:in", "4:out"]);
    await expect(withPathLock("/x/a", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await withPathLock("/x/a", async () => 42)).toBe(42); // a failure releases the lock
  });
});

describe("glob negation keeps dotfiles out", () => {
  beforeAll(() => {
    const files = [
      "neg/.toolhost/toolhost.db",
      "neg/.env",
      "neg/src/.secret.ts",
      "neg/src/a.ts",
      "neg/notes.txt",
      "neg/.github/workflows/ci.yml",
    ];
    for (const f of files) {
      mkdirSync(join(proj, f, ".."), { recursive: true });
      writeFileSync(join(proj, f), f);
    }
  });
  const glob = async (pattern: string, parameters?: Record<string, unknown>) => {
    const out = await fsRuntime(join(proj, "neg")).call("glob", { pattern }, parameters);
    if (!out.ok) throw Object.assign(new Error(out.error.message), out.error);
    return (out.result as { matches: string[] }).matches;
  };

  it("!**/*.txt returns no dotfile and nothing inside a dot directory", async () => {
    const matches = await glob("!**/*.txt");
    expect(matches).toEqual(["src", "src/a.ts"]);
    expect(matches.join()).not.toMatch(/toolhost\.db|\.env|\.secret|\.github/);
  });
  it("a negated pattern naming a dot directory does not switch dotfiles on", async () => {
    expect(await glob("!.github/**")).toEqual(["notes.txt", "src", "src/a.ts"]);
  });
  it("with includeDotfiles on, negation does return dot entries", async () => {
    const matches = await glob("!**/*.txt", { includeDotfiles: true });
    expect(matches).toContain(".toolhost/toolhost.db");
    expect(matches).toContain(".env");
    expect(matches).not.toContain("notes.txt");
  });
});

describe("no write through a symbolic link as the final path component", () => {
  beforeAll(() => {
    mkdirSync(join(proj, "ln"));
    writeFileSync(join(proj, "ln", "target.txt"), "TARGET\n");
    symlinkSync(join(proj, "ln", "target.txt"), join(proj, "ln", "link-in"));
    symlinkSync(join(proj, "ln", "not-yet.txt"), join(proj, "ln", "dangling-in"));
    symlinkSync(join(outside, "passwd"), join(proj, "ln", "link-out"));
    symlinkSync(join(outside, "new.txt"), join(proj, "ln", "dangling-out"));
    symlinkSync(join(proj, "ln"), join(proj, "ln-dir"));
  });
  const unchanged = () => {
    expect(readFileSync(join(proj, "ln", "target.txt"), "utf8")).toBe("TARGET\n");
    expect(() => statSync(join(proj, "ln", "not-yet.txt"))).toThrow();
    expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("OUTSIDE-SECRET\n");
    expect(() => statSync(join(outside, "new.txt"))).toThrow();
    for (const l of ["link-in", "dangling-in", "link-out", "dangling-out"]) {
      expect(lstatSync(join(proj, "ln", l)).isSymbolicLink()).toBe(true);
    }
  };

  it.each([
    ["write_file", "ln/link-out", "access_denied"],
    ["write_file", "ln/dangling-out", "access_denied"],
    ["write_file", "ln/link-in", "validation_failed"],
    ["write_file", "ln/dangling-in", "validation_failed"],
    ["write_file", "ln-dir/link-in", "validation_failed"],
    ["file_write", "ln/link-in", "validation_failed"],
    ["file_write", "ln/dangling-in", "validation_failed"],
    ["file_write", "ln/link-out", "access_denied"],
  ])("%s %s is %s and writes nothing", async (tool, path, code) => {
    const { runtime } = fsRuntime(proj);
    const opts = { userId: "u1", chatId: "chat-1", workingDirectory: proj, allowDefaultDisabled: true };
    // Read the link first so the refusal is not the freshness guard's.
    await runtime.executeTool("read_file", { path }, opts);
    const outcome = await runtime.executeTool(tool, { path, content: "PWNED\n" }, opts);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe(code);
      if (code === "validation_failed") {
        expect(outcome.error.message).toMatch(/is a symbolic link; write to its target path directly/);
      }
      expect(JSON.stringify(outcome)).not.toContain("OUTSIDE-SECRET");
    }
    unchanged();
  });

  it.each([
    ["update through a link inside", "--- a/ln/link-in\n+++ b/ln/link-in\n@@ -1 +1 @@\n-TARGET\n+PWNED\n"],
    ["add through a dangling link inside", "*** Begin Patch\n*** Add File: ln/dangling-in\n+PWNED\n*** End Patch\n"],
    ["delete a link", "*** Begin Patch\n*** Delete File: ln/link-in\n*** End Patch\n"],
    [
      "move onto a dangling link",
      "*** Begin Patch\n*** Update File: ln/target.txt\n*** Move to: ln/dangling-in\n@@\n-TARGET\n+PWNED\n*** End Patch\n",
    ],
  ])("apply_patch refuses to %s", async (_name, patch) => {
    const { runtime } = fsRuntime(proj);
    for (const path of ["ln/link-in", "ln/target.txt"]) {
      await runtime.executeTool("read_file", { path }, { userId: "u1", chatId: "chat-1", workingDirectory: proj });
    }
    const outcome = await runtime.executeTool(
      "apply_patch",
      { patch },
      { userId: "u1", chatId: "chat-1", workingDirectory: proj },
    );
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe("validation_failed");
      expect(outcome.error.message).toMatch(/is a symbolic link; write to its target path directly/);
    }
    unchanged();
  });

  it("apply_patch refuses a link outside as access_denied", async () => {
    const { call } = fsRuntime(proj);
    const outcome = await call("apply_patch", {
      patch: "--- a/ln/link-out\n+++ b/ln/link-out\n@@ -1 +1 @@\n-OUTSIDE-SECRET\n+PWNED\n",
    });
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error.code).toBe("access_denied");
    expect(JSON.stringify(outcome)).not.toContain("OUTSIDE-SECRET");
    unchanged();
  });

  it("writing to the target path directly, or through a parent directory link, still works", async () => {
    const { call } = fsRuntime(proj);
    await call("read_file", { path: "ln/target.txt" });
    expect((await call("write_file", { path: "ln/target.txt", content: "NEW\n" })).ok).toBe(true);
    expect((await call("write_file", { path: "ln-dir/fresh.txt", content: "F\n" })).ok).toBe(true);
    expect(readFileSync(join(proj, "ln", "fresh.txt"), "utf8")).toBe("F\n");
    expect(lstatSync(join(proj, "ln", "link-in")).isSymbolicLink()).toBe(true);
    writeFileSync(join(proj, "ln", "target.txt"), "TARGET\n");
    expect(readdirSync(join(proj, "ln")).filter((n) => n.includes("toolhost-tmp"))).toEqual([]);
  });
});

describe("allowedPaths / deniedPaths entries must be absolute or ~-prefixed", () => {
  it.each(["read_file", "write_file", "glob", "grep", "apply_patch", "list_directory", "file_write"])(
    "%s rejects relative, empty and NUL-bearing entries",
    (name) => {
      const tool = getTool(name)!;
      for (const key of ["allowedPaths", "deniedPaths"]) {
        for (const bad of [["relative/dir"], ["./x"], ["../up"], [""], ["  "], ["/ok", "/a\0b"], ["~user/x"]]) {
          expect(() => normalizeToolParameters(tool, { [key]: bad })).toThrow(ToolParameterError);
        }
        expect(() => normalizeToolParameters(tool, { [key]: ["relative/dir"] })).toThrow(/absolute or ~-prefixed/);
        expect(normalizeToolParameters(tool, { [key]: ["/srv/data", "~", "~/projects"] })).toEqual({
          [key]: ["/srv/data", "~", "~/projects"],
        });
        expect(normalizeToolParameters(tool, { [key]: [] })).toEqual({ [key]: [] });
      }
    },
  );
});
