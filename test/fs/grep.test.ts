/** grep: hostile paths first, then the seed's rules, then a differential test of the ripgrep and JS engines. */
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ripgrepPath } from "../../src/tools/builtin/grep.js";
import { translateJsRegexForRipgrep } from "../../src/tools/fs/regex-translate.js";
import { fsRuntime, tempDir } from "./helpers.js";

let dir: string;
let cleanup: () => void;
let proj: string;
let outside: string;

const files: Record<string, string | Buffer> = {
  "a.txt": "alpha\nfoo\nbar foo\nFOO\n",
  "crlf.txt": "foo\r\nbar\r\n",
  "nofinal.txt": "x\nlast foo",
  "bom8.txt": Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("foo bom\n")]),
  "bom16.txt": Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("utf16 foo\nplain\n", "utf16le")]),
  "invalid.txt": Buffer.from([0x61, 0xff, 0x62, 0x0a, 0x66, 0x6f, 0x6f, 0x0a]),
  "bin.dat": Buffer.concat([Buffer.from("foo\n"), Buffer.from([0]), Buffer.from("foo\n")]),
  "latenul.txt": Buffer.concat([Buffer.from(`${"a".repeat(9000)}\nfoo\n`), Buffer.from([0])]),
  "unicode.txt": "café foo\néfoo\nK kelvin\nſtraße\n😀x\na😀b\nab\n\u00a0nbsp\nline\u2028sep foo\ntab\there\n",
  "many.txt": Array.from({ length: 50 }, (_, i) => `foo ${i}`).join("\n"),
  "sub/deep/d.txt": "foo deep\n",
  "sub/deep/d.md": "foo md\n",
  "sub/gen/out.txt": "foo generated\n",
  "sub/keep.log": "foo kept log\n",
  "sub/drop.log": "foo dropped log\n",
  "sub/.gitignore": "gen/\n*.log\n!keep.log\n",
  ".hidden/h.txt": "foo hidden\n",
  ".git/config": "foo in git\n",
  "secret/key.txt": "foo DENIED-SECRET\n",
};

beforeAll(() => {
  ({ dir, cleanup } = tempDir());
  proj = join(dir, "proj");
  outside = join(dir, "proj-secrets");
  for (const [name, data] of Object.entries(files)) {
    mkdirSync(join(proj, name, ".."), { recursive: true });
    writeFileSync(join(proj, name), data);
  }
  writeFileSync(join(proj, "long.min.js"), `${"x".repeat(300_000)}NEEDLE${"y".repeat(300_000)}\n`);
  writeFileSync(join(proj, "big.txt"), `foo\n${"z".repeat(2_000_000)}\n`);
  mkdirSync(outside);
  writeFileSync(join(outside, "passwd"), "foo OUTSIDE-SECRET\n");
  symlinkSync(join(outside, "passwd"), join(proj, "link-file"));
  symlinkSync(outside, join(proj, "link-dir"));
  symlinkSync(proj, join(proj, "sub", "up"));
  symlinkSync(join(proj, "secret", "key.txt"), join(proj, "alias.txt"));
});
afterAll(() => cleanup());

async function grep(args: Record<string, unknown>, parameters: Record<string, unknown> = {}) {
  const out = await fsRuntime(proj).call("grep", args, parameters);
  if (!out.ok) throw Object.assign(new Error(out.error.message), out.error);
  return out.result as any;
}

