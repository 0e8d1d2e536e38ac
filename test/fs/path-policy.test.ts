/**
 * Path policy: hostile cases first. The table ports the case list of the MCP reference filesystem server's
 * path-validation tests (modelcontextprotocol/servers, src/filesystem/__tests__/path-validation.test.ts), then
 * resolveAndValidatePath is exercised on real trees with real symlinks.
 */
import { spawn } from "node:child_process";
import { linkSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPathWithinRoots, resolveAndValidatePath, toResultPath } from "../../src/core/path-policy.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryFreshnessLedger, MemoryToolSettingsStore } from "../../src/core/stores.js";
import { fsRuntime, makeContext, tempDir } from "./helpers.js";

type Row = [path: unknown, roots: unknown, expected: boolean, why: string];
const P = "/home/user/project";
const rows: Row[] = [
  [P, [P], true, "exact directory"],
  [`${P}/src`, [P], true, "subdirectory"],
  [`${P}/src/index.js`, [P], true, "file in subdirectory"],
  [`${P}/deeply/nested/file.txt`, [P], true, "deep file"],
  ["/home/user/project2", [P], false, "prefix: project2"],
  ["/home/user/project_backup", [P], false, "prefix: _backup"],
  ["/home/user/project-old", [P], false, "prefix: -old"],
  ["/home/user/projectile", [P], false, "prefix: projectile"],
  ["/home/user/project.bak", [P], false, "prefix: .bak"],
  ["/home/user/other", [P], false, "sibling"],
  ["/etc/passwd", [P], false, "elsewhere"],
  ["/home/user", [P], false, "parent"],
  ["/", [P], false, "filesystem root"],
  ["/home/user/project1/src", ["/home/user/project1", "/home/user/project2"], true, "multiple roots 1"],
  ["/home/user/project2/src", ["/home/user/project1", "/home/user/project2"], true, "multiple roots 2"],
  ["/home/user/project3", ["/home/user/project1", "/home/user/project2"], false, "multiple roots miss"],
  ["/home/user/project1_backup", ["/home/user/project1", "/home/user/project2"], false, "multiple roots prefix"],
  ["/home/user/project2-old", ["/home/user/project1", "/home/user/project2"], false, "multiple roots prefix 2"],
  ["/test", ["/test/allowed"], false, "parent of root"],
  ["/test/allowed_sibling", ["/test/allowed"], false, "sibling with common prefix"],
  ["/test/allowed2", ["/test/allowed"], false, "sibling with digit"],
  ["/home/user/my-project (v2)", ["/home/user/my-project (v2)"], true, "special characters exact"],
  ["/home/user/my-project (v2)/src", ["/home/user/my-project (v2)"], true, "special characters child"],
  ["/home/user/my-project (v2)_backup", ["/home/user/my-project (v2)"], false, "special characters prefix"],
  ["/home/user/my-project", ["/home/user/my-project (v2)"], false, "shorter name"],
  ["", [P], false, "empty path"],
  [P, [], false, "no roots"],
  [`${P}/`, [P], true, "trailing separator on path"],
  [P, [`${P}/`], true, "trailing separator on root"],
  [`${P}/`, [`${P}/`], true, "trailing separators on both"],
  ["/home/user/project2", [`${P}/`], false, "prefix with separator root"],
  ["/home/user/project2/", [P], false, "prefix with separator path"],
  [P, ["", P, ""], true, "empty root entries skipped"],
  ["/home/user/other", ["", P, ""], false, "empty root entries still validate"],
  ["relative/path", [process.cwd()], true, "relative path against cwd"],
  ["./file", [process.cwd()], true, "dot-relative path against cwd"],
  ["/some/other/absolute/path/file", ["relative/path", "/some/other/absolute/path"], true, "relative root ignored"],
  ["/absolute/path/file", ["relative/path", "/some/other/absolute/path"], false, "relative root does not match"],
  [null, [P], false, "null path"],
  [undefined, [P], false, "undefined path"],
  ["/path", null, false, "null roots"],
  ["/path", undefined, false, "undefined roots"],
  ["/home/user/café", ["/home/user/café"], true, "unicode exact"],
  ["/home/user/café/file", ["/home/user/café"], true, "unicode child"],
  ["/home/user/cafe\u0301", ["/home/user/café"], false, "decomposed unicode differs"],
  ["/home/user/my project", ["/home/user/my project"], true, "spaces exact"],
  ["/home/user/my project/file", ["/home/user/my project"], true, "spaces child"],
  ["/home/user/my", ["/home/user/my project"], false, "spaces partial 1"],
  ["/home/user/my proj", ["/home/user/my project"], false, "spaces partial 2"],
  ["/home/anything", ["/home", "/home/user", P], true, "nested roots 1"],
  ["/home/other/deep/path", ["/home", "/home/user", P], true, "nested roots most permissive"],
  ["/", ["/"], true, "root allowed: root"],
  ["/etc/passwd", ["/"], true, "root allowed: anything"],
  [`${P}/../../../etc/passwd`, [P], false, "traversal to /etc"],
  [`${P}/../../other`, [P], false, "traversal to other"],
  [`${P}/../project2`, [P], false, "traversal to prefix sibling"],
  [`${P}/src/../../project2`, [P], false, "mixed traversal"],
  [`${P}/./../../other`, [P], false, "dot then traversal"],
  [`${P}/../project/../../../etc`, [P], false, "multiple traversal"],
  ["/home/user/safe/file", ["/home/user/project/../safe"], true, "traversal in root normalizes"],
  [`${P}/file`, ["/home/user/project/../safe"], false, "traversal in root excludes original"],
  [`${P}/..test`, [P], true, "double dots prefix in name"],
  [`${P}/test..`, [P], true, "double dots suffix in name"],
  [`${P}/te..st`, [P], true, "double dots inside name"],
  [`${P}/../test`, [P], false, "real traversal"],
  [`${P}/..`, [P], false, "parent by .."],
  [`${P}\x00/etc/passwd`, [P], false, "NUL byte 1"],
  [`${P}/test\x00.txt`, [P], false, "NUL byte 2"],
  [`\x00${P}`, [P], false, "NUL byte 3"],
  [`${P}/\x00`, [P], false, "NUL byte 4"],
  [P, [`${P}\x00`], false, "NUL byte in root"],
  [`${P}/file`, [`${P}\x00`], false, "NUL byte in root child"],
  [`${P}/report_50%.pdf`, [P], true, "percent in name"],
  [`${P}/Q1_25%_growth`, [P], true, "percent in name 2"],
  [`${P}/%41`, [P], true, "percent-encoded name is literal"],
  [`${P}/%2e%2e`, [P], true, "encoded dots are literal"],
  [`${P}/file%20name`, [P], true, "encoded space is literal"],
  ["/home/user/project%20files/test", ["/home/user/project%20files"], true, "percent in root"],
  ["/home/user/project files/test", ["/home/user/project%20files"], false, "percent root is not decoded"],
  [`${P}//`, [P], true, "double trailing slash"],
  [`${P}///`, [P], true, "triple trailing slash"],
  [`${P}/./src`, [P], true, "dot segment"],
  ["/home/user/./project/src", [P], true, "dot segment above root"],
  [`${P}//src//file`, [P], true, "double slashes"],
  ["/home//user//project//src", [P], true, "double slashes everywhere"],
  ["/home/user//project2", [P], false, "double slashes prefix sibling"],
  [123, [P], false, "number path"],
  [{}, [P], false, "object path"],
  [[], [P], false, "array path"],
  [P, [123], false, "number root"],
  [P, [{}], false, "object root"],
  [`${P}/${"a/".repeat(1000)}file.txt`, [P], true, "very long path"],
  [`${P}/${"a/".repeat(1000)}${"../".repeat(1001)}etc/passwd`, [P], false, "very long escaping path"],
  [`${P}/file`, ["/home/user/../user/project"], true, "root normalizes safely"],
  ["/home/user/other", ["/home/user/../user/project"], false, "root normalizes safely, other"],
  [`${P}/.`, [P], true, "trailing dot"],
  [`${P}/...`, [P], true, "three dots name"],
  [`${P}/....`, [P], true, "four dots name"],
];

