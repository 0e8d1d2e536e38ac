/**
 * Argument edge cases of the file tools, through executeTool as a host calls it: each is `validation_failed` (or
 * the classified answer named) with a short message that says what to send, quotes at most ~100 characters of
 * the argument, and never shows the server's absolute paths for something the caller did not name.
 */
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clip, messageWithoutPaths, toToolError } from "../../src/core/errors.js";
import type { ToolCallOutcome } from "../../src/core/runtime.js";
import { memoryRuntime } from "../helpers/runtime.js";
import { tempDir } from "./helpers.js";

let dir: string;
let cleanup: () => void;
let proj: string;
let dataDir: string;
let rt: ReturnType<typeof memoryRuntime>;

beforeAll(() => {
  ({ dir, cleanup } = tempDir("toolhost-args-"));
  proj = join(dir, "proj");
  dataDir = join(dir, "data");
  mkdirSync(join(proj, "sub"), { recursive: true });
  mkdirSync(dataDir);
  writeFileSync(join(proj, "a.txt"), "alpha\n");
  writeFileSync(join(proj, "sub", "b.ts"), "export const b = 1;\n");
  writeFileSync(join(dataDir, "toolhost.db"), "not really a database");
  symlinkSync("loop-b", join(proj, "loop-a"));
  symlinkSync("loop-a", join(proj, "loop-b"));
  rt = memoryRuntime(dataDir);
});
afterAll(() => cleanup());

const call = (tool: string, args: unknown, workingDirectory: string | null = proj) =>
  rt.runtime.executeTool(tool, args, { userId: "u1", chatId: "c1", workingDirectory, allowDefaultDisabled: true });

/**
 * Asserts a refusal: its code, rule, a message under 600 characters that names neither the tree nor the repository
 * (unless `named`: the caller gave an absolute path itself).
 */
function refused(outcome: ToolCallOutcome, code: string, rule?: string, message?: RegExp, named = false) {
  expect(outcome.ok, JSON.stringify(outcome)).toBe(false);
  if (outcome.ok) return;
  expect(outcome.error.code, outcome.error.message).toBe(code);
  if (rule) expect(outcome.error.details?.rule, outcome.error.message).toBe(rule);
  if (message) expect(outcome.error.message).toMatch(message);
  expect(outcome.error.message.length, outcome.error.message).toBeLessThan(600);
  if (named) return;
  expect(outcome.error.message).not.toContain(dir);
  expect(outcome.error.message).not.toContain(process.cwd());
  expect(JSON.stringify(outcome.error.details ?? {})).not.toContain(dir);
}

const long = "n".repeat(300);