describe("grep: hostile paths", () => {
  it.each(["ripgrep", "js"])(
    "never follows links out, never prints a denied file, stops on cycles (%s)",
    async (engine) => {
      const r = await grep(
        { pattern: "foo", path: "." },
        { engine, deniedPaths: [join(proj, "secret")], maxResults: 5000 },
      );
      const text = JSON.stringify(r);
      expect(text).not.toContain("OUTSIDE-SECRET");
      expect(text).not.toContain("DENIED-SECRET");
      expect(text).not.toMatch(/up\/up/);
      expect(r.matches.every((m: any) => !m.file.startsWith("sub/up"))).toBe(true);
    },
  );
  it("refuses a path through a link outside, a prefix sibling, and a denied alias", async () => {
    await expect(grep({ pattern: "foo", path: "link-file" })).rejects.toMatchObject({ code: "access_denied" });
    await expect(grep({ pattern: "foo", path: "link-dir" })).rejects.toMatchObject({ code: "access_denied" });
    await expect(grep({ pattern: "foo", path: "../proj-secrets" })).rejects.toMatchObject({ code: "access_denied" });
    await expect(
      grep({ pattern: "foo", path: "alias.txt" }, { deniedPaths: [join(proj, "secret")] }),
    ).rejects.toMatchObject({
      code: "access_denied",
    });
  });
  it("rejects an invalid regex as GrepPatternError (validation_failed)", async () => {
    const err = await grep({ pattern: "foo(", path: "." }).catch((e) => e);
    expect(err.code).toBe("validation_failed");
    expect(err.details.rule).toBe("invalid_regex");
    expect(err.message).toMatch(/Invalid regular expression/);
  });
});

