/** read_file, write_file, list_directory and the function-id file tools, on real files. Hostile cases first. */
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveAndValidatePath } from "../../src/core/path-policy.js";
import { MemoryFreshnessLedger } from "../../src/core/stores.js";
import { trigger } from "../../src/core/trigger.js";
import { readFileForChat, readResolvedFile } from "../../src/tools/builtin/read-file.js";
import { WRITE_CAP, writeFileForChat } from "../../src/tools/builtin/write-file.js";
import { sha256 } from "../../src/tools/fs/common.js";
import { fsRuntime, makeContext, tempDir } from "./helpers.js";

let dir: string;
let cleanup: () => void;
let proj: string;
let outside: string;

beforeAll(() => {
  ({ dir, cleanup } = tempDir());
  proj = join(dir, "proj");
  outside = join(dir, "proj-secrets");
  mkdirSync(join(proj, "secret"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(outside, "passwd"), "OUTSIDE-SECRET\n");
  writeFileSync(join(proj, "secret", "key.txt"), "DENIED-SECRET\n");
  symlinkSync(join(outside, "passwd"), join(proj, "link-file"));
  symlinkSync(outside, join(proj, "link-dir"));
  symlinkSync(join(proj, "secret", "key.txt"), join(proj, "alias"));
  symlinkSync(join(outside, "new.txt"), join(proj, "dangling-out"));
});
afterAll(() => cleanup());

function expectNoSecret(outcome: unknown) {
  const text = JSON.stringify(outcome);
  expect(text).not.toContain("OUTSIDE-SECRET");
  expect(text).not.toContain("DENIED-SECRET");
}

describe("hostile paths: read, write and list refused, secret never printed", () => {
  // Stored deniedPaths entries must be absolute; proj is only known once beforeAll ran.
  const deny = { deniedPaths: ["<proj>/secret"] };
  it.each([
    ["read_file", { path: "link-file" }, undefined],
    ["read_file", { path: "link-dir/passwd" }, undefined],
    ["read_file", { path: "../proj-secrets/passwd" }, undefined],
    ["read_file", { path: "alias" }, deny],
    ["read_file", { path: "alias", view: "base64" }, deny],
    ["write_file", { path: "link-file", content: "x" }, undefined],
    ["write_file", { path: "link-dir/new.txt", content: "x" }, undefined],
    ["write_file", { path: "dangling-out", content: "x" }, undefined],
    ["write_file", { path: "alias", content: "x" }, deny],
    ["list_directory", { path: "link-dir" }, undefined],
    ["list_directory", { path: ".." }, undefined],
    ["file_read", { path: "link-file" }, undefined],
    ["file_write", { path: "link-dir/x", content: "x" }, undefined],
    ["file_list", { path: "link-dir" }, undefined],
  ])("%s %j is access_denied", async (tool, args, parameters) => {
    const { call } = fsRuntime(proj);
    const settings = parameters && { deniedPaths: parameters.deniedPaths.map((p) => p.replace("<proj>", proj)) };
    const outcome = await call(tool, args, settings);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error.code).toBe("access_denied");
    expectNoSecret(outcome);
    expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("OUTSIDE-SECRET\n");
    expect(() => statSync(join(outside, "new.txt"))).toThrow();
    expect(() => statSync(join(outside, "x"))).toThrow();
  });

  it("refuses FIFOs and devices promptly instead of blocking", async () => {
    execFileSync("mkfifo", [join(proj, "fifo")]);
    const { call } = fsRuntime(proj);
    const fifo = await call("read_file", { path: "fifo" });
    expect(fifo).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    const zero = await call("read_file", { path: "/dev/zero", view: "hex" }, { restrictPaths: false });
    expect(zero).toMatchObject({ ok: false, error: { code: "validation_failed" } });
  });

  it("reads past a size that stat under-reports (/proc), bounded by the descriptor", async () => {
    // (Not /proc/self: the server's own process entries are protected, see path-policy.test.ts.)
    expect(statSync("/proc/meminfo").size).toBe(0);
    const { call } = fsRuntime(proj);
    const out = await call("read_file", { path: "/proc/meminfo" }, { restrictPaths: false });
    expect(out.ok).toBe(true);
    if (out.ok) expect((out.result as { content: string }).content).toContain("MemTotal:");
  });
});