describe("known cases", () => {
  it("a path component over 255 bytes is validation_failed naming the limit, not ENAMETOOLONG with the server path", async () => {
    for (const tool of ["read_file", "list_directory", "file_read", "file_list"]) {
      refused(await call(tool, { path: long }), "validation_failed", "name_too_long", /at most 255 bytes/);
      refused(await call(tool, { path: `sub/${long}/x.txt` }), "validation_failed", "name_too_long");
    }
    refused(await call("write_file", { path: long, content: "x" }), "validation_failed", "name_too_long");
    refused(await call("file_write", { path: `sub/${long}`, content: "x" }), "validation_failed", "name_too_long");
    refused(await call("grep", { pattern: "x", path: long }), "validation_failed", "name_too_long");
    refused(await call("glob", { pattern: "*", cwd: long }), "validation_failed", "name_too_long");
    refused(await call("glob", { pattern: `${long}/*.ts` }), "validation_failed", "name_too_long");
    refused(
      await call("apply_patch", { patch: `*** Begin Patch\n*** Add File: ${long}\n+x\n*** End Patch` }),
      "validation_failed",
      "name_too_long",
      /Nothing was written/,
    );
    // Multi-byte names count in bytes: 100 three-byte characters are 300 bytes.
    refused(await call("read_file", { path: "€".repeat(100) }), "validation_failed", "name_too_long", /300 bytes/);
  });

  it("exactly at the limits is fine: a 255-byte name is written (its temp file's name is cut to fit), a 4095-byte path is looked up", async () => {
    const name = `${"é".repeat(127)}x`;
    expect(await call("write_file", { path: name, content: "at the limit\n" })).toMatchObject({ ok: true });
    expect(await call("read_file", { path: name })).toMatchObject({
      ok: true,
      result: { content: expect.stringContaining("at the limit") },
    });
    const added = await call("apply_patch", {
      patch: `*** Begin Patch\n*** Add File: ${"p".repeat(255)}\n+x\n*** End Patch`,
    });
    expect(added).toMatchObject({ ok: true });
    // A path at the 4,095-byte limit inside the working directory is written too (its temp file's name is cut).
    const room = 4095 - Buffer.byteLength(proj) - 1;
    const nested = `${"q".repeat(200)}/`.repeat(Math.floor(room / 201) - 1);
    const atLimit = `${nested}${"z".repeat(room - Buffer.byteLength(nested))}`;
    expect(Buffer.byteLength(`${proj}/${atLimit}`)).toBe(4095);
    expect(await call("write_file", { path: atLimit, content: "deep\n", createDirectories: true })).toMatchObject({
      ok: true,
    });
    const deep = `/${`${"d".repeat(254)}/`.repeat(16)}${"f".repeat(14)}`;
    expect(Buffer.byteLength(deep)).toBe(4095);
    refused(await call("read_file", { path: deep }), "access_denied", "workingDirectory", undefined, true);
  });

  it("the message quotes at most ~100 characters of the argument", async () => {
    const outcome = await call("read_file", { path: `${"d".repeat(200)}/${long}` });
    refused(outcome, "validation_failed", "name_too_long");
    if (!outcome.ok) expect(outcome.error.message).not.toContain("n".repeat(101));
  });

  it("a glob pattern ending in / says what to send instead", async () => {
    refused(
      await call("glob", { pattern: "sub/" }),
      "validation_failed",
      "trailing_slash",
      /Send "sub" .* "sub\/\*\*"/,
    );
    refused(await call("glob", { pattern: "./" }), "validation_failed", "trailing_slash");
    refused(await call("grep", { pattern: "x", path: ".", glob: "sub/" }), "validation_failed", "trailing_slash");
  });

  it("a glob's pattern or grep's glob over the length limit is validation_failed without echoing it", async () => {
    const huge = "*".repeat(70_000);
    refused(await call("glob", { pattern: huge }), "validation_failed", "pattern_too_long", /at most 16384/);
    refused(await call("grep", { pattern: "x", path: ".", glob: huge }), "validation_failed", "pattern_too_long");
  });

  it("a regex too large for the engine is validation_failed quoting only its start", async () => {
    const pattern = "a".repeat(200_000);
    const outcome = await call("grep", { pattern, path: "." });
    refused(outcome, "validation_failed", "regex_too_large", /too large for the engine/);
    if (!outcome.ok) expect(outcome.error.message).not.toContain("a".repeat(61));
  });

  it("a regex V8 would take exponential time to compile is refused without holding the event loop", async () => {
    // Alternations of repeated letters inside a repeated group: V8's compile time grows exponentially with the
    // repetitions (four took 225 ms here, seven run for minutes). Over 256 characters, grep compiles the pattern
    // in a throwaway process with a deadline; the event loop keeps turning meanwhile.
    const letters = Array.from({ length: 100 }, (_, i) => String.fromCharCode(97 + (i % 26))).join("|");
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    const outcome = await call("grep", { pattern: `(?:${letters})`.repeat(7), path: "." });
    clearInterval(ticker);
    refused(outcome, "validation_failed", "regex_too_costly", /takes too long to compile/);
    if (!outcome.ok) expect(outcome.error.message).not.toContain(letters.slice(0, 61));
    expect(ticks).toBeGreaterThan(20); // the deadline is 2 s: the loop turned throughout
  });

  it("a long regex that compiles is searched (compiled first in a throwaway process); one over 32,768 characters is too large", async () => {
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join("|");
    const outcome = await call("grep", { pattern: `(?:${words}|alpha)`, path: "." });
    expect(outcome).toMatchObject({ ok: true, result: { matches: [{ text: "alpha" }] } });
    const invalid = await call("grep", { pattern: `${"x".repeat(300)}(`, path: "." });
    refused(invalid, "validation_failed", "invalid_regex", /Unterminated group/);
    refused(await call("grep", { pattern: "x".repeat(32_769), path: "." }), "validation_failed", "regex_too_large");
  });

  it("a glob that would take exponential time to match is refused: many stars in one name, extended glob groups", async () => {
    // "*a*a*a*a*a*a*a*a*a*a*b" held the event loop for seconds on a single 31-character name.
    refused(await call("glob", { pattern: `${"*a".repeat(10)}*b` }), "validation_failed", "too_many_wildcards");
    refused(await call("glob", { pattern: "*?*?*?*?c" }), "validation_failed", "too_many_wildcards");
    refused(
      await call("grep", { pattern: "x", path: ".", glob: "*a*a*a*b" }),
      "validation_failed",
      "too_many_wildcards",
    );
    refused(await call("glob", { pattern: "+(a|aa)c" }), "validation_failed", "extglob", /\{a,b\}/);
    refused(await call("grep", { pattern: "x", path: ".", glob: "*(a)" }), "validation_failed", "extglob");
    // Three stars, a globstar and escaped parentheses are fine.
    expect(await call("glob", { pattern: "**/*a*b*.ts" })).toMatchObject({ ok: true });
    expect(await call("glob", { pattern: "sub/[(]x" })).toMatchObject({ ok: true, result: { matches: [] } });
  });

  it("a NUL byte in grep's glob is validation_failed (it used to reach ripgrep's argv)", async () => {
    refused(await call("grep", { pattern: "x", path: ".", glob: "a\0b" }), "validation_failed", "nul_byte");
  });
});

