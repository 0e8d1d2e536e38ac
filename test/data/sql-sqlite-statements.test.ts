/**
 * sql_query on a real SQLite file, on the statements its worker checks by their program: EXPLAIN and EXPLAIN QUERY
 * PLAN run (behind whitespace and comments too, and whatever they explain is not executed), ATTACH and DETACH are
 * refused in every spelling, and a string literal that names the attach functions is data, not an ATTACH. The other
 * refusals hold when hidden behind comments: writes, pragma writes, VACUUM INTO, a second statement.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { type ToolCallOutcome, ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import { sqlQueryTool } from "../../src/tools/builtin/sql-query.js";
import { DataSourceCatalog } from "../../src/tools/data/sources.js";
import { tempDir } from "../shell/helpers.js";

describe.concurrent("sql_query on SQLite: EXPLAIN, ATTACH and hidden refusals", () => {
  let runtime: ToolRuntime;
  let catalog: DataSourceCatalog;
  let dir: string;
  let file: string;
  let cleanup: () => void;

  beforeAll(async () => {
    const temp = tempDir("toolhost-sqlite-");
    ({ dir, cleanup } = temp);
    file = join(dir, "shop.db");
    const db = new Database(file);
    db.exec(`
      CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
      CREATE INDEX items_name_idx ON items (name);
      INSERT INTO items VALUES (1, 'apple'), (2, 'pear');
    `);
    db.close();
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ dataSources: { shop: { url: `sqlite:${file}` } } }));
    catalog = new DataSourceCatalog({ env: { TOOLHOST_CONFIG: config } });
    const registry = new ToolRegistryStore();
    registry.register(sqlQueryTool);
    const store = new MemoryToolSettingsStore();
    await store.save("u1", "sql_query", { enabled: true, parameters: {} });
    runtime = new ToolRuntime({ registry, store, audit: new MemoryAuditSink(), services: { dataSources: catalog } });
  });

  afterAll(async () => {
    await catalog?.close();
    cleanup?.();
  });

  const query = (sql: string, params?: unknown[]): Promise<ToolCallOutcome> =>
    runtime.executeTool("sql_query", { source: "shop", sql, ...(params ? { params } : {}) }, { userId: "u1" });
  const result = (outcome: ToolCallOutcome, sql: string) => {
    if (!outcome.ok) throw new Error(`${sql}: ${outcome.error.code}: ${outcome.error.message}`);
    return outcome.result as { columns: { name: string }[]; rows: unknown[][] };
  };
  const fingerprint = () => createHash("sha256").update(readFileSync(file)).digest("hex");

  it("runs EXPLAIN and EXPLAIN QUERY PLAN, behind whitespace and comments, with bound parameters", async () => {
    for (const sql of [
      "EXPLAIN SELECT * FROM items",
      "explain select name from items where id = 1",
      "  \n\tEXPLAIN SELECT 1",
      "-- the program\nEXPLAIN SELECT 1",
      "/* the program */ ExPlAiN SELECT 1",
      "/* a */ -- b\n /* c */EXPLAIN/* d */SELECT 1",
    ]) {
      const program = result(await query(sql), sql);
      expect(
        program.columns.map((c) => c.name),
        sql,
      ).toEqual(["addr", "opcode", "p1", "p2", "p3", "p4", "p5", "comment"]);
      expect(
        program.rows.map((r) => r[1]),
        sql,
      ).toContain("Halt");
    }
    for (const sql of [
      "EXPLAIN QUERY PLAN SELECT * FROM items WHERE name = ?",
      "-- which index?\n  explain query plan select * from items where name = ?",
      "/* plan */EXPLAIN/**/QUERY PLAN SELECT * FROM items WHERE name = ?",
    ]) {
      const plan = result(await query(sql, ["apple"]), sql);
      expect(
        plan.columns.map((c) => c.name),
        sql,
      ).toEqual(["id", "parent", "notused", "detail"]);
      expect(JSON.stringify(plan.rows), sql).toContain("items_name_idx");
    }
  });

  it("explains an ATTACH without attaching anything", async () => {
    const target = join(dir, "explained.db");
    const program = result(await query(`EXPLAIN ATTACH '${target}' AS other`), "EXPLAIN ATTACH");
    expect(program.rows.map((r) => r[5])).toContain("sqlite_attach(3)");
    expect(existsSync(target)).toBe(false);
  });

  it("passes a string literal that names the attach functions", async () => {
    for (const sql of [
      "select 'see sqlite_attach docs' as note",
      "SELECT 'sqlite_detach(1)' AS note",
      "SELECT name FROM items WHERE name <> 'sqlite_attach(3)' ORDER BY id",
    ]) {
      const outcome = result(await query(sql), sql);
      expect(outcome.rows.length, sql).toBeGreaterThan(0);
    }
    expect(result(await query("select 'see sqlite_attach docs' as note"), "").rows).toEqual([
      ["see sqlite_attach docs"],
    ]);
  });

  it("refuses ATTACH and DETACH in any spelling, and every write hidden behind comments", async () => {
    const hash = fingerprint();
    const attached = join(dir, "attached.db");
    const vacuumed = join(dir, "vacuumed.db");
    for (const sql of [
      `ATTACH '${attached}' AS other`,
      `attach database '${attached}' as other`,
      `/* look */ AtTaCh DATABASE '${attached}' AS other`,
      `-- explain\nATTACH '${attached}' AS other`,
      `/* EXPLAIN */ ATTACH '${attached}' AS other`,
      "DETACH main",
      "-- a comment\n detach database temp",
      "/* x */ DeTaCh other",
      "-- EXPLAIN\nDELETE FROM items",
      "/* explain */ INSERT INTO items VALUES (3, 'fig')",
      "/* c */ PRAGMA user_version = 7",
      `-- copy\nVACUUM INTO '${vacuumed}'`,
      "/* EXPLAIN */ UPDATE items SET name = 'x'",
    ]) {
      const outcome = await query(sql);
      expect(outcome.ok ? "ran" : outcome.error.code, sql).toBe("access_denied");
      if (!outcome.ok) expect(outcome.error.message, sql).toMatch(/read-only/);
    }
    for (const sql of ["EXPLAIN SELECT 1; DELETE FROM items", "/* x */ EXPLAIN SELECT 1; ATTACH 'x' AS y"]) {
      const outcome = await query(sql);
      expect(outcome.ok ? "ran" : outcome.error.code, sql).toBe("validation_failed");
    }
    expect(existsSync(attached)).toBe(false);
    expect(existsSync(vacuumed)).toBe(false);
    expect(fingerprint()).toBe(hash);
    expect(result(await query("SELECT count(*) FROM items"), "count").rows).toEqual([[2]]);
  });
});
