/** apply_patch: hostile targets first, then both formats, model slips, all-or-nothing, CRLF, byte preservation. */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { MemoryFreshnessLedger } from "../../src/core/stores.js";
import { trigger } from "../../src/core/trigger.js";
import { readFileForChat } from "../../src/tools/builtin/read-file.js";
import { applyPatch } from "../../src/tools/fs/apply-patch-engine.js";
import { fsRuntime, makeContext, tempDir } from "./helpers.js";

const { dir, cleanup } = tempDir();
afterAll(() => cleanup());
let n = 0;
let proj: string;
let rt: ReturnType<typeof fsRuntime>;

beforeEach(() => {
  proj = join(dir, `p${n++}`);
  mkdirSync(proj);
  rt = fsRuntime(proj);
});

const put = (name: string, data: string | Buffer) => {
  mkdirSync(join(proj, name, ".."), { recursive: true });
  writeFileSync(join(proj, name), data);
};
const get = (name: string) => readFileSync(join(proj, name), "utf8");
const read = (path: string) => rt.call("read_file", { path, view: "base64" });
async function patch(p: string, path?: string) {
  const out = await rt.call("apply_patch", path === undefined ? { patch: p } : { patch: p, path });
  if (!out.ok) throw Object.assign(new Error(out.error.message), out.error);
  return out.result as any;
}

describe("apply_patch: hostile targets are refused before anything is written", () => {
  it("refuses +++ b/../x, absolute headers outside, and links out; the first file stays untouched", async () => {
    put("ok.txt", "one\n");
    await read("ok.txt");
    mkdirSync(join(dir, "outside-x"), { recursive: true });
    symlinkSync(join(dir, "outside-x"), join(proj, "out"));
    for (const target of ["../evil.txt", join(dir, "evil-abs.txt"), "out/evil.txt"]) {
      const p = `--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-one\n+two\n--- /dev/null\n+++ b/${target}\n@@ -0,0 +1 @@\n+pwned\n`;
      const err = await patch(p.replace(`b/${join(dir, "evil-abs.txt")}`, join(dir, "evil-abs.txt"))).catch((e) => e);
      expect(err.code).toBe("access_denied");
      expect(get("ok.txt")).toBe("one\n");
    }
    expect(existsSync(join(dir, "evil.txt"))).toBe(false);
    expect(existsSync(join(dir, "evil-abs.txt"))).toBe(false);
    expect(existsSync(join(dir, "outside-x", "evil.txt"))).toBe(false);
  });
  it("requires a fresh read of every file it changes", async () => {
    put("f.txt", "a\n");
    const err = await patch("@@ -1 +1 @@\n-a\n+b\n", "f.txt").catch((e) => e);
    expect(err.details.rule).toBe("read_before_write");
    await read("f.txt");
    put("f.txt", "a\n\n");
    expect((await patch("@@ -1 +1 @@\n-a\n+b\n", "f.txt").catch((e) => e)).details.rule).toBe("stale_read");
    expect(get("f.txt")).toBe("a\n\n");
  });
});

