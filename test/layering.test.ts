import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { findLayerViolations, importSpecifiers, readSourceTree } from "./helpers/layers.js";

/** The most lines a hand-written source file may have (a longer one holds more than one concern: split it). */
const MAX_LINES = 600;

/** Generated files (written by a script, never by hand), exempt from the size rule. */
const GENERATED = (file: string) => file.startsWith("core/generated/") || file === "tools/time/tz-names-data.ts";

/** Lines of a source text (a final newline ends the last line; it does not start another). */
function lineCount(source: string): number {
  if (source === "") return 0;
  return source.split("\n").length - (source.endsWith("\n") ? 1 : 0);
}

/** The hand-written files over MAX_LINES, as `path (n lines)`, minus the generated ones and the allowed ones. */
function oversized(files: ReadonlyMap<string, string>, allowed: ReadonlySet<string>): string[] {
  return [...files]
    .filter(([file, source]) => !GENERATED(file) && !allowed.has(file) && lineCount(source) > MAX_LINES)
    .map(([file, source]) => `${file} (${lineCount(source)} lines)`);
}

describe("layering (arrows point down only)", () => {
  it("src/ has no upward import and no tool imports storage", () => {
    const files = readSourceTree(fileURLToPath(new URL("../src", import.meta.url)));
    expect(files.size).toBeGreaterThan(50);
    expect(findLayerViolations(files)).toEqual([]);
  });

  it("fails on an upward import in a fixture graph (the check can fail)", () => {
    const fixture = new Map([
      ["core/runtime.ts", 'import { startServer } from "../server/serve.js";\nexport const x = 1;'],
      [
        "tools/builtin/x.ts",
        'import type { Kysely } from "kysely";\nimport type { DatabaseSchema } from "../../storage/database.js";',
      ],
      ["loop/run.ts", 'const m = await import("../app/context.js");'],
      ["server/app.ts", 'import { ChatService } from "../app/chat-service.js";\nexport * from "../core/errors.js";'],
      ["core/errors.ts", 'import { x } from "./types.js";'],
      ["index.ts", 'export * from "./cli/main.js";'],
    ]);
    expect(findLayerViolations(fixture)).toEqual([
      { file: "core/runtime.ts", specifier: "../server/serve.js", from: "core", to: "server" },
      { file: "tools/builtin/x.ts", specifier: "../../storage/database.js", from: "tools", to: "storage" },
      { file: "loop/run.ts", specifier: "../app/context.js", from: "loop", to: "app" },
    ]);
  });

  it("reads static, type-only, re-export, side-effect and dynamic imports", () => {
    const source = [
      'import "./side.js";',
      'import type { A } from "./a.js";',
      'import {\n  B,\n  C,\n} from "../b.js";',
      'export { D } from "./d.js";',
      'const e = await import("./e.js");',
      'import { readFileSync } from "node:fs";',
    ].join("\n");
    expect(importSpecifiers(source)).toEqual(["./side.js", "./a.js", "../b.js", "./d.js", "./e.js"]);
  });

  it("one transaction path: only storage/transaction.ts opens a transaction (every other module calls inTransaction)", () => {
    const files = readSourceTree(fileURLToPath(new URL("../src", import.meta.url)));
    const opens = /\.transaction\(\s*\)/;
    const offenders = [...files].filter(([file, source]) => file !== "storage/transaction.ts" && opens.test(source));
    expect(offenders.map(([file]) => file)).toEqual([]);
    // the check can fail: the shape it looks for is what Kysely's own transaction builder call looks like
    expect(opens.test("return this.db.transaction().execute(async (trx) => {")).toBe(true);
  });

  it("one configuration reader: only core/config.ts reads TOOLHOST_* variables (everything else receives the config)", () => {
    const files = readSourceTree(fileURLToPath(new URL("../src", import.meta.url)));
    const reads = /\benv(?:\.|\[\s*["'`])TOOLHOST_[A-Z0-9_]+/;
    const offenders = [...files].filter(([file, source]) => file !== "core/config.ts" && reads.test(source));
    expect(offenders.map(([file]) => file)).toEqual([]);
    for (const sample of ["process.env.TOOLHOST_DATA_DIR", 'env["TOOLHOST_CHAT_ROOTS"]', "this.#env.TOOLHOST_X"])
      expect(reads.test(sample), sample).toBe(true);
  });

  it(`rooms of one concern: no hand-written file under src/ has more than ${MAX_LINES} lines`, () => {
    const files = readSourceTree(fileURLToPath(new URL("../src", import.meta.url)));
    expect(oversized(files, new Set())).toEqual([]);
  });

  it("the size check can fail: counts lines, skips generated files and the allowance only", () => {
    const long = `${"x\n".repeat(MAX_LINES + 1)}`;
    const fixture = new Map([
      ["app/big.ts", long],
      ["app/exact.ts", "x\n".repeat(MAX_LINES)],
      ["app/no-final-newline.ts", `${"x\n".repeat(MAX_LINES)}x`],
      ["core/generated/table.ts", long],
      ["tools/time/tz-names-data.ts", long],
      ["core/runtime.ts", long],
    ]);
    expect(oversized(fixture, new Set(["core/runtime.ts"]))).toEqual([
      `app/big.ts (${MAX_LINES + 1} lines)`,
      `app/no-final-newline.ts (${MAX_LINES + 1} lines)`,
    ]);
    expect(oversized(fixture, new Set())).toContain(`core/runtime.ts (${MAX_LINES + 1} lines)`);
  });
});
