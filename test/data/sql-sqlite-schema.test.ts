/**
 * sql_schema on a real SQLite file reports a column as nullable only when it can hold NULL: a rowid alias (a lone
 * INTEGER PRIMARY KEY) and the keys of a WITHOUT ROWID table cannot, whatever NOT NULL says; a text primary key of
 * a rowid table can (SQLite's documented quirk).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import { sqlSchemaTool } from "../../src/tools/builtin/sql-schema.js";
import { DataSourceCatalog } from "../../src/tools/data/sources.js";
import { tempDir } from "../shell/helpers.js";

describe("sql_schema on SQLite: nullable", () => {
  let runtime: ToolRuntime;
  let catalog: DataSourceCatalog;
  let cleanup: () => void;

  beforeAll(async () => {
    const temp = tempDir("toolhost-sqlite-schema-");
    cleanup = temp.cleanup;
    const file = join(temp.dir, "s.db");
    const db = new Database(file);
    db.exec(`
      CREATE TABLE alias (id INTEGER PRIMARY KEY, note TEXT);
      CREATE TABLE textkey (code TEXT PRIMARY KEY, label TEXT NOT NULL);
      CREATE TABLE compound (a INTEGER, b INTEGER, PRIMARY KEY (a, b));
      CREATE TABLE nowrid (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
    `);
    db.prepare("INSERT INTO textkey VALUES (NULL, 'x')").run();
    db.close();
    const config = join(temp.dir, "config.json");
    writeFileSync(config, JSON.stringify({ dataSources: { s: { url: `sqlite:${file}` } } }));
    catalog = new DataSourceCatalog({ env: { TOOLHOST_CONFIG: config } });
    const registry = new ToolRegistryStore();
    registry.register(sqlSchemaTool);
    const store = new MemoryToolSettingsStore();
    await store.save("u1", "sql_schema", { enabled: true, parameters: {} });
    runtime = new ToolRuntime({ registry, store, audit: new MemoryAuditSink(), services: { dataSources: catalog } });
  });

  afterAll(async () => {
    await catalog?.close();
    cleanup?.();
  });

  it("says which columns can hold NULL", async () => {
    const outcome = await runtime.executeTool("sql_schema", { source: "s" }, { userId: "u1" });
    if (!outcome.ok) throw new Error(outcome.error.message);
    const tables = (outcome.result as { tables: { name: string; columns: { name: string; nullable: boolean }[] }[] })
      .tables;
    const nullable = Object.fromEntries(
      tables.flatMap((t) => t.columns.map((c) => [`${t.name}.${c.name}`, c.nullable] as const)),
    );
    expect(nullable).toEqual({
      "alias.id": false,
      "alias.note": true,
      // A NULL went into this primary key above: SQLite allows it in a rowid table.
      "textkey.code": true,
      "textkey.label": false,
      "compound.a": true,
      "compound.b": true,
      "nowrid.k": false,
      "nowrid.v": true,
    });
  });
});