describe("grep: rules", () => {
  // "foo" over the whole tree with the default settings but maxResults: one search, read by the three tests below.
  let fooEverywhere: Promise<any> | undefined;
  const searchFooEverywhere = () => (fooEverywhere ??= grep({ pattern: "foo", path: "." }, { maxResults: 5000 }));
  it("matches ^foo$ on CRLF lines, reads BOM/UTF-16 files, reports sorted re-anchored paths", async () => {
    const r = await grep({ pattern: "^foo$", path: "." });
    expect(r.matches.map((m: any) => `${m.file}:${m.line}`)).toEqual([
      "a.txt:2",
      "crlf.txt:1",
      "invalid.txt:2",
      "latenul.txt:2",
    ]);
    const u = await searchFooEverywhere();
    const filesHit = new Set(u.matches.map((m: any) => m.file));
    expect(filesHit.has("bom16.txt")).toBe(true);
    expect(filesHit.has("bom8.txt")).toBe(true);
    expect(filesHit.has("nofinal.txt")).toBe(true);
    const sorted = [...u.matches].sort((a: any, b: any) =>
      a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line,
    );
    expect(u.matches).toEqual(sorted);
    const sub = await grep({ pattern: "deep", path: "sub/deep" });
    expect(sub.matches).toEqual([{ file: "sub/deep/d.txt", line: 1, text: "foo deep" }]);
  });
  it("skips binary files (NUL in the first 8 KiB) but searches a late NUL, and says so", async () => {
    const r = await searchFooEverywhere();
    const hit = new Set(r.matches.map((m: any) => m.file));
    expect(hit.has("bin.dat")).toBe(false);
    expect(hit.has("latenul.txt")).toBe(true);
    expect(r.skipped.binary).toBe(1);
    expect(r.notes.join(" ")).toMatch(/binary/);
  });
  it("skips files above maxFileSizeBytes, .git, dotfiles and .gitignored files, with notes; settings lift them", async () => {
    const r = await searchFooEverywhere();
    const hit = new Set(r.matches.map((m: any) => m.file));
    for (const f of ["big.txt", ".git/config", ".hidden/h.txt", "sub/gen/out.txt", "sub/drop.log"])
      expect(hit.has(f)).toBe(false);
    expect(hit.has("sub/keep.log")).toBe(true);
    expect(r.notes.join(" ")).toMatch(/maxFileSizeBytes/);
    expect(r.notes.join(" ")).toMatch(/gitignore/);
    const all = await grep(
      { pattern: "foo", path: "." },
      { maxResults: 5000, includeDotfiles: true, respectGitignore: false, maxFileSizeBytes: 5_000_000 },
    );
    const hit2 = new Set(all.matches.map((m: any) => m.file));
    for (const f of ["big.txt", ".hidden/h.txt", "sub/gen/out.txt", "sub/drop.log"]) expect(hit2.has(f)).toBe(true);
    expect(hit2.has(".git/config")).toBe(false);
  });
  it("caps per file and in total with truncated", async () => {
    const r = await grep({ pattern: "foo", path: "many.txt" });
    expect(r.matches).toHaveLength(20);
    expect(r.truncated).toBe(true);
    const t = await grep({ pattern: "foo", path: "." }, { maxResults: 3 });
    expect(t.matches).toHaveLength(3);
    expect(t.truncated).toBe(true);
    expect(t.matches.map((m: any) => m.file)).toEqual(["a.txt", "a.txt", "bom16.txt"]);
  });
  it("cuts a huge matched line around the match", async () => {
    const r = await grep({ pattern: "NEEDLE", path: "long.min.js" });
    expect(r.matches[0].text.length).toBeLessThan(700);
    expect(r.matches[0].text).toContain("NEEDLE");
    expect(r.matches[0].text).toMatch(/^\[…\d+ chars\] x+NEEDLEy+ \[…\d+ chars\]$/);
  });
  it("filters with glob: names at any depth, paths with /, ! to exclude", async () => {
    const names = async (glob: string) => [
      ...new Set(
        (await grep({ pattern: "foo", path: ".", glob }, { maxResults: 5000 })).matches.map((m: any) => m.file),
      ),
    ];
    expect(await names("*.md")).toEqual(["sub/deep/d.md"]);
    expect(await names("sub/**/*.txt")).toEqual(["sub/deep/d.txt"]);
    expect(await names("!*.txt")).toEqual(["sub/deep/d.md", "sub/keep.log"]);
  });
  it("refuses a glob that filters nothing: blank, or given with a single file", async () => {
    for (const glob of ["", "   "]) {
      const err = await grep({ pattern: "foo", path: ".", glob }).catch((e) => e);
      expect(err, JSON.stringify(glob)).toMatchObject({ code: "validation_failed", details: { argument: "glob" } });
      expect(err.message).toMatch(/leave "glob" out/);
    }
    const err = await grep({ pattern: "foo", path: "a.txt", glob: "*.md" }).catch((e) => e);
    expect(err).toMatchObject({ code: "validation_failed", details: { argument: "glob", rule: "glob_with_file" } });
  });
  it("a glob never brings back the dotfiles includeDotfiles leaves out, on either engine", async () => {
    const t = tempDir();
    try {
      writeFileSync(join(t.dir, ".env"), "TOKEN=secret\n");
      mkdirSync(join(t.dir, "sub"));
      writeFileSync(join(t.dir, "sub", ".env"), "TOKEN=nested\n");
      writeFileSync(join(t.dir, "a.txt"), "TOKEN=plain\n");
      for (const engine of ["auto", "js"]) {
        for (const glob of ["*", ".env", ".*", "!a.txt"]) {
          const out = await fsRuntime(t.dir).call("grep", { pattern: "TOKEN", path: ".", glob }, { engine });
          const files = (out as any).result.matches.map((m: any) => m.file);
          expect(files, `${engine} ${glob}`).toEqual(glob === "*" ? ["a.txt"] : []);
        }
        const dotted = await fsRuntime(t.dir).call(
          "grep",
          { pattern: "TOKEN", path: ".", glob: ".env" },
          {
            engine,
            includeDotfiles: true,
          },
        );
        expect(
          (dotted as any).result.matches.map((m: any) => m.file),
          engine,
        ).toEqual([".env", "sub/.env"]);
      }
    } finally {
      t.cleanup();
    }
  });
  it("searches a single file named explicitly, even a dotfile", async () => {
    const r = await grep({ pattern: "hidden", path: ".hidden/h.txt" });
    expect(r.matches).toEqual([{ file: ".hidden/h.txt", line: 1, text: "foo hidden" }]);
    expect(r.engine).toBe("js");
  });
});

