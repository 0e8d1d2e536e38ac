/** glob: Bun.Glob's pattern language, dotfiles, caps, re-anchoring, symlink cycles, policy. */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import picomatch from "picomatch";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileGlob } from "../../src/tools/builtin/glob.js";
import { fsRuntime, tempDir } from "./helpers.js";

let dir: string;
let cleanup: () => void;
let proj: string;

beforeAll(() => {
  ({ dir, cleanup } = tempDir());
  proj = join(dir, "proj");
  const files = [
    "src/a.ts",
    "src/b.tsx",
    "src/c.js",
    "src/deep/d.ts",
    "src/.hidden.ts",
    ".github/workflows/ci.yml",
    ".github/workflows/release.yml",
    ".github/CODEOWNERS",
    "docs/readme.md",
    "x1.txt",
    "x2.txt",
    "xa.txt",
    "secret/key.ts",
  ];
  for (const f of files) {
    mkdirSync(join(proj, f, ".."), { recursive: true });
    writeFileSync(join(proj, f), f);
  }
  mkdirSync(join(dir, "proj-secrets", "deep"), { recursive: true });
  writeFileSync(join(dir, "proj-secrets", "s.ts"), "");
  writeFileSync(join(dir, "proj-secrets", "deep", "t.ts"), "");
  symlinkSync(join(proj, "src"), join(proj, "src-alias")); // a link inside the root, to a directory inside it
  symlinkSync(proj, join(proj, "src", "up")); // a cycle
  symlinkSync(join(dir, "proj-secrets"), join(proj, "out-link"));
});
afterAll(() => cleanup());

async function glob(args: Record<string, unknown>, parameters?: Record<string, unknown>, cwd: string | null = proj) {
  const out = await fsRuntime(cwd).call("glob", args, parameters);
  if (!out.ok) throw Object.assign(new Error(out.error.message), out.error);
  return out.result as { matches: string[]; truncated: boolean; cwd: string };
}