describe("isPathWithinRoots (MCP reference case list)", () => {
  it.each(rows)("%j in %j → %s (%s)", (path, roots, expected) => {
    expect(isPathWithinRoots(path as string, roots as string[])).toBe(expected);
  });
});

describe("resolveAndValidatePath on real trees", () => {
  let dir: string;
  let cleanup: () => void;
  let proj: string;
  let outside: string;
  beforeAll(() => {
    ({ dir, cleanup } = tempDir());
    proj = join(dir, "proj");
    outside = join(dir, "proj-secrets");
    mkdirSync(join(proj, "src"), { recursive: true });
    mkdirSync(join(proj, "secret"), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(proj, "src", "a.ts"), "export const a = 1;\n");
    writeFileSync(join(proj, "secret", "key.txt"), "TOPSECRET\n");
    writeFileSync(join(outside, "passwd"), "root:x:0:0\n");
    symlinkSync(join(outside, "passwd"), join(proj, "link-file"));
    symlinkSync(outside, join(proj, "link-dir"));
    symlinkSync(join(outside, "not-yet"), join(proj, "dangling-out"));
    symlinkSync(join(proj, "src", "new.ts"), join(proj, "dangling-in"));
    symlinkSync(join(proj, "secret", "key.txt"), join(proj, "alias"));
    symlinkSync(join(proj, "src", "a.ts"), join(proj, "inner-link"));
    symlinkSync(join(proj, "loop-b"), join(proj, "loop-a"));
    symlinkSync(join(proj, "loop-a"), join(proj, "loop-b"));
    symlinkSync(join(outside, "loop-d"), join(outside, "loop-c"));
    symlinkSync(join(outside, "loop-c"), join(outside, "loop-d"));
  });
  afterAll(() => cleanup());

  const ctx = (parameters: Record<string, unknown> = {}) => makeContext({ workingDirectory: proj, parameters });
  const denied = async (input: string, parameters: Record<string, unknown> = {}, rule?: string) => {
    const err = await resolveAndValidatePath(input, ctx(parameters)).then(
      () => null,
      (e) => e,
    );
    expect(err?.code, `${input} should be refused`).toBe("access_denied");
    expect(err.message).toContain(input);
    if (!input.includes("proj-secrets")) expect(err.message).not.toContain("proj-secrets");
    if (rule) expect(err.details.rule).toBe(rule);
    return err;
  };

  it("refuses a prefix sibling of the working directory", async () => {
    await denied("../proj-secrets/passwd", {}, "workingDirectory");
    await denied(join(outside, "passwd"));
  });
  it("refuses `..` escapes and absolute paths outside", async () => {
    await denied("src/../../proj-secrets");
    await denied("/etc/passwd");
    await denied("..");
  });
  it("refuses a link to a file outside and a link to a directory outside", async () => {
    await denied("link-file");
    await denied("link-dir");
    await denied("link-dir/passwd");
    await denied("link-dir/new-file.txt");
  });
  it("refuses a dangling link pointing outside (decided where it points, not followed)", async () => {
    await denied("dangling-out");
  });
  it("allows a dangling link pointing inside, and links that stay inside", async () => {
    await expect(resolveAndValidatePath("dangling-in", ctx())).resolves.toMatchObject({
      real: join(proj, "src", "new.ts"),
    });
    await expect(resolveAndValidatePath("inner-link", ctx())).resolves.toMatchObject({
      real: join(proj, "src", "a.ts"),
    });
  });
  it("deny wins over allow, also through a link alias and with restriction off", async () => {
    await denied("secret/key.txt", { deniedPaths: [join(proj, "secret")] }, "deniedPaths");
    await denied("alias", { deniedPaths: ["secret"] }, "deniedPaths");
    await denied("alias", { deniedPaths: ["secret"], restrictPaths: false }, "deniedPaths");
    await denied("secret", { deniedPaths: ["secret/"], allowedPaths: [proj] }, "deniedPaths");
  });
  it("refuses a symlink loop as a bad argument", async () => {
    const err = await resolveAndValidatePath("loop-a", ctx()).catch((e) => e);
    expect(err.code).toBe("validation_failed");
    expect(err.details.rule).toBe("symlink_loop");
  });
  it("a symlink loop outside the allowed directories answers exactly like any other outside path (no oracle)", async () => {
    for (const [loop, plain] of [
      [join(outside, "loop-c"), join(outside, "no-such-file")],
      ["../proj-secrets/loop-c/x", "../proj-secrets/passwd"],
    ] as const) {
      const looping = await denied(loop, {}, "workingDirectory");
      const other = await denied(plain, {}, "workingDirectory");
      expect(looping.message.replace(loop, "<path>")).toBe(other.message.replace(plain, "<path>"));
    }
  });
  it("allowedPaths replaces the working-directory root; restrictPaths false lifts it", async () => {
    await expect(
      resolveAndValidatePath(join(outside, "passwd"), ctx({ allowedPaths: [outside] })),
    ).resolves.toBeTruthy();
    await denied("src/a.ts", { allowedPaths: [outside] }, "allowedPaths");
    await expect(resolveAndValidatePath("link-file", ctx({ restrictPaths: false }))).resolves.toMatchObject({
      real: join(outside, "passwd"),
    });
  });
  it("an allowedPaths root that is a symlink admits its target's files by either name, and nothing beside it", async () => {
    // The roots' lexical forms decide first; their real forms are looked up only for a location none contains.
    const base = tempDir("toolhost-rootlink-").dir;
    const realRoot = join(base, "real-root");
    mkdirSync(realRoot);
    writeFileSync(join(realRoot, "in.txt"), "in\n");
    writeFileSync(join(base, "beside.txt"), "beside\n");
    symlinkSync(realRoot, join(base, "root-link"));
    const settings = { allowedPaths: [join(base, "root-link")] };
    for (const path of [join(base, "root-link", "in.txt"), join(realRoot, "in.txt")]) {
      await expect(resolveAndValidatePath(path, ctx(settings))).resolves.toMatchObject({
        real: join(realRoot, "in.txt"),
      });
    }
    await expect(resolveAndValidatePath(join(base, "beside.txt"), ctx(settings))).rejects.toMatchObject({
      code: "access_denied",
      details: { rule: "allowedPaths" },
    });
    await expect(
      resolveAndValidatePath(join(base, "root-link", "..", "beside.txt"), ctx(settings)),
    ).rejects.toMatchObject({
      code: "access_denied",
    });
  });
  it("resolves relative, absolute, and ~ paths; decides a missing file on its nearest ancestor", async () => {
    const r = await resolveAndValidatePath("src/deep/new/file.txt", ctx());
    expect(r.absolute).toBe(join(proj, "src/deep/new/file.txt"));
    const home = await resolveAndValidatePath("~/x", ctx({ restrictPaths: false }));
    expect(home.absolute).toBe(join(homedir(), "x"));
  });
  it("classifies empty paths, NUL bytes, missing files and wrong kinds", async () => {
    await expect(resolveAndValidatePath("", ctx())).rejects.toMatchObject({ code: "validation_failed" });
    await expect(resolveAndValidatePath("  ", ctx())).rejects.toMatchObject({ code: "validation_failed" });
    await expect(resolveAndValidatePath("a\0b", ctx())).rejects.toMatchObject({ code: "validation_failed" });
    await expect(resolveAndValidatePath("nope.txt", ctx(), { mustExist: true })).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(resolveAndValidatePath("src", ctx(), { kind: "file" })).rejects.toMatchObject({
      code: "validation_failed",
    });
    await expect(resolveAndValidatePath("src/a.ts", ctx(), { kind: "directory" })).rejects.toMatchObject({
      code: "validation_failed",
    });
  });
  it("falls back to process.cwd() when no working directory is bound", async () => {
    const c = makeContext({ workingDirectory: null });
    const r = await resolveAndValidatePath("package.json", c, { mustExist: true });
    expect(r.absolute).toBe(join(process.cwd(), "package.json"));
    await expect(resolveAndValidatePath("/etc/hostname", c)).rejects.toMatchObject({ code: "access_denied" });
  });
  it("toResultPath re-anchors to the working directory, absolute outside or unbound", () => {
    const c = ctx();
    expect(toResultPath(join(proj, "src", "a.ts"), c)).toBe("src/a.ts");
    expect(toResultPath(proj, c)).toBe(".");
    expect(toResultPath(join(outside, "passwd"), c)).toBe(join(outside, "passwd"));
    expect(toResultPath(join(proj, "x"), makeContext({ workingDirectory: null }))).toBe(join(proj, "x"));
  });
});