const corpus: [string, boolean][] = [
  ["foo", false],
  ["foo", true],
  ["^foo$", false],
  ["^foo", true],
  ["foo$", false],
  ["a.b", false],
  ["a..b", false],
  ["^.$", false],
  ["^..$", false],
  ["^.{2}$", false],
  ["\\bfoo", false],
  ["\\Bfoo", false],
  ["\\w+", false],
  ["\\d+", false],
  ["^\\S+$", false],
  ["\\s", false],
  ["[^a-z ]", false],
  ["[^\\x00-\\x7f]", false],
  ["caf[eé]", false],
  ["k", true],
  ["s", true],
  ["STRASSE|straße", true],
  ["(foo|bar) (foo|deep)", false],
  ["fo{2}", false],
  ["fo{1,}?", false],
  ["x{", false],
  ["\\u00e9foo", false],
  ["\\x41", true],
  ["\\t", false],
  ["(?<n>fo)o", false],
  ["foo(?= \\d)", false],
  ["(?<!é)foo", false],
  ["(f)oo\\1", false],
  ["😀", false],
  ["[😀]", false],
  ["\\uFFFD", false],
  ["sep", false],
  [".*", false],
  ["^$", false],
  ["\\.log", false],
  ["NEEDLE", false],
];

describe.skipIf(!ripgrepPath())("differential: ripgrep and JS engines return the same matches", () => {
  it.each(corpus)("%j (caseInsensitive %s)", async (pattern, caseInsensitive) => {
    const settings = { maxResults: 5000, maxMatchesPerFile: 100 };
    const viaRg = await grep({ pattern, path: ".", caseInsensitive }, { ...settings, engine: "ripgrep" });
    const viaJs = await grep({ pattern, path: ".", caseInsensitive }, { ...settings, engine: "js" });
    expect(viaJs.engine).toBe("js");
    if (translateJsRegexForRipgrep(pattern, caseInsensitive) !== null) expect(viaRg.engine).toBe("ripgrep");
    expect(viaRg.matches).toEqual(viaJs.matches);
    expect(viaRg.truncated).toBe(viaJs.truncated);
    expect(viaRg.filesWithMatches).toBe(viaJs.filesWithMatches);
  });
  it("with the per-file cap hit and dotfiles/gitignore off", async () => {
    const s = { maxResults: 7, maxMatchesPerFile: 2, includeDotfiles: true, respectGitignore: false };
    const a = await grep({ pattern: "o", path: "." }, { ...s, engine: "ripgrep" });
    const b = await grep({ pattern: "o", path: "." }, { ...s, engine: "js" });
    expect(a.matches).toEqual(b.matches);
    expect(a.truncated).toBe(true);
  });
});

describe.skipIf(!ripgrepPath())("differential, generated patterns", () => {
  it("random patterns from a regex-atom alphabet give the same matches on both engines", async () => {
    const fc = await import("fast-check");
    const atom = fc.constantFrom(
      "f",
      "o",
      "a",
      "é",
      "K",
      "s",
      ".",
      "\\w",
      "\\W",
      "\\d",
      "\\s",
      "\\S",
      "\\b",
      "[a-f]",
      "[^o]",
      "[éa]",
      "(fo|ba)",
      "x?",
      " ",
      "\\t",
      "^",
      "$",
      "\\.",
      "[\\s\\d]",
    );
    const quant = fc.constantFrom("", "", "", "*", "+", "?", "{2}", "{1,3}", "*?");
    const pattern = fc
      .array(fc.tuple(atom, quant), { minLength: 1, maxLength: 5 })
      .map((parts) => parts.map(([a, q]) => (a === "^" || a === "$" || a === "\\b" ? a : a + q)).join(""));
    // Small files only: generated patterns may backtrack polynomially, which is fine on short lines.
    const t = tempDir();
    for (const f of ["unicode.txt", "a.txt", "crlf.txt", "invalid.txt", "bom16.txt", "bom8.txt", "nofinal.txt"]) {
      writeFileSync(join(t.dir, f), files[f]!);
    }
    const rt = fsRuntime(t.dir);
    const run = async (p: string, ci: boolean, engine: string) => {
      await rt.store.save("u1", "grep", {
        enabled: null,
        parameters: { engine, maxResults: 5000, maxMatchesPerFile: 100 },
      });
      const out = await rt.runtime.executeTool(
        "grep",
        { pattern: p, path: ".", caseInsensitive: ci },
        {
          userId: "u1",
          chatId: "c",
          workingDirectory: t.dir,
        },
      );
      return out.ok ? (out.result as any).matches : out.error.code;
    };
    await fc
      .assert(
        fc.asyncProperty(pattern, fc.boolean(), async (p, ci) => {
          expect(await run(p, ci, "ripgrep")).toEqual(await run(p, ci, "js"));
        }),
        { numRuns: Number(process.env.GREP_FC_RUNS ?? 25), seed: Number(process.env.GREP_FC_SEED ?? 4) },
      )
      .finally(() => t.cleanup());
  });
});

