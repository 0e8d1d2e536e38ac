/**
 * The caches on hot read paths must never serve stale state: the serialized settings list (per user, keyed by the
 * registry generation and the saved rows' versions), the token check (cleared by revoke/rotate in this process,
 * bounded by TOKEN_CACHE_MS elsewhere), the settings row a tool call reads (cleared by a write through the store
 * and by a change signal, bounded by SETTINGS_CACHE_MS elsewhere) and the prepared-statement cache of SQLite
 * connections.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ToolSettingsService } from "../../src/app/tool-settings-service.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { createLogger } from "../../src/core/stores.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { SETTINGS_CACHE_MS, SqlToolSettingsStore, TokenRepository } from "../../src/storage/repositories.js";
import { TOKEN_CACHE_MS } from "../../src/storage/token-repository.js";
import { tempDir } from "../helpers/temp.js";

const logger = createLogger("silent");

function registryWithTool(name: string): ToolRegistryStore {
  const registry = new ToolRegistryStore();
  registry.register({
    definition: { name, description: "Test tool.", parameters: { type: "object", properties: {} } },
    settings: {
      parameterDescriptors: [{ name: "limit", type: "integer", description: "A limit.", min: 1, max: 10, default: 3 }],
    },
    execute: async () => ({}),
  });
  return registry;
}

describe("hot-path caches", () => {
  let database: ToolhostDatabase;
  beforeAll(async () => {
    database = await openDatabase({ dataDir: tempDir() });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("the serialized settings list follows writes made through another service on the same database", async () => {
    const registry = registryWithTool("cached_tool");
    const a = new ToolSettingsService(registry, new SqlToolSettingsStore(database.db), logger);
    const b = new ToolSettingsService(registry, new SqlToolSettingsStore(database.db), logger);
    const limitIn = (json: string) => JSON.parse(json).tools[0].parameters.limit;
    expect(limitIn(await a.listJson("u"))).toBe(3);
    expect(await a.listJson("u")).toBe(await a.listJson("u"));
    await b.update("u", "cached_tool", { parameters: { limit: 7 } }, { admin: false });
    expect(limitIn(await a.listJson("u"))).toBe(7);
    expect(limitIn(await a.listJson("other"))).toBe(3);
    expect(JSON.parse(await a.listJson("u"))).toEqual({ tools: await a.list("u") });
  });

  it("the serialized settings list follows the registry", async () => {
    const registry = registryWithTool("first_tool");
    const service = new ToolSettingsService(registry, new SqlToolSettingsStore(database.db), logger);
    expect(JSON.parse(await service.listJson("u")).tools).toHaveLength(1);
    registry.register({
      definition: { name: "second_tool", description: "Another.", parameters: { type: "object", properties: {} } },
      execute: async () => ({}),
    });
    expect(JSON.parse(await service.listJson("u")).tools.map((t: { name: string }) => t.name)).toEqual([
      "first_tool",
      "second_tool",
    ]);
    registry.unregister("first_tool");
    expect(JSON.parse(await service.listJson("u")).tools).toHaveLength(1);
  });

  it("descriptors share frozen registration data that callers cannot corrupt", async () => {
    const registry = registryWithTool("frozen_tool");
    const service = new ToolSettingsService(registry, new SqlToolSettingsStore(database.db), logger);
    const [descriptor] = await service.list("u");
    expect(() => {
      (descriptor!.defaultParameters as Record<string, unknown>).limit = 9;
    }).toThrow(TypeError);
    expect((await service.list("u"))[0]!.defaultParameters.limit).toBe(3);
  });

  it("a revoked or rotated token stops working at once in the process that revoked it", async () => {
    const tokens = new TokenRepository(database.db);
    const first = await tokens.create("alice", "one");
    expect(await tokens.authenticate(first.token)).toBe("alice");
    expect(await tokens.authenticate(first.token)).toBe("alice");
    await tokens.revoke(first.id);
    expect(await tokens.authenticate(first.token)).toBeUndefined();
    const second = await tokens.create("alice", "two");
    expect(await tokens.authenticate(second.token)).toBe("alice");
    const rotated = await tokens.rotate(second.id);
    expect(await tokens.authenticate(second.token)).toBeUndefined();
    expect(await tokens.authenticate(rotated.token)).toBe("alice");
  });

  it("a token revoked by another process stops working within TOKEN_CACHE_MS", async () => {
    const server = new TokenRepository(database.db);
    const cli = new TokenRepository(database.db);
    const issued = await server.create("bob", null);
    expect(await server.authenticate(issued.token)).toBe("bob");
    await cli.revoke(issued.id);
    // Still cached just before the bound (the other repository's revoke is not seen here)…
    expect(await server.authenticate(issued.token)).toBe("bob");
    // …and checked again once TOKEN_CACHE_MS have passed: the clock is moved, not waited for.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + TOKEN_CACHE_MS + 1 });
    try {
      expect(await server.authenticate(issued.token)).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it("a tool call sees this process's settings write at once, another process's within SETTINGS_CACHE_MS, a signal at once", async () => {
    const registry = registryWithTool("gated_tool");
    const store = new SqlToolSettingsStore(database.db);
    const otherProcess = new SqlToolSettingsStore(database.db);
    const runtime = new ToolRuntime({ registry, store, logger, spill: false, dataDir: tempDir() });
    const ran = async () => (await runtime.executeTool("gated_tool", {}, { userId: "cache-user" })).ok;
    expect(await ran()).toBe(true);
    await store.save("cache-user", "gated_tool", { enabled: false, parameters: {} });
    expect(await ran()).toBe(false);
    await otherProcess.save("cache-user", "gated_tool", { enabled: true, parameters: {} });
    expect(await ran()).toBe(false);
    // A change signal (e.g. relayed from another instance) drops the cached row at once.
    store.invalidate("cache-user");
    expect(await ran()).toBe(true);
    await otherProcess.save("cache-user", "gated_tool", { enabled: false, parameters: {} });
    expect(await ran()).toBe(true);
    // …and without a signal the row is read again once SETTINGS_CACHE_MS have passed: the clock is moved.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + SETTINGS_CACHE_MS + 1 });
    try {
      expect(await ran()).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a read that races a write of this process never caches the old row", async () => {
    const registry = registryWithTool("raced_tool");
    const store = new SqlToolSettingsStore(database.db);
    const runtime = new ToolRuntime({ registry, store, logger, spill: false, dataDir: tempDir() });
    const [, outcome] = await Promise.all([
      store.save("race-user", "raced_tool", { enabled: false, parameters: {} }),
      runtime.executeTool("raced_tool", {}, { userId: "race-user" }),
    ]);
    expect(typeof outcome.ok).toBe("boolean");
    expect((await runtime.executeTool("raced_tool", {}, { userId: "race-user" })).ok).toBe(false);
  });

  it("reused prepared statements see schema changes and concurrent iteration", async () => {
    const { sql } = await import("kysely");
    await sql`create table cache_probe (a integer)`.execute(database.db);
    await sql`insert into cache_probe (a) values (1)`.execute(database.db);
    const read = () => sql<{ a: number }>`select * from cache_probe`.execute(database.db);
    expect((await read()).rows).toEqual([{ a: 1 }]);
    await sql`alter table cache_probe add column b text`.execute(database.db);
    expect((await read()).rows).toEqual([{ a: 1, b: null }]);
    const many = await Promise.all(Array.from({ length: 20 }, read));
    expect(many.every((r) => r.rows.length === 1)).toBe(true);
  });
});