describe("siblings of the known cases", () => {
  it("NUL bytes and lone surrogates in any path argument", async () => {
    refused(await call("read_file", { path: "a\0.txt" }), "validation_failed", "nul_byte");
    refused(await call("glob", { pattern: "a\0*" }), "validation_failed", "nul_byte");
    refused(await call("glob", { pattern: "*", cwd: "sub\0" }), "validation_failed", "nul_byte");
    refused(await call("read_file", { path: "a\uD800.txt" }), "validation_failed", "invalid_unicode");
    refused(await call("glob", { pattern: "\uDC00*" }), "validation_failed", "invalid_unicode");
    refused(await call("grep", { pattern: "x", path: ".", glob: "*\uD800" }), "validation_failed", "invalid_unicode");
    refused(await call("write_file", { path: "\uDFFF", content: "" }), "validation_failed", "invalid_unicode");
    // A well-formed astral character is fine.
    refused(await call("read_file", { path: "\u{1F600}.txt" }), "not_found");
  });

  it("paths over 4095 bytes, given or once the working directory is in front", async () => {
    refused(await call("read_file", { path: "a/".repeat(3000) }), "validation_failed", "path_too_long");
    const nearly = "d/".repeat(2040); // 4080 bytes: fine alone, too long under the working directory
    refused(await call("read_file", { path: nearly }), "validation_failed", "path_too_long", /resolves to a path of/);
    refused(await call("glob", { pattern: `${"a/".repeat(2100)}*` }), "validation_failed", "path_too_long");
  });

  it("ELOOP and ENOTDIR on a path component", async () => {
    refused(await call("read_file", { path: "loop-a" }), "validation_failed", "symlink_loop");
    refused(await call("list_directory", { path: "loop-a/x" }), "validation_failed", "symlink_loop");
    refused(await call("glob", { pattern: "loop-a/x/*" }), "validation_failed", "symlink_loop");
    refused(
      await call("write_file", { path: "a.txt/new/file", content: "", createDirectories: true }),
      "validation_failed",
      "not_a_directory",
      /a parent of "a.txt\/new\/file" is a file/,
    );
    refused(await call("file_write", { path: "a.txt/x/y", content: "" }), "validation_failed", "not_a_directory");
    refused(await call("read_file", { path: "a.txt/x" }), "not_found");
  });

  it("a trailing / names a directory: a file given with one is not_a_directory, a new file cannot be named so", async () => {
    for (const [tool, args] of [
      ["read_file", { path: "a.txt/" }],
      ["file_read", { path: "a.txt/" }],
      ["read_file", { path: "a.txt/." }],
      ["list_directory", { path: "a.txt/" }],
      ["file_list", { path: "a.txt/" }],
      ["grep", { pattern: "alpha", path: "a.txt/" }],
      ["write_file", { path: "a.txt/", content: "x" }],
      ["file_write", { path: "a.txt/", content: "x" }],
    ] as const) {
      refused(await call(tool, args), "validation_failed", "not_a_directory", /ends with "\/"/);
    }
    for (const [tool, args] of [
      ["write_file", { path: "fresh.txt/", content: "x" }],
      ["file_write", { path: "fresh.txt/", content: "x" }],
      ["read_file", { path: "sub/" }],
    ] as const) {
      refused(await call(tool, args), "validation_failed", "kind");
    }
    // A directory with a trailing slash is still that directory.
    expect(await call("list_directory", { path: "sub/" })).toMatchObject({ ok: true });
    expect(await call("grep", { pattern: "export", path: "sub/" })).toMatchObject({ ok: true });
    // The file was left alone.
    expect(await call("read_file", { path: "a.txt" })).toMatchObject({ ok: true });
  });

  it("the shell's cwd gets the same checks as any path, before anything runs", async () => {
    for (const tool of ["bash", "shell_exec"]) {
      const run = (cwd: string) =>
        call(tool, tool === "bash" ? { command: "touch ran", cwd } : { argv: ["touch", "ran"], cwd });
      refused(await run("sub\0x"), "validation_failed", "nul_byte");
      refused(await run(`sub/${long}`), "validation_failed", "name_too_long");
      refused(await run("ab/".repeat(1400)), "validation_failed", "path_too_long");
      refused(await run("sub\uD800"), "validation_failed", "invalid_unicode");
      refused(await run("loop-a"), "validation_failed", "symlink_loop");
      refused(await run("a.txt"), "validation_failed", "kind");
      refused(await run("a.txt/"), "validation_failed", "not_a_directory");
      refused(await run("missing"), "not_found");
    }
    // Nothing ran: no refused call created its file anywhere in the tree.
    expect(existsSync(join(proj, "ran"))).toBe(false);
    expect(existsSync(join(proj, "sub", "ran"))).toBe(false);
  });

  it("empty and blank strings", async () => {
    refused(await call("read_file", { path: "" }), "validation_failed", "non_empty");
    refused(await call("read_file", { path: "   " }), "validation_failed", "non_empty");
    refused(await call("glob", { pattern: "" }), "validation_failed", "non_empty");
    refused(await call("glob", { pattern: "!" }), "validation_failed", "empty_negation");
    refused(await call("grep", { pattern: "x", path: ".", glob: "!" }), "validation_failed", "empty_negation");
    refused(await call("glob", { pattern: "a//b" }), "validation_failed", "empty_name");
    refused(await call("apply_patch", { patch: "  " }), "validation_failed");
  });

  it("numbers out of range: negative, fractional, huge", async () => {
    refused(await call("read_file", { path: "a.txt", startLine: -1 }), "validation_failed", "minimum");
    refused(await call("read_file", { path: "a.txt", startLine: 1.5 }), "validation_failed", "type");
    refused(await call("read_file", { path: "a.txt", maxLines: 1e300 }), "validation_failed", "maximum");
    refused(await call("read_file", { path: "a.txt", startLine: 1e300 }), "validation_failed", "range");
    refused(await call("file_read", { path: "a.txt", maxBytes: -5 }), "validation_failed", "minimum");
    const huge = await call("file_read", { path: "a.txt", maxBytes: Number.MAX_SAFE_INTEGER });
    expect(huge).toMatchObject({ ok: true, result: { content: "alpha\n" } });
  });

  it("an unknown argument key is quoted in part", async () => {
    const outcome = await call("read_file", { path: "a.txt", ["k".repeat(5000)]: 1 });
    refused(outcome, "validation_failed", "unknown argument");
    if (!outcome.ok) expect(outcome.error.message).not.toContain("k".repeat(101));
  });

  it("an invalid regex quotes at most ~100 characters and not the engine's copy", async () => {
    const outcome = await call("grep", { pattern: `${"b".repeat(500)}(`, path: "." });
    refused(outcome, "validation_failed", "invalid_regex", /Unterminated group/);
    if (!outcome.ok) expect(outcome.error.message).not.toContain("b".repeat(101));
  });

  it("a glob ripgrep cannot parse falls back to the JS engine instead of 'could not be read'", async () => {
    for (const glob of ["[", "*.{ts", "{a,{b,c}}"]) {
      const outcome = await call("grep", { pattern: "export", path: ".", glob });
      expect(outcome.ok, JSON.stringify(outcome)).toBe(true);
      if (outcome.ok) expect((outcome.result as { skipped: { unreadable: number } }).skipped.unreadable).toBe(0);
    }
    const braces = await call("grep", { pattern: "export", path: ".", glob: "*.{ts,md}" });
    expect(braces).toMatchObject({ ok: true, result: { matches: [{ file: "sub/b.ts", line: 1 }] } });
  });

  it("a long hunk over a file whose lines repeat is refused within a bounded search, not after minutes", async () => {
    // 500 removed lines of "x" then "y", against 50,000 lines of "x": every place is tried with every comparison.
    writeFileSync(join(proj, "repeat.txt"), "x\n".repeat(50_000));
    expect((await call("read_file", { path: "repeat.txt", maxLines: 1 })).ok).toBe(true);
    const patch = `--- a/repeat.txt\n+++ b/repeat.txt\n@@\n${"-x\n".repeat(500)}-y\n+z\n`;
    refused(await call("apply_patch", { patch }), "validation_failed", "hunk_too_costly", /line numbers/);
    // With line numbers (and distinctive context) the same file patches at once.
    const ok = await call("apply_patch", {
      patch: "--- a/repeat.txt\n+++ b/repeat.txt\n@@ -2,1 +2,1 @@\n-x\n+second\n",
    });
    expect(ok).toMatchObject({ ok: true });
  });

  it("a long apply_patch anchor or line is quoted in part", async () => {
    expect((await call("read_file", { path: "a.txt" })).ok).toBe(true);
    const anchor = "z".repeat(3000);
    const outcome = await call("apply_patch", {
      patch: `*** Begin Patch\n*** Update File: a.txt\n@@ ${anchor}\n-alpha\n+beta\n*** End Patch`,
    });
    refused(outcome, "execution_failed", "anchor_not_found");
    if (!outcome.ok) expect(outcome.error.message).not.toContain("z".repeat(101));
    const line = await call("apply_patch", { patch: `*** Begin Patch\n${"q".repeat(5000)}\n*** End Patch` });
    refused(line, "validation_failed", "patch_syntax");
    if (!line.ok) expect(line.error.message).not.toContain("q".repeat(101));
  });
});