describe("grep: a catastrophic pattern cannot block the process", () => {
  it.each(["js", "auto"])("is cancelled mid-match while timers keep running (%s)", async (engine) => {
    const t = tempDir();
    try {
      writeFileSync(join(t.dir, "0-redos.txt"), `${"a".repeat(48)}\n`);
      // More files than one worker request holds: the requests still queued when the worker is terminated must
      // not surface as unhandled rejections.
      for (let i = 0; i < 150; i++) writeFileSync(join(t.dir, `f${i}.txt`), "aaa\n");
      const rt = fsRuntime(t.dir);
      await rt.store.save("u1", "grep", { enabled: null, parameters: { engine } });
      const controller = new AbortController();
      // The match spins a thread at full speed until the abort, and the abort comes from a timer of this process
      // after its 10th tick: a blocked event loop would never send it, and the call would end by its budget instead.
      let ticks = 0;
      const timer = setInterval(() => {
        if (++ticks === 10) controller.abort();
      }, 10);
      const pattern = engine === "js" ? "(a|a)*b" : "(?=a)(a|a)*b";
      const out = await rt.runtime.executeTool(
        "grep",
        { pattern, path: "." },
        {
          userId: "u1",
          chatId: "c",
          workingDirectory: t.dir,
          signal: controller.signal,
        },
      );
      clearInterval(timer);
      expect(out).toMatchObject({ ok: false, error: { code: "aborted" } });
      expect(ticks).toBeGreaterThanOrEqual(10);
      // Searches reuse the threads of searches that ended cleanly, never the cancelled one (still inside its
      // match): the next searches are answered, with their own pattern.
      for (const next of ["^aaa$", "^a{3}$"]) {
        const again = await rt.runtime.executeTool(
          "grep",
          { pattern: next, path: "." },
          { userId: "u1", chatId: "c", workingDirectory: t.dir },
        );
        expect(again.ok, JSON.stringify(again).slice(0, 600)).toBe(true);
        const matches = (again as { result: { matches: { file: string; text: string }[] } }).result.matches;
        expect(matches.length).toBeGreaterThan(10);
        expect(matches.every((m) => m.file.startsWith("f") && m.text === "aaa")).toBe(true);
      }
    } finally {
      t.cleanup();
    }
  });
});