describe("glob", () => {
  it("returns promptly on a symlink cycle without up/up/… paths, and never enters a link outside", async () => {
    const r = await glob({ pattern: "**/*.ts" });
    expect(r.matches).toEqual(["secret/key.ts", "src/a.ts", "src/deep/d.ts"]);
    expect(r.matches.join()).not.toMatch(/up\//);
    expect(r.matches.join()).not.toMatch(/s\.ts$/);
  });
  it("refuses a cwd outside the root and hides denied entries", async () => {
    await expect(glob({ pattern: "*", cwd: "../proj-secrets" })).rejects.toMatchObject({ code: "access_denied" });
    await expect(glob({ pattern: "*", cwd: "out-link" })).rejects.toMatchObject({ code: "access_denied" });
    const r = await glob({ pattern: "**/*.ts" }, { deniedPaths: [join(proj, "secret")] });
    expect(r.matches).toEqual(["src/a.ts", "src/deep/d.ts"]);
    await expect(glob({ pattern: "../*" })).rejects.toMatchObject({ code: "validation_failed" });
    await expect(glob({ pattern: "/etc/*" })).rejects.toMatchObject({ code: "validation_failed" });
  });
  it("never reaches through a link in the pattern's fixed part, and never lists a denied base", async () => {
    // The walk from the directory never enters a link; a pattern whose fixed part goes through one finds nothing.
    expect((await glob({ pattern: "out-link/deep/*" })).matches).toEqual([]);
    expect((await glob({ pattern: "out-link/deep/t.ts" })).matches).toEqual([]);
    const denyDeep = { deniedPaths: [join(proj, "src", "deep")] };
    expect((await glob({ pattern: "src-alias/deep/*.ts" }, denyDeep)).matches).toEqual([]);
    expect((await glob({ pattern: "src/deep/**" }, denyDeep)).matches).toEqual([]);
    expect((await glob({ pattern: "src/**" }, denyDeep)).matches).toEqual([
      "src",
      "src/a.ts",
      "src/b.tsx",
      "src/c.js",
      "src/up",
    ]);
    // The link itself is an entry like any other (reported, not followed).
    expect((await glob({ pattern: "src-alias/**" })).matches).toEqual(["src-alias"]);
  });
  it("matches dot-directories named literally and braces", async () => {
    expect((await glob({ pattern: ".github/workflows/*.yml" })).matches).toEqual([
      ".github/workflows/ci.yml",
      ".github/workflows/release.yml",
    ]);
    expect((await glob({ pattern: "src/*.{ts,tsx}" })).matches).toEqual(["src/a.ts", "src/b.tsx"]);
  });
  it("keeps dotfiles out of * and ** unless includeDotfiles", async () => {
    expect((await glob({ pattern: "**/*.yml" })).matches).toEqual([]);
    expect((await glob({ pattern: "**/*.yml" }, { includeDotfiles: true })).matches).toEqual([
      ".github/workflows/ci.yml",
      ".github/workflows/release.yml",
    ]);
    expect((await glob({ pattern: "src/*.ts" }, { includeDotfiles: true })).matches).toEqual([
      "src/.hidden.ts",
      "src/a.ts",
    ]);
  });
  it("supports ?, [], !, and directories as matches", async () => {
    expect((await glob({ pattern: "x?.txt" })).matches).toEqual(["x1.txt", "x2.txt", "xa.txt"]);
    expect((await glob({ pattern: "x[0-9].txt" })).matches).toEqual(["x1.txt", "x2.txt"]);
    expect((await glob({ pattern: "src/*" })).matches).toEqual([
      "src/a.ts",
      "src/b.tsx",
      "src/c.js",
      "src/deep",
      "src/up",
    ]);
    const neg = (await glob({ pattern: "!**/*.{ts,tsx,js,md,txt}" })).matches;
    expect(neg).toContain("src");
    expect(neg).not.toContain("src/a.ts");
  });
  it("caps at maxResults with truncated, stopping the walk", async () => {
    const r = await glob({ pattern: "**" }, { maxResults: 3 });
    expect(r.matches).toHaveLength(3);
    expect(r.truncated).toBe(true);
    expect((await glob({ pattern: "x*.txt" }, { maxResults: 3 })).truncated).toBe(false);
  });
  it("re-anchors results from cwd to the chat working directory; absolute opts out", async () => {
    expect((await glob({ pattern: "*.ts", cwd: "src" })).matches).toEqual(["src/a.ts"]);
    expect((await glob({ pattern: "*.ts", cwd: "src" }, { absolute: true })).matches).toEqual([join(proj, "src/a.ts")]);
    const unbound = await glob({ pattern: "*.ts", cwd: join(proj, "src") }, { allowedPaths: [proj] }, null);
    expect(unbound.matches).toEqual([join(proj, "src/a.ts")]);
  });
  it("decides a last name of text and * in linear time, exactly as the matcher does", () => {
    // The backtracking matcher takes milliseconds per long name on such a pattern; the name filter answers first.
    const slow = compileGlob("**/*a*a*a", { dot: false });
    expect(slow.nameFilter?.(`${"a".repeat(250)}b`)).toBe(false);
    expect(slow.nameFilter?.(`b${"a".repeat(3)}`)).toBe(true);
    const piece = fc.constantFrom("a", "b", "ab", ".", "*", "**");
    // Directory entries are never "." or "..".
    const name = fc.stringMatching(/^[ab.]{1,12}$/).filter((n) => n !== "." && n !== "..");
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 6 }), fc.array(name), fc.boolean(), (pieces, ns, dot) => {
        const last = pieces.join("");
        if (last.startsWith("**") || last === "." || last === "..") return;
        const filter = compileGlob(`**/${last}`, { dot }).nameFilter;
        expect(filter).toBeDefined();
        const exact = picomatch(last, { dot, noextglob: true });
        for (const n of ns) expect(filter!(n), `${last} ${n}`).toBe(exact(n));
      }),
      { numRuns: 300, seed: 16 },
    );
  });
  it("compileGlob prunes directories the pattern cannot reach", () => {
    const g = compileGlob("src/*.{ts,tsx}", { dot: false });
    expect(g.base).toBe("src");
    expect(g.mayContain("src")).toBe(true);
    expect(g.mayContain("src/deep")).toBe(false);
    expect(g.mayContain("docs")).toBe(false);
    const h = compileGlob("a/**/b/*.ts", { dot: false });
    expect(h.mayContain("a/x/y")).toBe(true);
    expect(h.mayContain("a/.git")).toBe(false);
    expect(h.mayContainName).toBeUndefined();
    // A globstar first: a directory's own name decides, as mayContain on its whole path does.
    const any = compileGlob("**/*.ts", { dot: false });
    for (const rel of ["src", "src/.cache", ".git", "a/b/c"]) {
      expect(any.mayContainName?.(rel.split("/").pop()!)).toBe(any.mayContain(rel));
    }
    expect(compileGlob("**/*.ts", { dot: true }).mayContainName?.(".git")).toBe(true);
  });
});
