/**
 * apply_patch against the shapes real models send: padded envelope markers, missing markers, stacked `@@` anchors,
 * heredoc-wrapped patches, moves onto existing files, and the all-or-nothing report.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { parsePatch, unwrapHeredoc } from "../../src/tools/fs/patch-parse.js";
import { fsRuntime, tempDir } from "./helpers.js";

const { dir, cleanup } = tempDir();
afterAll(() => cleanup());
let n = 0;
let proj: string;
let rt: ReturnType<typeof fsRuntime>;

beforeEach(() => {
  proj = join(dir, `s${n++}`);
  mkdirSync(proj);
  rt = fsRuntime(proj);
});

const put = (name: string, data: string) => {
  mkdirSync(join(proj, name, ".."), { recursive: true });
  writeFileSync(join(proj, name), data);
};
const get = (name: string) => readFileSync(join(proj, name), "utf8");
const read = (path: string) => rt.call("read_file", { path });
async function patch(p: string) {
  const out = await rt.call("apply_patch", { patch: p });
  if (!out.ok) throw Object.assign(new Error(out.error.message), out.error);
  return out.result as any;
}

const PY = [
  "class First:",
  "    def target(self):",
  "        return 1",
  "",
  "class Second:",
  "    def other(self):",
  "        return 2",
  "",
  "    def target(self):",
  "        return 1",
  "",
].join("\n");

describe("envelope markers padded with whitespace", () => {
  it.each([
    ["a padded End Patch", "*** Begin Patch", " *** End Patch"],
    ["a Begin Patch with a trailing tab", "*** Begin Patch\t", "*** End Patch"],
    ["both padded", "  *** Begin Patch  ", "\t*** End Patch\t"],
  ])("accepts %s", async (_label, begin, end) => {
    put("a.txt", "one\ntwo\n");
    await read("a.txt");
    await patch([begin, " *** Update File: a.txt", "@@", "-two", "+three", end].join("\n"));
    expect(get("a.txt")).toBe("one\nthree\n");
  });

  it("says which line was expected where when a marker is truly missing", () => {
    expect(() => parsePatch("*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n")).toThrow(
      /no "\*\*\* End Patch" line: expected it as the last line, after line 5 \("\+b"\)/,
    );
    expect(() => parsePatch("*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch\n")).toThrow(
      /expected "\*\*\* Begin Patch" as the first line of the envelope, but the first line is "\*\*\* Update File: a.txt" \(line 1\)/,
    );
  });
});

describe("stacked @@ anchors", () => {
  it("each anchor narrows the search in order: the edit lands in Second.target, not First.target", async () => {
    put("m.py", PY);
    await read("m.py");
    await patch(
      [
        "*** Begin Patch",
        "*** Update File: m.py",
        "@@ class Second",
        "@@ def target(self):",
        "-        return 1",
        "+        return 42",
        "*** End Patch",
      ].join("\n"),
    );
    // First.target is untouched; Second.target changed.
    expect(get("m.py").split("\n")[2]).toBe("        return 1");
    expect(get("m.py").split("\n")[9]).toBe("        return 42");
  });

  it("anchors that cannot be satisfied in order are refused and nothing is written", async () => {
    put("m.py", PY);
    await read("m.py");
    const err = await patch(
      [
        "*** Begin Patch",
        "*** Update File: m.py",
        "@@ class Second",
        "@@ def missing(self):",
        "-        return 1",
        "+        return 42",
        "*** End Patch",
      ].join("\n"),
    ).catch((e) => e);
    expect(err.details.rule).toBe("anchor_not_found");
    expect(err.message).toMatch(/anchor "@@ def missing\(self\):" matches no line after "@@ class Second" \(line 5\)/);
    expect(err.message).toMatch(/Nothing was written/);
    expect(get("m.py")).toBe(PY);
  });

  it("anchors out of file order are refused rather than applied elsewhere", async () => {
    put("m.py", PY);
    await read("m.py");
    const err = await patch(
      [
        "*** Begin Patch",
        "*** Update File: m.py",
        "@@ class Second",
        "@@ class First",
        "     def target(self):",
        "-        return 1",
        "+        return 42",
        "*** End Patch",
      ].join("\n"),
    ).catch((e) => e);
    expect(err.details.rule).toBe("anchor_not_found");
    expect(get("m.py")).toBe(PY);
  });
});

describe("unified-diff hunk headers inside the envelope", () => {
  it("are position hints: the hunk lands at the numbered place, even where its lines repeat", async () => {
    put("m.py", PY);
    await read("m.py");
    // Lines 9–10 are Second.target; First.target (lines 2–3) has the same body and comes first.
    await patch(
      [
        "*** Begin Patch",
        "*** Update File: m.py",
        "@@ -9,2 +9,2 @@",
        "     def target(self):",
        "-        return 1",
        "+        return 42",
        "*** End Patch",
      ].join("\n"),
    );
    expect(get("m.py").split("\n")[2]).toBe("        return 1");
    expect(get("m.py").split("\n")[9]).toBe("        return 42");
  });

  it("a wrong number still applies by context; a header with section text, stacked under an anchor, too", async () => {
    put("a.txt", "one\ntwo\nthree\n");
    await read("a.txt");
    await patch(
      ["*** Begin Patch", "*** Update File: a.txt", "@@ -40,3 +40,3 @@", " one", "-two", "+2", "*** End Patch"].join(
        "\n",
      ),
    );
    expect(get("a.txt")).toBe("one\n2\nthree\n");
    put("m.py", PY);
    await read("m.py");
    await patch(
      [
        "*** Begin Patch",
        "*** Update File: m.py",
        "@@ class Second",
        "@@ -1,2 +1,2 @@ def target(self):",
        "-        return 1",
        "+        return 7",
        "*** End Patch",
      ].join("\n"),
    );
    expect(get("m.py").split("\n")[9]).toBe("        return 7");
    expect(parsePatch("*** Begin Patch\n*** Update File: a\n@@ -12,7 +12,8 @@\n-x\n+y\n*** End Patch")).toMatchObject([
      { kind: "update", hunks: [{ oldStart: 12 }] },
    ]);
    expect(
      (
        parsePatch("*** Begin Patch\n*** Update File: a\n@@ -12,7 +12,8 @@\n-x\n+y\n*** End Patch")[0] as {
          hunks: { anchors?: string[] }[];
        }
      ).hunks[0]?.anchors,
    ).toBeUndefined();
  });
});

describe("heredoc-wrapped patches", () => {
  it.each([
    ["apply_patch <<'EOF'", "EOF"],
    ['apply_patch <<"PATCH"', "PATCH"],
    ["apply_patch <<EOF", "EOF"],
  ])("unwraps %s … %s", async (open, close) => {
    put("h.txt", "x\n");
    await read("h.txt");
    await patch(
      [open, "*** Begin Patch", "*** Update File: h.txt", "@@", "-x", "+y", "*** End Patch", close, ""].join("\n"),
    );
    expect(get("h.txt")).toBe("y\n");
  });

  it("leaves text that only looks like a heredoc alone", () => {
    const lines = ["apply_patch <<'EOF'", "*** Begin Patch", "*** End Patch"];
    expect(unwrapHeredoc(lines)).toBe(lines);
  });
});

describe("moves and all-or-nothing refusals", () => {
  it("a move onto an existing file says how to replace it, and delete plus move in one patch works", async () => {
    put("a.txt", "from a\n");
    put("b.txt", "old b\n");
    await read("a.txt");
    await read("b.txt");
    const move = ["*** Update File: a.txt", "*** Move to: b.txt", "@@", "-from a", "+moved a"];
    const err = await patch(["*** Begin Patch", ...move, "*** End Patch"].join("\n")).catch((e) => e);
    expect(err.details.rule).toBe("exists");
    expect(err.message).toMatch(/put "\*\*\* Delete File: b.txt" in the same patch before/);
    expect(err.message).toMatch(/Nothing was written/);
    expect(get("b.txt")).toBe("old b\n");
    const r = await patch(["*** Begin Patch", "*** Delete File: b.txt", ...move, "*** End Patch"].join("\n"));
    expect(r.files.map((f: any) => f.action)).toEqual(["delete", "move"]);
    expect(get("b.txt")).toBe("moved a\n");
    expect(existsSync(join(proj, "a.txt"))).toBe(false);
  });

  it("a failure says nothing was written, naming files the patch would have added", async () => {
    put("c.txt", "c\n");
    await read("c.txt");
    const err = await patch(
      [
        "*** Begin Patch",
        "*** Add File: new1.txt",
        "+n",
        "*** Add File: new2.txt",
        "+n",
        "*** Update File: c.txt",
        "@@",
        "-not there",
        "+x",
        "*** End Patch",
      ].join("\n"),
    ).catch((e) => e);
    expect(err.details.rule).toBe("hunk_mismatch");
    expect(err.message).toMatch(
      /Nothing was written: the patch is all or nothing, so no file was changed, moved or deleted, and "new1.txt", "new2.txt" were not created\./,
    );
    expect(existsSync(join(proj, "new1.txt"))).toBe(false);
    expect(get("c.txt")).toBe("c\n");
  });

  it("a patch adding one file twice names it once among the files not created", async () => {
    const err = await patch(
      ["*** Begin Patch", "*** Add File: twice.txt", "+a", "*** Add File: twice.txt", "+b", "*** End Patch"].join("\n"),
    ).catch((e) => e);
    expect(err.message).toMatch(/Nothing was written/);
    expect(err.message.match(/"twice\.txt"/g)?.length ?? 0).toBeLessThanOrEqual(2);
    expect(err.message).toMatch(/and "twice\.txt" was not created\./);
    expect(existsSync(join(proj, "twice.txt"))).toBe(false);
  });
});

describe("git's quoted paths (core.quotePath: non-ASCII, tabs, quotes)", () => {
  it("parses C-style quoted headers, octal bytes included, in ---/+++, diff --git and rename lines", () => {
    const ops = parsePatch(
      [
        'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"',
        'rename from "caf\\303\\251.txt"',
        'rename to "na\\303\\257ve \\"q\\".txt"',
        'diff --git "a/t\\tab.txt" "b/t\\tab.txt"',
        "index 1111111..2222222 100644",
        '--- "a/t\\tab.txt"',
        '+++ "b/t\\tab.txt"',
        "@@ -1 +1 @@",
        "-one",
        "+ONE",
      ].join("\n"),
    );
    expect(ops).toMatchObject([
      { kind: "update", path: "café.txt", moveTo: 'naïve "q".txt' },
      { kind: "update", path: "t\tab.txt" },
    ]);
    // Unquoted names with spaces (a mode change has no ---/+++ lines to name the file).
    expect(parsePatch("diff --git a/my file.txt b/my file.txt\nold mode 100644\nnew mode 100755\n")).toMatchObject([
      { kind: "update", path: "my file.txt" },
    ]);
  });
  it("applies git's diff of a file with a non-ASCII name to that file", async () => {
    put("café.txt", "one\n");
    await read("café.txt");
    const result = await patch(
      'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"\n--- "a/caf\\303\\251.txt"\n+++ "b/caf\\303\\251.txt"\n@@ -1 +1 @@\n-one\n+ONE\n',
    );
    expect(result.files).toEqual([{ path: "café.txt", action: "update", hunks: 1 }]);
    expect(get("café.txt")).toBe("ONE\n");
  });
});

describe("apply_patch's path argument", () => {
  it("is refused when the patch names its own files and none of them is path (it would be ignored)", async () => {
    put("a.txt", "one\n");
    put("b.txt", "one\n");
    await read("a.txt");
    await read("b.txt");
    const envelope = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch\n";
    const out = await rt.call("apply_patch", { patch: envelope, path: "b.txt" });
    expect(out).toMatchObject({ ok: false, error: { code: "validation_failed", details: { rule: "path_unused" } } });
    expect(get("a.txt")).toBe("one\n");
    // The same file named both ways is fine, however it is spelled.
    expect(await rt.call("apply_patch", { patch: envelope, path: join(proj, "a.txt") })).toMatchObject({ ok: true });
    expect(get("a.txt")).toBe("ONE\n");
  });
});