// Between a path's check and its use, a concurrent process (a shell command) can swap a directory on the way for a
// symbolic link; O_NOFOLLOW guards only the last name. What was opened is decided again by the policy.
describe("a directory on the way swapped for a link between the check and the use", () => {
  // root/d/sub/passwd becomes, through root/d → there, there/sub/passwd: a file outside with the same name.
  const setUp = (name: string) => {
    const root = join(dir, name);
    const there = join(dir, `${name}-outside`);
    for (const base of [root, join(root, "d"), there]) {
      mkdirSync(join(base === root ? join(root, "d") : base, "sub"), { recursive: true });
    }
    writeFileSync(join(root, "d", "sub", "passwd"), "OUTSIDE-SECRET\n");
    writeFileSync(join(there, "sub", "passwd"), "OUTSIDE-SECRET\n");
    const swap = () => {
      renameSync(join(root, "d"), join(root, "d-old"));
      symlinkSync(there, join(root, "d"));
    };
    return { root, there, swap };
  };

  it("read_file refuses the file it opened outside, and shows none of it", async () => {
    const { root, swap } = setUp("swap-read");
    const context = makeContext({ workingDirectory: root });
    const resolved = await resolveAndValidatePath("d/sub/passwd", context, { mustExist: true, kind: "file" });
    swap();
    const err = await readResolvedFile(resolved, "d/sub/passwd", context, "text").catch((e) => e);
    expect(err).toMatchObject({ code: "access_denied", details: { rule: "workingDirectory" } });
  });

  it("write_file refuses to write where the link leads, and leaves the file there as it was", async () => {
    const { root, there, swap } = setUp("swap-write");
    const ledger = new MemoryFreshnessLedger();
    // The freshness check runs between the path's check and the write: the swap happens there.
    const swapping = {
      recordRead: (chat: string, path: string, sha: string) => ledger.recordRead(chat, path, sha),
      getRead: async (chat: string, path: string) => {
        swap();
        return ledger.getRead(chat, path);
      },
    };
    const context = makeContext({ workingDirectory: root, ledger: swapping });
    await readFileForChat("d/sub/passwd", context, "text");
    const err = await writeFileForChat({ path: "d/sub/passwd", content: "pwned\n" }, context).catch((e) => e);
    expect(err).toMatchObject({ code: "access_denied" });
    expect(readFileSync(join(there, "sub", "passwd"), "utf8")).toBe("OUTSIDE-SECRET\n");
    expect(readdirSync(join(there, "sub"))).toEqual(["passwd"]);
  });
});