describe("apply_patch: unified diff", () => {
  it("applies a bare-hunks patch with a path argument and returns { patched, path }", async () => {
    put("src/version.ts", 'const version = "1.0.0";\nexport default version;\n');
    await read("src/version.ts");
    const r = await trigger(
      "tool::apply_patch",
      { path: "src/version.ts", patch: '@@ -1,3 +1,3 @@\n-const version = "1.0.0";\n+const version = "1.1.0";\n' },
      { runtime: rt.runtime, userId: "u1", chatId: "chat-1", workingDirectory: proj },
    );
    expect(r).toMatchObject({ patched: true, path: "src/version.ts" });
    expect(get("src/version.ts")).toBe('const version = "1.1.0";\nexport default version;\n');
  });
  it("applies a git diff with several files, hunks, a new and a deleted file", async () => {
    put("a.txt", `${Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join("\n")}\n`);
    put("gone.txt", "bye\n");
    await read("a.txt");
    await read("gone.txt");
    const p = [
      "diff --git a/a.txt b/a.txt",
      "index 111..222 100644",
      "--- a/a.txt",
      "+++ b/a.txt",
      "@@ -2,3 +2,3 @@",
      " line 2",
      "-line 3",
      "+LINE 3",
      " line 4",
      "@@ -20,3 +20,4 @@",
      " line 20",
      " line 21",
      "+inserted",
      " line 22",
      "diff --git a/new/file.txt b/new/file.txt",
      "new file mode 100644",
      "--- /dev/null",
      "+++ b/new/file.txt",
      "@@ -0,0 +1,2 @@",
      "+hello",
      "+world",
      "diff --git a/gone.txt b/gone.txt",
      "deleted file mode 100644",
      "--- a/gone.txt",
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-bye",
      "",
    ].join("\n");
    const r = await patch(p);
    expect(r.files).toEqual([
      { path: "a.txt", action: "update", hunks: 2 },
      { path: "new/file.txt", action: "add", hunks: 1 },
      { path: "gone.txt", action: "delete", hunks: 0 },
    ]);
    const a = get("a.txt").split("\n");
    expect(a[2]).toBe("LINE 3");
    expect(a.slice(19, 23)).toEqual(["line 20", "line 21", "inserted", "line 22"]);
    expect(get("new/file.txt")).toBe("hello\nworld\n");
    expect(existsSync(join(proj, "gone.txt"))).toBe(false);
  });
  it("refuses a symbolic link or submodule (mode 120000 / 160000) instead of writing its target as a file", async () => {
    for (const mode of ["new file mode 120000", "new mode 120000", "new file mode 160000"]) {
      const p = ["diff --git a/link b/link", mode, "--- /dev/null", "+++ b/link", "@@ -0,0 +1 @@", "+/etc/passwd", ""];
      await expect(patch(p.join("\n")), mode).rejects.toMatchObject({
        code: "validation_failed",
        message: expect.stringMatching(/symbolic link or a submodule/),
      });
      expect(existsSync(join(proj, "link"))).toBe(false);
    }
  });
  it("tolerates wrong hunk counts, a bare @@, a context line without its leading space, and shifted lines", async () => {
    put("t.py", "def f():\n    x = 1\n\n    return x\n");
    await read("t.py");
    await patch("--- a/t.py\n+++ b/t.py\n@@ -10,7 +10,9 @@\n def f():\n-    x = 1\n+    x = 2\n\n    return x\n");
    expect(get("t.py")).toBe("def f():\n    x = 2\n\n    return x\n");
    await patch("--- a/t.py\n+++ b/t.py\n@@\n-    return x\n+    return x + 1\n");
    expect(get("t.py")).toBe("def f():\n    x = 2\n\n    return x + 1\n");
  });
  it("keeps CRLF, a missing final newline, the BOM, mode and every byte outside the hunks", async () => {
    put("w.txt", Buffer.from("\uFEFFa\r\nb\r\nc \t\r\nd"));
    chmodSync(join(proj, "w.txt"), 0o640);
    await read("w.txt");
    await patch("@@ -2,1 +2,2 @@\n-b\n+B\n+B2\n", "w.txt");
    expect(readFileSync(join(proj, "w.txt")).toString("utf8")).toBe("\uFEFFa\r\nB\r\nB2\r\nc \t\r\nd");
    expect(statSync(join(proj, "w.txt")).mode & 0o777).toBe(0o640);
    await patch("@@ -4 +4 @@\n-d\n+D\n", "w.txt");
    expect(readFileSync(join(proj, "w.txt")).toString("utf8")).toBe("\uFEFFa\r\nB\r\nB2\r\nc \t\r\nD");
    await patch("@@ -4,1 +4,2 @@\n D\n+E\n", "w.txt");
    expect(readFileSync(join(proj, "w.txt")).toString("utf8")).toBe("\uFEFFa\r\nB\r\nB2\r\nc \t\r\nD\r\nE");
  });
  it("a hunk that does not apply names the file, shows expected and actual lines, and writes nothing", async () => {
    put("one.txt", "1\n2\n3\n");
    put("two.txt", "x\ny\nz\n");
    await read("one.txt");
    await read("two.txt");
    const p =
      "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-1\n+ONE\n--- a/two.txt\n+++ b/two.txt\n@@ -2,2 +2,2 @@\n y\n-NOPE\n+Z\n";
    const err = await patch(p).catch((e) => e);
    expect(err.code).toBe("execution_failed");
    expect(err.message).toMatch(/Hunk 1 of 1 for "two.txt" did not apply/);
    expect(err.message).toMatch(/Expected:\n {2}\|y\n {2}\|NOPE/);
    expect(err.message).toMatch(/The file has at line 2:\n {2}\|y\n {2}\|z/);
    expect(get("one.txt")).toBe("1\n2\n3\n");
    expect(get("two.txt")).toBe("x\ny\nz\n");
  });
  it("refuses a non-UTF-8 file instead of re-encoding it", async () => {
    put("bad.txt", Buffer.from([0x61, 0x0a, 0xff, 0x0a]));
    await read("bad.txt");
    expect((await patch("@@ -1 +1 @@\n-a\n+b\n", "bad.txt").catch((e) => e)).details.rule).toBe("not_utf8");
  });
});

