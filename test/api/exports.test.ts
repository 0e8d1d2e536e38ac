/**
 * The public API is a decision: the runtime names of every entry (test/api/entries.ts) are compared with the
 * checked-in list in test/api/public-api.txt, and the root stays small. To change the surface, change the entry
 * file and the list together — `UPDATE_PUBLIC_API=1 npx vitest
 * run test/api/exports.test.ts` rewrites the list — and say why in the commit (CONTRIBUTING.md, "Public API").
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { importSpecifiers, readSourceTree } from "../helpers/layers.js";
import { ENTRIES, type Entry, ROOT_RUNTIME_NAMES_MAX, sourceModules } from "./entries.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const LIST = fileURLToPath(new URL("./public-api.txt", import.meta.url));
function render(names: Record<Entry, string[]>): string {
  return `${(Object.keys(ENTRIES) as Entry[]).map((entry) => [`[${entry}]`, ...names[entry]].join("\n")).join("\n\n")}\n`;
}

function parse(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  let current: string[] | undefined;
  for (const line of text.split("\n")) {
    const header = /^\[(.+)\]$/.exec(line);
    if (header) out[header[1]!] = current = [];
    else if (line.trim()) current?.push(line.trim());
  }
  return out;
}

describe("public API", () => {
  it("the entry files name every export (no `export *`)", () => {
    for (const file of Object.values(ENTRIES)) {
      expect(readFileSync(`${root}${file}`, "utf8"), file).not.toMatch(/export\s*\*/);
    }
  });

  it("the runtime names of each entry equal the checked-in list", async () => {
    const actual = {} as Record<Entry, string[]>;
    for (const entry of Object.keys(ENTRIES) as Entry[])
      actual[entry] = Object.keys(await sourceModules[entry]()).sort();
    if (process.env.UPDATE_PUBLIC_API === "1") writeFileSync(LIST, render(actual));
    const expected = parse(readFileSync(LIST, "utf8"));
    for (const entry of Object.keys(ENTRIES) as Entry[]) {
      expect(
        actual[entry],
        `${entry}: exports differ from test/api/public-api.txt (a deliberate change? see the header)`,
      ).toEqual(expected[entry]);
    }
  });

  it(`the root entry exports at most ${ROOT_RUNTIME_NAMES_MAX} runtime names (the rest live on subpaths)`, async () => {
    expect(Object.keys(await sourceModules.toolhost()).length).toBeLessThanOrEqual(ROOT_RUNTIME_NAMES_MAX);
  });

  it("package.json's exports map has exactly the entries, each pointing at its built file", async () => {
    const manifest = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as {
      exports: Record<string, { types: string; default: string } | string>;
    };
    const subpaths = Object.keys(manifest.exports).filter((key) => key !== "./package.json");
    expect(subpaths.sort()).toEqual(
      (Object.keys(ENTRIES) as Entry[]).map((e) => (e === "toolhost" ? "." : `./${e.slice(9)}`)).sort(),
    );
    for (const entry of Object.keys(ENTRIES) as Entry[]) {
      const target = manifest.exports[entry === "toolhost" ? "." : `./${entry.slice(9)}`] as { default: string };
      expect(target.default, entry).toBe(`./${ENTRIES[entry].replace(/^src\//, "dist/").replace(/\.ts$/, ".js")}`);
    }
  });

  // The built package resolving each subpath through its exports map, with types, to the names of the list is checked
  // in test/api/embedding.test.ts, which loads the built entries anyway (loading them twice cost a second or two).

  it("every public runtime name is declared with a docstring (in the built type declarations)", () => {
    const declarations = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) return name === "bundle" ? [] : declarations(path);
        return name.endsWith(".d.ts") ? [readFileSync(path, "utf8")] : [];
      });
    const texts = declarations(`${root}dist`);
    const names = new Set(Object.values(parse(readFileSync(LIST, "utf8"))).flat());
    const undocumented = [...names].filter(
      (name) =>
        !texts.some((text) =>
          new RegExp(`\\*/\\n(?:export )?(?:declare )?(?:abstract )?(?:function|class|const|let) ${name}\\b`).test(
            text,
          ),
        ),
    );
    expect(undocumented).toEqual([]);
  });

  it("\"toolhost\" reaches no HTTP, MCP, CLI or framework adapter module: those are the subpaths' (and the bin's) alone", () => {
    const files = readSourceTree(`${root}src`);
    const reached = new Set<string>();
    const visit = (file: string) => {
      if (reached.has(file) || !files.has(file)) return;
      reached.add(file);
      for (const specifier of importSpecifiers(files.get(file)!)) {
        visit(posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, ".ts"));
      }
    };
    visit("index.ts");
    expect(reached.size).toBeGreaterThan(100);
    // Nor, through the adapters, the optional peer dependencies `ai` and `@openai/agents`: importing "toolhost"
    // works without them installed.
    expect([...reached].filter((file) => /^(server|mcp|cli|adapters)\//.test(file))).toEqual([]);
  });
});