describe("a bound working directory swapped for a symbolic link", () => {
  // The directory was bound while real; then it is replaced by a link elsewhere (or removed). Every path under it,
  // existing or not, read or written, must be refused with the workingDirectoryMoved rule, not followed.
  let dir: string;
  let cleanup: () => void;
  beforeAll(() => {
    ({ dir, cleanup } = tempDir());
  });
  afterAll(() => cleanup());

  function swapped(name: string): { proj: string; elsewhere: string } {
    const proj = join(dir, name);
    const elsewhere = join(dir, `${name}-elsewhere`);
    mkdirSync(join(elsewhere, "sub"), { recursive: true });
    writeFileSync(join(elsewhere, "secret.txt"), "x\n");
    symlinkSync(elsewhere, proj);
    return { proj, elsewhere };
  }

  it.each([
    ["an existing file", "secret.txt", "file"],
    ["an existing directory", "sub", "directory"],
    ["a missing file", "new.txt", "any"],
    ["the directory itself", ".", "directory"],
  ] as const)("refuses %s", async (_what, path, kind) => {
    const { proj } = swapped(`moved-${path.replace(/\W/g, "_")}`);
    const context = makeContext({ workingDirectory: proj });
    await expect(resolveAndValidatePath(path, context, { kind })).rejects.toMatchObject({
      code: "access_denied",
      details: { rule: "workingDirectoryMoved" },
    });
  });

  it("refuses a path under a working directory that was removed", async () => {
    const proj = join(dir, "removed");
    const context = makeContext({ workingDirectory: proj });
    await expect(resolveAndValidatePath("new.txt", context)).rejects.toMatchObject({
      details: { rule: "workingDirectoryMoved" },
    });
  });

  it("still allows paths under a working directory that resolves to itself", async () => {
    const proj = join(dir, "real");
    mkdirSync(proj);
    writeFileSync(join(proj, "a.txt"), "a\n");
    const context = makeContext({ workingDirectory: proj });
    await expect(resolveAndValidatePath("a.txt", context, { kind: "file" })).resolves.toMatchObject({
      real: join(proj, "a.txt"),
    });
    await expect(resolveAndValidatePath("missing/b.txt", context)).resolves.toMatchObject({
      real: join(proj, "missing", "b.txt"),
    });
  });
});