describe("answers that named server paths", () => {
  it("a glob without a working directory, for a caller who may not use the process's, names no directory", async () => {
    const own = memoryRuntime(dataDir);
    own.runtime.processCwdFallback = () => false;
    const outcome = await own.runtime.executeTool("glob", { pattern: "*" }, { userId: "u1", workingDirectory: null });
    refused(outcome, "access_denied", "noWorkingDirectory", /Access denied to "\."/);
  });

  it("the database file gets the answer of any other path outside the allowed directories", async () => {
    const db = await call("read_file", { path: join(dataDir, "toolhost.db") });
    const other = await call("read_file", { path: join(dir, "elsewhere.txt") });
    refused(db, "access_denied", "workingDirectory", undefined, true);
    expect(db.ok || other.ok).toBe(false);
    if (!db.ok && !other.ok) {
      expect(db.error.message.replace(join(dataDir, "toolhost.db"), "P")).toBe(
        other.error.message.replace(join(dir, "elsewhere.txt"), "P"),
      );
    }
  });

  it("inside the allowed directories, a protected path answers like a deniedPaths entry", async () => {
    const inside = await call("read_file", { path: "data/toolhost.db" }, dir);
    await rt.store.save("u1", "read_file", { enabled: null, parameters: { deniedPaths: [join(dir, "proj")] } });
    const denied = await call("read_file", { path: "proj/a.txt" }, dir);
    await rt.store.save("u1", "read_file", { enabled: null, parameters: {} });
    expect(inside.ok || denied.ok).toBe(false);
    if (!inside.ok && !denied.ok) {
      expect(inside.error.details?.rule).toBe("deniedPaths");
      expect(inside.error.message.replace("data/toolhost.db", "P")).toBe(
        denied.error.message.replace("proj/a.txt", "P"),
      );
    }
  });

  it("a system error that reaches the runtime loses its paths", () => {
    const error = Object.assign(new Error("ENOTDIR: not a directory, mkdir '/srv/secret/x'"), {
      code: "ENOTDIR",
      syscall: "mkdir",
      path: "/srv/secret/x",
    });
    expect(messageWithoutPaths(error)).toBe("ENOTDIR: not a directory (mkdir)");
    expect(toToolError(error).toJSON()).toMatchObject({ code: "validation_failed" });
    const renamed = Object.assign(new Error("EXDEV: cross-device link not permitted, rename '/a/b' -> '/c/d'"), {
      code: "EXDEV",
      syscall: "rename",
    });
    expect(toToolError(renamed).message).toBe("EXDEV: cross-device link not permitted (rename)");
    const nul = Object.assign(
      new Error("The argument 'path' must be a string without null bytes. Received '/srv/a\\x00'"),
      {
        code: "ERR_INVALID_ARG_VALUE",
      },
    );
    expect(toToolError(nul).message).toBe("The argument 'path' must be a string without null bytes.");
  });

  it("clip keeps the start and the end, never splits a surrogate pair and escapes control characters", () => {
    expect(clip("short")).toBe("short");
    const clipped = clip(`${"a".repeat(200)}/file.txt`);
    expect(clipped.length).toBeLessThanOrEqual(100);
    expect(clipped).toMatch(/^a+…a*\/file\.txt$/);
    const emoji = clip("\u{1F600}".repeat(100));
    expect(emoji.length).toBeLessThanOrEqual(100);
    expect(/\p{Cs}/u.test(emoji)).toBe(false);
    expect(clip("a\nb\tc\u0000d\u007f")).toBe("a\\nb\\tc\\u0000d\\u007f");
  });
});

describe("get_current_datetime", () => {
  it("an empty timezone is a plain validation_failed with no odd suggestion", async () => {
    const outcome = await call("get_current_datetime", { timezone: "" });
    refused(outcome, "validation_failed", "non_empty", /must not be empty/);
    if (!outcome.ok) expect(outcome.error.message).not.toMatch(/Did you mean/);
  });
});
