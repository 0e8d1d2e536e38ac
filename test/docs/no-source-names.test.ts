/**
 * The project speaks for itself: code, docs and the README never cite the internal source documents by file name
 * or by their numbers ("(002)", "002-style", "000:"), nor issue numbers or a design document a reader does not
 * have; where behaviour follows an external convention, the convention is named instead.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const PATTERNS = [
  /\b\d{3}_[0-9a-f]{16}(?:\.txt)?\b/,
  /\b00[024]-style\b/i,
  /\((?:seed )?00[024]\b[^)]*\)/,
  /(?:^|[\s(])00[024]:\s/,
  /\bthe 00[024]\b/i,
  /\bseed 00[024]\b/i,
  // issue references and the design notes that are not part of the repository
  /\bissue #?\d+\b/i,
  /\(issue: /,
  /\bDESIGN\.md\b/,
  // a specification's own wording the reader does not have: its placeholder names, or a function id followed by
  // a quotation of its text ("tool::shell_exec": "Execution logged …")
  /\bWORKSPACE_ROOT\b/,
  /"tool::[a-z_]+":\s*"/,
];

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : /\.(ts|md|mjs|json)$/.test(name) ? [path] : [];
  });
}

describe("no source-document names in the project", () => {
  it("src/, test/, docs/ and README.md name no source document", () => {
    const hits: string[] = [];
    const self = fileURLToPath(import.meta.url);
    const tests = files(join(root, "test")).filter((file) => file !== self);
    for (const file of [...files(join(root, "src")), ...tests, ...files(join(root, "docs")), join(root, "README.md")]) {
      readFileSync(file, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (PATTERNS.some((p) => p.test(line)))
            hits.push(`${relative(root, file)}:${i + 1}: ${line.trim().slice(0, 120)}`);
        });
    }
    expect(hits).toEqual([]);
  });

  it("the check catches each form", () => {
    for (const sample of [
      // a made-up name of the same shape, assembled so this file names no real one
      `see ${["123", "0123456789abcdef"].join("_")}.txt`,
      "// 002-style function ids",
      'title: "File list (002)"',
      " * 000: registerTool",
      "the 002 function ids",
      " * protocol-faithful fakes (issue 3, tests)",
      " * Approvals (issue: the ask round-trip)",
      " * The HTTP service (DESIGN.md, surfaces)",
      ' * cwd: relative to the chat working directory ("relative to WORKSPACE_ROOT")',
      ' * Security audit ("tool::shell_exec": "Execution logged to security audit")',
    ]) {
      expect(
        PATTERNS.some((p) => p.test(sample)),
        sample,
      ).toBe(true);
    }
  });
});