// The server's own process under /proc, and its ancestors (npm, the shell that started it): their environments hold
// provider keys and the database URL, which the shell tools never pass on. No setting opens them, as no setting opens
// the data directory; other processes stay as open as any other path the server's user can read.
describe.runIf(process.platform === "linux")("the server's own /proc entries are Toolhost itself", () => {
  const thread = () => readdirSync("/proc/self/task").find((t) => t !== String(process.pid));
  const own = () => [
    "/proc/self/environ",
    `/proc/${process.pid}/environ`,
    "/proc/thread-self/environ",
    `/proc/self/task/${process.pid}/environ`,
    ...(thread() ? [`/proc/${thread()}/environ`] : []),
    `/proc/${process.ppid}/environ`,
    "/proc/1/environ",
  ];

  it("read_file refuses them with restrictPaths off, as deniedPaths would, and names no secret", async () => {
    const { call } = fsRuntime(null);
    for (const path of own()) {
      const outcome = await call("read_file", { path, view: "base64" }, { restrictPaths: false });
      expect(outcome, path).toMatchObject({
        ok: false,
        error: { code: "access_denied", details: { rule: "deniedPaths" } },
      });
    }
    const listing = await call("list_directory", { path: "/proc/self" }, { restrictPaths: false });
    expect(listing).toMatchObject({ ok: false, error: { code: "access_denied" } });
  });

  it("allowedPaths covering /proc does not open them either", async () => {
    for (const path of own())
      await expect(
        resolveAndValidatePath(path, makeContext({ parameters: { allowedPaths: ["/proc"] } })),
        path,
      ).rejects.toMatchObject({ code: "access_denied" });
  });

  it("another process's entries and /proc itself stay readable with restrictPaths off", async () => {
    const { call } = fsRuntime(null);
    // A process the server started: not one of those that started the server.
    const other = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      expect(await call("read_file", { path: "/proc/version" }, { restrictPaths: false })).toMatchObject({ ok: true });
      const listing = await call("list_directory", { path: "/proc" }, { restrictPaths: false });
      const names = listing.ok ? (listing.result as { entries: { name: string }[] }).entries.map((e) => e.name) : [];
      expect(names).toContain(String(other.pid));
      expect(names, "a walk of /proc skips the server's own entry").not.toContain(String(process.pid));
      expect(names, "…and its parent's").not.toContain(String(process.ppid));
      expect(await call("read_file", { path: `/proc/${other.pid}/comm` }, { restrictPaths: false })).toMatchObject({
        ok: true,
        result: { content: expect.stringContaining("sleep") },
      });
    } finally {
      other.kill("SIGKILL");
    }
  });
});