describe("read_file", () => {
  const write = (name: string, data: string | Buffer) => writeFileSync(join(proj, name), data);

  it("numbers lines cat -n style; no phantom last line; unterminated last line readable", async () => {
    write("a.txt", "one\ntwo\n");
    write("b.txt", "one\ntwo");
    const { call } = fsRuntime(proj);
    const a = (await call("read_file", { path: "a.txt" })) as any;
    const b = (await call("read_file", { path: "b.txt" })) as any;
    expect(a.result).toMatchObject({
      content: "     1\tone\n     2\ttwo",
      totalLines: 2,
      startLine: 1,
      endLine: 2,
      truncated: false,
      path: "a.txt",
      size: 8,
    });
    expect(b.result).toMatchObject({ content: "     1\tone\n     2\ttwo", totalLines: 2, size: 7 });
    expect(a.result.view).toBeUndefined();
    expect(a.result.sha256).toBe(sha256("one\ntwo\n"));
  });

  it("removes CR of CRLF lines, BOMs, decodes UTF-16 and replaces invalid UTF-8", async () => {
    write("crlf.txt", "x\r\ny\r\n");
    write("bom8.txt", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("héllo\n")]));
    write("bom16le.txt", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("hi\nthere\n", "utf16le")]));
    const be = Buffer.from("hi\n", "utf16le").swap16();
    write("bom16be.txt", Buffer.concat([Buffer.from([0xfe, 0xff]), be]));
    write("bad.txt", Buffer.from([0x61, 0xff, 0x62, 0x0a]));
    const { call } = fsRuntime(proj);
    const get = async (p: string) => ((await call("read_file", { path: p })) as any).result;
    expect((await get("crlf.txt")).content).toBe("     1\tx\n     2\ty");
    expect((await get("bom8.txt")).content).toBe("     1\théllo");
    expect((await get("bom16le.txt")).content).toBe("     1\thi\n     2\tthere");
    expect((await get("bom16be.txt")).content).toBe("     1\thi");
    expect((await get("bad.txt")).content).toBe("     1\ta\uFFFDb");
  });

  it("refuses NUL in the first 8 KiB naming the byte views; hex and base64 read it", async () => {
    write("bin.dat", Buffer.from([1, 0, 2, 255]));
    const { call } = fsRuntime(proj);
    const text = (await call("read_file", { path: "bin.dat" })) as any;
    expect(text.error.code).toBe("validation_failed");
    expect(text.error.message).toMatch(/hex.*base64/);
    const hex = (await call("read_file", { path: "bin.dat", view: "hex" })) as any;
    expect(hex.result).toMatchObject({ content: "010002ff", view: "hex", totalLines: 0, size: 4 });
    const b64 = (await call("read_file", { path: "bin.dat", view: "base64" })) as any;
    expect(b64.result.content).toBe(Buffer.from([1, 0, 2, 255]).toString("base64"));
    const late = Buffer.alloc(9000, 0x61);
    late[8500] = 0;
    write("late-nul.txt", late);
    expect(((await call("read_file", { path: "late-nul.txt" })) as any).ok).toBe(true);
  });

  it("rejects startLine/maxLines with a byte view rather than dropping them", async () => {
    write("c.txt", "x\n");
    const { call } = fsRuntime(proj);
    const out = (await call("read_file", { path: "c.txt", view: "hex", startLine: 1 })) as any;
    expect(out.error).toMatchObject({ code: "validation_failed" });
    expect(((await call("read_file", { path: "c.txt", maxLines: "5" })) as any).error.code).toBe("validation_failed");
  });

  it("refuses at the caps: 10 MiB text, 256 KiB byte views", async () => {
    write("big.txt", "");
    truncateSync(join(proj, "big.txt"), 10 * 1024 * 1024 + 1);
    write("mid.txt", "");
    truncateSync(join(proj, "mid.txt"), 256 * 1024 + 1);
    const { call } = fsRuntime(proj);
    expect(((await call("read_file", { path: "big.txt" })) as any).error.message).toMatch(/10 MiB/);
    expect(((await call("read_file", { path: "mid.txt", view: "base64" })) as any).error.message).toMatch(/256 KiB/);
  });

  it("windows a million-line file, records the whole-file sha256 even for a partial read", async () => {
    const body = Array.from({ length: 1_000_000 }, (_, i) => `l${i + 1}`).join("\n");
    write("million.txt", body);
    const rt = fsRuntime(proj);
    const out = (await rt.call("read_file", { path: "million.txt", startLine: 999_999, maxLines: 10 })) as any;
    expect(out.result).toMatchObject({
      totalLines: 1_000_000,
      startLine: 999_999,
      endLine: 1_000_000,
      truncated: false,
    });
    expect(out.result.content).toBe(" 999999\tl999999\n1000000\tl1000000");
    const first = (await rt.call("read_file", { path: "million.txt" })) as any;
    expect(first.result).toMatchObject({ endLine: 2000, truncated: true });
    expect(first.result.content).toMatch(/Use startLine\/maxLines/);
    expect(await rt.ledger.getRead("chat-1", join(proj, "million.txt"))).toBe(sha256(body));
  });

  it("cuts a huge single line with a marker and sets truncated", async () => {
    write("min.js", `${"x".repeat(600_000)}\n`);
    const { call } = fsRuntime(proj);
    const out = (await call("read_file", { path: "min.js" })) as any;
    expect(out.result.truncated).toBe(true);
    expect(out.result.content.length).toBeLessThan(5000);
    expect(out.result.content).toMatch(/line cut: 598000 more characters/);
  });

  it("classifies a missing file, a directory and an empty path", async () => {
    const { call } = fsRuntime(proj);
    expect(((await call("read_file", { path: "nope" })) as any).error.code).toBe("not_found");
    expect(((await call("read_file", { path: "secret" })) as any).error.code).toBe("validation_failed");
    expect(((await call("read_file", { path: "" })) as any).error.code).toBe("validation_failed");
  });
});