describe.skipIf(!ripgrepPath())(
  "ripgrep engine: binary files, collection and odd names agree with the JS engine",
  () => {
    let t: { dir: string; cleanup: () => void };
    const nulAt = (offset: number, prefix = Buffer.alloc(0)) => {
      // "foo" first, padding up to `offset` (counted from the file's first byte), then a NUL and another match
      const head = Buffer.concat([prefix, Buffer.from("foo head\n")]);
      const pad = Buffer.from(`${"p".repeat(offset - head.length - 1)}\n`);
      return Buffer.concat([head, pad, Buffer.from([0]), Buffer.from("foo tail\n")]);
    };
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    beforeAll(() => {
      t = tempDir();
      const tree: Record<string, string | Buffer> = {
        "early.bin": Buffer.concat([Buffer.from("foo 1\n"), Buffer.from([0]), Buffer.from("\nfoo 2\n")]),
        "early-nomatch.bin": Buffer.concat([Buffer.from([0]), Buffer.from("bar\n")]),
        "late.txt": Buffer.concat([
          Buffer.from(`foo a\n${"x".repeat(9000)}\nb`),
          Buffer.from([0]),
          Buffer.from("foo c\nfoo d\n"),
        ]),
        "edge8191.txt": nulAt(8191),
        "edge8192.txt": nulAt(8192),
        "bom8191.txt": nulAt(8191, bom),
        "bom8192.txt": nulAt(8192, bom),
        "far.txt": Buffer.concat([
          Buffer.from(`foo far\n${"y".repeat(200_000)}\n`),
          Buffer.from([0]),
          Buffer.from("foo\n"),
        ]),
        "wide.txt": `${"é".repeat(400)}foo${"ü".repeat(400)}\n${"a".repeat(700)}foo${"b".repeat(10)}\n`,
      };
      for (let i = 0; i < 40; i++) tree[`many/f${String(i).padStart(2, "0")}.txt`] = "foo 1\nfoo 2\nfoo 3\n";
      for (const [name, data] of Object.entries(tree)) {
        mkdirSync(join(t.dir, name, ".."), { recursive: true });
        writeFileSync(join(t.dir, name), data);
      }
    });
    afterAll(() => t.cleanup());

    const run = async (engine: string, pattern: string, parameters: Record<string, unknown> = {}) => {
      const out = await fsRuntime(t.dir).call("grep", { pattern, path: "." }, { engine, ...parameters });
      if (!out.ok) throw Object.assign(new Error(out.error.message), out.error);
      return out.result as any;
    };

    it.each([
      ["foo", {}],
      ["foo", { maxResults: 7, maxMatchesPerFile: 2 }],
      ["fo+ [a-d]", {}],
      ["b\\x00foo", {}],
      ["f.o", { maxResults: 9 }],
      ["^foo$", { maxResults: 5000 }],
    ])("%j %j", async (pattern, parameters) => {
      const settings = { maxResults: 5000, maxMatchesPerFile: 100, ...parameters };
      const rg = await run("ripgrep", pattern, settings);
      const js = await run("js", pattern, settings);
      expect(rg.engine).toBe("ripgrep");
      expect(rg.matches).toEqual(js.matches);
      expect(rg.truncated).toBe(js.truncated);
      expect(rg.filesWithMatches).toBe(js.filesWithMatches);
    });

    it("skips the files with a NUL byte in their first 8 KiB, counting those with a match", async () => {
      const r = await run("ripgrep", "foo", { maxResults: 5000 });
      const hit = new Set(r.matches.map((m: any) => m.file));
      for (const f of ["late.txt", "edge8192.txt", "bom8192.txt", "far.txt", "wide.txt"]) expect(hit.has(f)).toBe(true);
      for (const f of ["early.bin", "edge8191.txt", "bom8191.txt"]) expect(hit.has(f)).toBe(false);
      expect(r.skipped.binary).toBe(3);
      expect(r.matches.find((m: any) => m.file === "late.txt" && m.line === 3)?.text).toBe("b\u0000foo c");
    });

    it("falls back to the JS engine when a file name holds a line break", async () => {
      const odd = join(t.dir, "odd\nname.txt");
      writeFileSync(odd, "foo odd\n");
      try {
        const r = await run("ripgrep", "foo odd");
        expect(r.engine).toBe("js");
        expect(r.matches).toEqual([{ file: "odd\nname.txt", line: 1, text: "foo odd" }]);
      } finally {
        rmSync(odd);
      }
    });
  },
);