// A hard link is the same file under another name, and unlike a symbolic link nothing on the way reveals it: a
// denied or protected file must be refused by what it is (its device and inode), not by the name it was reached by.
describe("a hard link to a denied or protected file", () => {
  const { dir, cleanup } = tempDir();
  afterAll(() => cleanup());

  it("read_file and grep refuse the alias as they refuse the file, with either engine", async () => {
    const proj = join(dir, "hl");
    mkdirSync(proj);
    writeFileSync(join(proj, "secret.txt"), "SECRET token\n");
    writeFileSync(join(proj, "plain.txt"), "plain token\n");
    linkSync(join(proj, "secret.txt"), join(proj, "alias.txt"));
    const { call } = fsRuntime(proj);
    const denied = { deniedPaths: [join(proj, "secret.txt")] };
    for (const path of ["secret.txt", "alias.txt"]) {
      expect(await call("read_file", { path }, denied), path).toMatchObject({
        ok: false,
        error: { code: "access_denied", details: { rule: "deniedPaths" } },
      });
    }
    expect(await call("grep", { pattern: "token", path: "alias.txt" }, denied)).toMatchObject({
      ok: false,
      error: { code: "access_denied" },
    });
    for (const engine of ["auto", "js"]) {
      const found = await call("grep", { pattern: "token", path: "." }, { ...denied, engine });
      expect(found, engine).toMatchObject({ ok: true, result: { matches: [{ file: "plain.txt" }] } });
    }
    // A file with several names that is not denied reads as before.
    linkSync(join(proj, "plain.txt"), join(proj, "plain2.txt"));
    expect(await call("read_file", { path: "plain2.txt" }, denied)).toMatchObject({ ok: true });
  });

  it("a hard link to one of Toolhost's own files (its database) is refused as the file is", async () => {
    const proj = join(dir, "hl-data");
    const data = join(dir, "hl-data-dir");
    mkdirSync(proj);
    mkdirSync(data);
    const db = join(data, "toolhost.db");
    writeFileSync(db, "PROVIDER KEY\n");
    linkSync(db, join(proj, "innocent.txt"));
    const runtime = new ToolRuntime({
      store: new MemoryToolSettingsStore(),
      ledger: new MemoryFreshnessLedger(),
      audit: new MemoryAuditSink(),
      dataDir: data,
      protectedPaths: [data, db],
    });
    const call = (tool: string, args: unknown) =>
      runtime.executeTool(tool, args, { userId: "u1", chatId: "c1", workingDirectory: proj });
    expect(await call("read_file", { path: "innocent.txt" })).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "deniedPaths" } },
    });
    // With either engine: a protected file with another name does not send ripgrep's searches to the JS engine
    // (the files ripgrep reports are checked by their identity).
    for (const engine of ["ripgrep", "js"]) {
      await runtime.store.save("u1", "grep", { enabled: null, parameters: { engine } });
      expect(await call("grep", { pattern: "KEY", path: "." }), engine).toMatchObject({
        ok: true,
        result: { engine, matches: [] },
      });
    }
  });
});
