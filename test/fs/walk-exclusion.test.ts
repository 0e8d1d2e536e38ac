/**
 * walkExclusion decides containment once per walk root; it must agree with the per-entry check
 * (isExcludedEntry) on every entry, for denied paths inside, around and beside the root, in lexical and real form.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type EffectivePathPolicy, isExcludedEntry, walkExclusion } from "../../src/core/path-policy.js";

const policyOf = (denied: string[]): EffectivePathPolicy => ({
  restrict: false,
  allowed: [],
  denied,
  explicitRoots: false,
  protected: [],
  noWorkingDirectory: false,
  workingDirectoryMoved: false,
});

const segment = fc.constantFrom("a", "b", "ab", "a.b", "node_modules", ".git", "x-y", "a b");
const relPath = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const absPath = fc.array(segment, { minLength: 0, maxLength: 4 }).map((s) => `/${s.join("/")}`);

describe("walkExclusion", () => {
  it("agrees with isExcludedEntry for generated roots, denied paths and entries", () => {
    fc.assert(
      fc.property(
        absPath,
        absPath,
        fc.array(absPath, { maxLength: 4 }),
        fc.array(relPath, { maxLength: 20 }),
        (lex, real, denied, rels) => {
          const policy = policyOf(denied);
          const excluded = walkExclusion(policy, lex, real);
          for (const rel of rels) {
            expect(excluded(rel)).toBe(
              isExcludedEntry(policy, `${lex === "/" ? "" : lex}/${rel}`, `${real === "/" ? "" : real}/${rel}`),
            );
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("pins the shapes that matter", () => {
    const inside = walkExclusion(policyOf(["/w/proj/secret"]), "/w/proj", "/w/proj");
    expect(inside("secret")).toBe(true);
    expect(inside("secret/key")).toBe(true);
    expect(inside("secrets")).toBe(false);
    expect(inside("src/secret")).toBe(false);
    expect(walkExclusion(policyOf(["/w"]), "/w/proj", "/w/proj")("anything")).toBe(true);
    expect(walkExclusion(policyOf(["/w/proj2"]), "/w/proj", "/w/proj")("x")).toBe(false);
    // A denied path reached through the root's real location (the root is a link to /data/real).
    const viaReal = walkExclusion(policyOf(["/data/real/db"]), "/w/link", "/data/real");
    expect(viaReal("db/file")).toBe(true);
    expect(viaReal("dbx")).toBe(false);
  });
});

describe("resultPathMapper", () => {
  it("agrees with toResultPath for roots inside, around, beside and through a symlinked working directory", async () => {
    const { mkdirSync, mkdtempSync, symlinkSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const { resultPathMapper, toResultPath } = await import("../../src/core/path-policy.js");
    const top = mkdtempSync(join(tmpdir(), "toolhost-rpm-"));
    for (const d of ["w/a/b", "w/c", "other/x"]) mkdirSync(join(top, d), { recursive: true });
    symlinkSync(join(top, "w"), join(top, "wlink"));
    const wds = [null, join(top, "w"), join(top, "wlink"), join(top, "w/a"), top];
    const roots = [top, join(top, "w"), join(top, "w/a"), join(top, "other"), join(top, "wlink/a"), "/"];
    const rels = ["", "a", "a/b", "c/d.txt", "x/y/z"];
    for (const workingDirectory of wds) {
      for (const root of roots) {
        const map = resultPathMapper(root, { workingDirectory });
        for (const rel of rels) {
          expect(map(rel), `${workingDirectory} ${root} ${rel}`).toBe(
            toResultPath(rel ? join(root, rel) : root, { workingDirectory }),
          );
        }
      }
    }
  });
});