describe("write_file", () => {
  it("creates a new file, refuses to overwrite an unread one, then writes after a read", async () => {
    const rt = fsRuntime(proj);
    const created = (await rt.call("write_file", {
      path: "w/new.txt",
      content: "v1\n",
      createDirectories: true,
    })) as any;
    expect(created.result).toMatchObject({ path: "w/new.txt", size: 3, created: true });
    writeFileSync(join(proj, "w", "theirs.txt"), "original\n");
    const refused = (await rt.call("write_file", { path: "w/theirs.txt", content: "mine\n" })) as any;
    expect(refused.error.message).toMatch(/read_file/);
    expect(refused.error.details.rule).toBe("read_before_write");
    await rt.call("read_file", { path: "w/theirs.txt", view: "hex" });
    const ok = (await rt.call("write_file", { path: "w/theirs.txt", content: "mine\n" })) as any;
    expect(ok.result).toMatchObject({ created: false, size: 5 });
    expect(readFileSync(join(proj, "w", "theirs.txt"), "utf8")).toBe("mine\n");
    // the chat knows what it wrote: writing again needs no re-read
    expect(((await rt.call("write_file", { path: "w/theirs.txt", content: "again\n" })) as any).ok).toBe(true);
  });

  it("refuses a stale read after an outside change, and another chat's read does not count", async () => {
    const rt = fsRuntime(proj);
    writeFileSync(join(proj, "stale.txt"), "a\n");
    await rt.call("read_file", { path: "stale.txt" });
    writeFileSync(join(proj, "stale.txt"), "b\n");
    const out = (await rt.call("write_file", { path: "stale.txt", content: "c\n" })) as any;
    expect(out.error.details.rule).toBe("stale_read");
    expect(readFileSync(join(proj, "stale.txt"), "utf8")).toBe("b\n");
    const other = await rt.runtime.executeTool(
      "write_file",
      { path: "stale.txt", content: "c" },
      {
        userId: "u1",
        chatId: "chat-2",
        workingDirectory: proj,
      },
    );
    expect(other.ok).toBe(false);
  });

  it("refuses content over its ceiling with the ceiling and a rule, before touching the file", async () => {
    // A tool call's strings stop at the argument limit (2 MiB) first; a library caller reaches write_file's own.
    const context = makeContext({ workingDirectory: proj });
    const err = await writeFileForChat({ path: "huge.txt", content: "x".repeat(WRITE_CAP + 1) }, context).catch(
      (e) => e,
    );
    expect(err).toMatchObject({
      code: "validation_failed",
      details: { argument: "content", rule: "size_cap", capBytes: WRITE_CAP },
    });
    expect(err.message).toMatch(/larger than the 10 MiB/);
    expect(existsSync(join(proj, "huge.txt"))).toBe(false);
  });
  it("keeps the file mode and leaves no temp files behind; parent missing without createDirectories", async () => {
    const rt = fsRuntime(proj);
    mkdirSync(join(proj, "m"));
    writeFileSync(join(proj, "m", "run.sh"), "#!/bin/sh\n");
    chmodSync(join(proj, "m", "run.sh"), 0o751);
    await rt.call("read_file", { path: "m/run.sh" });
    await rt.call("write_file", { path: "m/run.sh", content: "#!/bin/sh\necho hi\n" });
    expect(statSync(join(proj, "m", "run.sh")).mode & 0o777).toBe(0o751);
    const { readdirSync } = await import("node:fs");
    expect(readdirSync(join(proj, "m"))).toEqual(["run.sh"]);
    const missing = (await rt.call("write_file", { path: "no/such/dir.txt", content: "x" })) as any;
    expect(missing.error.code).toBe("not_found");
    expect(missing.error.message).toMatch(/createDirectories/);
  });
});

describe("list_directory", () => {
  it("lists sorted entries with types, hides denied entries, refuses files", async () => {
    const { call } = fsRuntime(proj);
    mkdirSync(join(proj, "ls"));
    writeFileSync(join(proj, "ls", "b.txt"), "");
    mkdirSync(join(proj, "ls", "a"));
    symlinkSync("b.txt", join(proj, "ls", "c"));
    writeFileSync(join(proj, "ls", "hidden.key"), "");
    const out = (await call("list_directory", { path: "ls" }, { deniedPaths: [join(proj, "ls/hidden.key")] })) as any;
    expect(out.result).toEqual({
      path: "ls",
      entries: [
        { name: "a", type: "directory" },
        { name: "b.txt", type: "file" },
        { name: "c", type: "symlink" },
      ],
      truncated: false,
      totalEntries: 3,
    });
    expect(((await call("list_directory", { path: "ls/b.txt" })) as any).error.code).toBe("validation_failed");
    expect(((await call("list_directory", { path: 42 })) as any).error.code).toBe("validation_failed");
  });
});