describe("apply_patch: *** Begin Patch envelope", () => {
  it("adds, updates with an anchor, moves and deletes", async () => {
    put(
      "src/app.py",
      "class A:\n    def run(self):\n        return 1\n\nclass B:\n    def run(self):\n        return 1\n",
    );
    put("old/name.txt", "keep me\n");
    put("tmp.txt", "temp\n");
    for (const f of ["src/app.py", "old/name.txt", "tmp.txt"]) await read(f);
    const p = [
      "*** Begin Patch",
      "*** Add File: docs/NEW.md",
      "+# New",
      "+text",
      "*** Update File: src/app.py",
      "@@ class B:",
      "     def run(self):",
      "-        return 1",
      "+        return 2",
      "*** Update File: old/name.txt",
      "*** Move to: new/name.txt",
      "@@",
      "-keep me",
      "+kept",
      "*** Delete File: tmp.txt",
      "*** End Patch",
    ].join("\n");
    const r = await patch(p);
    expect(r.files.map((f: any) => f.action)).toEqual(["add", "update", "move", "delete"]);
    expect(get("docs/NEW.md")).toBe("# New\ntext\n");
    expect(get("src/app.py")).toBe(
      "class A:\n    def run(self):\n        return 1\n\nclass B:\n    def run(self):\n        return 2\n",
    );
    expect(get("new/name.txt")).toBe("kept\n");
    expect(existsSync(join(proj, "old/name.txt"))).toBe(false);
    expect(existsSync(join(proj, "tmp.txt"))).toBe(false);
  });
  it("refuses an Add over an existing file and a malformed envelope", async () => {
    put("x.txt", "x\n");
    const err = await patch("*** Begin Patch\n*** Add File: x.txt\n+y\n*** End Patch\n").catch((e) => e);
    expect(err.details.rule).toBe("exists");
    const bad = await patch("*** Begin Patch\n*** Frobnicate: x.txt\n*** End Patch\n").catch((e) => e);
    expect(bad.code).toBe("validation_failed");
    expect(get("x.txt")).toBe("x\n");
  });
});

describe("apply_patch: a write that fails after others leaves every file as it was", () => {
  const update = "*** Update File: a.txt\n@@\n-one\n+ONE\n";
  it("refuses a target under a file before writing anything, naming the patch argument", async () => {
    put("a.txt", "one\n");
    put("f.txt", "file\n");
    await read("a.txt");
    const err = await patch(`*** Begin Patch\n${update}*** Add File: f.txt/sub/new.txt\n+new\n*** End Patch\n`).catch(
      (e) => e,
    );
    expect(err.code).toBe("validation_failed");
    expect(err.details).toMatchObject({ argument: "patch", rule: "not_a_directory" });
    expect(err.message).toMatch(/Nothing was written/);
    expect(get("a.txt")).toBe("one\n");
  });
  it("undoes the writes made before one that fails (a file the patch adds is the parent of another)", async () => {
    put("a.txt", "one\n");
    put("gone.txt", "keep me\n");
    await read("a.txt");
    await read("gone.txt");
    const err = await patch(
      `*** Begin Patch\n${update}*** Delete File: gone.txt\n*** Add File: x.txt\n+x\n*** Add File: x.txt/y/z.txt\n+z\n*** End Patch\n`,
    ).catch((e) => e);
    expect(err.code).toBe("validation_failed");
    expect(err.message).toMatch(/Nothing was written/);
    expect(get("a.txt")).toBe("one\n");
    expect(get("gone.txt")).toBe("keep me\n");
    expect(existsSync(join(proj, "x.txt"))).toBe(false);
    // The restored file still counts as read: the chat can patch it without reading it again.
    expect((await patch(`*** Begin Patch\n${update}*** End Patch\n`)).files).toHaveLength(1);
    expect(get("a.txt")).toBe("ONE\n");
  });
});

describe("apply_patch: a file another process creates after the plan is not overwritten unread", () => {
  it("refuses the Add with `exists` and leaves that file as the other process wrote it", async () => {
    put("a.txt", "one\n");
    const ledger = new MemoryFreshnessLedger();
    // The freshness check of a.txt runs after new.txt was planned as an Add: another writer creates it there.
    const racing = {
      recordRead: (chat: string, path: string, sha: string) => ledger.recordRead(chat, path, sha),
      getRead: async (chat: string, path: string) => {
        if (path.endsWith("a.txt")) writeFileSync(join(proj, "new.txt"), "theirs\n");
        return ledger.getRead(chat, path);
      },
    };
    const context = makeContext({ workingDirectory: proj, ledger: racing });
    await readFileForChat("a.txt", context, "text");
    const err = await applyPatch(
      {
        patch: "*** Begin Patch\n*** Add File: new.txt\n+mine\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch\n",
      },
      context,
    ).catch((e) => e);
    expect(err).toMatchObject({ code: "execution_failed", details: { rule: "exists" } });
    expect(get("new.txt")).toBe("theirs\n");
    expect(get("a.txt")).toBe("one\n");
  });
});

describe("apply_patch: hunks out of file order or overlapping", () => {
  it("says the hunk comes before the previous one instead of showing identical expected and actual lines", async () => {
    put("a.txt", "one\ntwo\nthree\n");
    await read("a.txt");
    const swapped = "--- a/a.txt\n+++ b/a.txt\n@@ -3 +3 @@\n-three\n+THREE\n@@ -1 +1 @@\n-one\n+ONE\n";
    const err = await patch(swapped).catch((e) => e);
    expect(err.details).toMatchObject({ rule: "hunk_order", hunk: 2 });
    expect(err.message).toMatch(/Hunk 2 of 2 for "a\.txt".*line 1.*before.*hunk 1/s);
    const overlapping =
      "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-one\n+ONE\n two\n@@ -2,2 +2,2 @@\n two\n-three\n+THREE\n";
    expect((await patch(overlapping).catch((e) => e)).details).toMatchObject({ rule: "hunk_order", hunk: 2 });
    expect(get("a.txt")).toBe("one\ntwo\nthree\n");
  });
});