describe("002 ids through trigger", () => {
  it("file_read of a spill names it by its spill name, never by where the server keeps it", async () => {
    const rt = fsRuntime(proj);
    writeFileSync(
      join(proj, "many.txt"),
      Array.from({ length: 20_000 }, (_, i) => `row ${i} ${"x".repeat(30)}`).join("\n"),
    );
    const cut = await rt.call(
      "grep",
      { pattern: "row", path: "many.txt" },
      { maxResults: 5000, maxMatchesPerFile: 5000 },
    );
    const spill = JSON.stringify(cut).match(/spill:[0-9a-f]{24}/)?.[0];
    expect(spill).toBeDefined();
    const opts = { runtime: rt.runtime, userId: "u1", chatId: "chat-1", workingDirectory: proj };
    const read = await trigger("tool::file_read", { path: spill, maxBytes: 20 }, opts);
    expect(read.path).toBe(spill);
    expect(JSON.stringify(read)).not.toContain(rt.runtime.dataDir);
  });
  it("file_read / file_write / file_list answer with the function-id shapes and are not offered by default", async () => {
    const rt = fsRuntime(proj);
    const opts = { runtime: rt.runtime, userId: "u1", chatId: "chat-9", workingDirectory: proj };
    mkdirSync(join(proj, "t2", "sub"), { recursive: true });
    writeFileSync(join(proj, "t2", "sub", "deep.txt"), "deep");
    const w = await trigger("tool::file_write", { path: "t2/out.json", content: '{"a":1}' }, opts);
    expect(w).toEqual({ written: true, path: join(proj, "t2", "out.json"), size: 7 });
    const r = await trigger("tool::file_read", { path: "t2/out.json", maxBytes: 4 }, opts);
    expect(r).toEqual({ content: '{"a"', path: join(proj, "t2", "out.json"), size: 7 });
    const l = await trigger("tool::file_list", { path: "t2", recursive: true }, opts);
    expect(l.path).toBe(join(proj, "t2"));
    expect(l.entries.map((e: any) => [e.name, e.type])).toEqual([
      ["out.json", "file"],
      ["sub", "directory"],
      ["sub/deep.txt", "file"],
    ]);
    expect(l.entries[0]).toMatchObject({ size: 7, modified: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    const enabled = await rt.runtime.getEnabledToolRuntime("u1");
    const names = enabled.definitions.map((d) => d.name);
    expect(names).toEqual(expect.arrayContaining(["read_file", "write_file", "list_directory"]));
    expect(names).not.toContain("file_read");
    expect(names).not.toContain("file_write");
    expect(names).not.toContain("file_list");
    await expect(trigger("tool::file_read", { path: "link-file" }, opts)).rejects.toMatchObject({
      code: "access_denied",
    });
  });
});

describe("the cap bounds what the descriptor yields, and reported paths round-trip", () => {
  it("readAllCapped stops at cap + 1 bytes on an endless descriptor (/dev/zero) whatever stat says", async () => {
    const { closeSync, fstatSync, openSync } = await import("node:fs");
    const { readAllCapped } = await import("../../src/tools/fs/common.js");
    const fd = openSync("/dev/zero", "r");
    try {
      expect(fstatSync(fd).size).toBe(0);
      const r = await readAllCapped(fd, 100_000);
      expect(r.exceeded).toBe(true);
      expect(r.bytes.length).toBe(100_000);
    } finally {
      closeSync(fd);
    }
  });
  it("paths from glob and grep, with a chat working directory or without, reach the same file in read_file", async () => {
    mkdirSync(join(proj, "rt", "deep"), { recursive: true });
    writeFileSync(join(proj, "rt", "deep", "f.md"), "round trip\n");
    for (const cwd of [proj, null]) {
      const rt = fsRuntime(cwd);
      const settings = cwd ? undefined : { allowedPaths: [proj] };
      const g = (await rt.call("glob", { pattern: "**/*.md", cwd: join(proj, "rt") }, settings)) as any;
      const s = (await rt.call("grep", { pattern: "round", path: join(proj, "rt") }, settings)) as any;
      expect(g.result.matches).toHaveLength(1);
      for (const p of [g.result.matches[0], s.result.matches[0].file]) {
        const r = (await rt.call("read_file", { path: p }, settings)) as any;
        expect(r.result.content).toBe("     1\tround trip");
      }
      if (cwd) expect(g.result.matches[0]).toBe("rt/deep/f.md");
      else expect(g.result.matches[0]).toBe(join(proj, "rt/deep/f.md"));
    }
  });
});

describe("the freshness refusal outside a chat", () => {
  it("names the scope it checked: the user's calls outside any chat, not a chat", async () => {
    const { dir, cleanup } = tempDir();
    try {
      writeFileSync(join(dir, "kept.txt"), "one\n");
      const { call } = fsRuntime(dir, null);
      const refused = await call("write_file", { path: "kept.txt", content: "two\n" });
      expect(refused).toMatchObject({ ok: false, error: { details: { rule: "read_before_write" } } });
      expect((refused as { error: { message: string } }).error.message).toMatch(/you have not read it outside a chat/);
      expect(await call("read_file", { path: "kept.txt" })).toMatchObject({ ok: true });
      expect(await call("write_file", { path: "kept.txt", content: "two\n" })).toMatchObject({ ok: true });
    } finally {
      cleanup();
    }
  });
});
