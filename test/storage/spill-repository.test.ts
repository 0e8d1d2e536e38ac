/**
 * Spills in the database, on PostgreSQL with two connection pools standing in for two instances (and on SQLite):
 * one user's concurrent additions through both stay within the quota together, the oldest removed first; a read
 * answers only the owning user and chat; the expiry cleanup runs on one instance at a time (another one holding its
 * lock makes a cleanup return 0 at once, without removing anything).
 */
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SpillArea, type SpillRecord } from "../../src/core/output-spill.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { SqlSpillStore } from "../../src/storage/spill-repository.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { tempDir } from "../helpers/temp.js";

const record = (userId: string, size: number, chatId: string | null = "c"): SpillRecord => ({
  id: randomBytes(12).toString("hex"),
  userId,
  chatId,
  tool: "bash",
  field: "stdout",
  bytes: randomBytes(size),
  complete: true,
});

const DAY = 24 * 60 * 60 * 1000;

async function total(db: ToolhostDatabase, userId: string): Promise<number> {
  const rows = await db.db.selectFrom("spills").select("size").where("user_id", "=", userId).execute();
  return rows.reduce((sum, r) => sum + Number(r.size), 0);
}

describe.skipIf(!findPgBin())("spills on PostgreSQL, two instances", () => {
  let one: ToolhostDatabase;
  let two: ToolhostDatabase;
  let url: string;
  beforeAll(async () => {
    url = await freshPostgresDatabase();
    one = await openDatabase({ url });
    two = await openDatabase({ url });
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
  });

  it("keeps one user's quota across instances adding at the same moment, oldest removed first", async () => {
    const stores = [new SqlSpillStore(one.db), new SqlSpillStore(two.db)];
    const limits = { quotaBytes: 10_000, ttlMs: DAY };
    const first = record("quota-user", 1000);
    await stores[0]!.put(first, limits);
    // 40 additions of 1000 bytes, alternating instances, all at once.
    await Promise.all(Array.from({ length: 40 }, (_, i) => stores[i % 2]!.put(record("quota-user", 1000), limits)));
    expect(await total(one, "quota-user")).toBe(10_000);
    expect(await stores[1]!.has("quota-user", "c", first.id)).toBe(false);
    // Another user's spills are untouched by this user's quota.
    const other = record("other-user", 9000);
    await stores[1]!.put(other, limits);
    expect(await total(two, "other-user")).toBe(9000);
  });

  it("reads a spill for its user and chat only, from either instance", async () => {
    const mine = record("reader", 64, "chat-a");
    const outside = record("reader", 64, null);
    await new SqlSpillStore(one.db).put(mine, { quotaBytes: 1e6, ttlMs: DAY });
    await new SqlSpillStore(one.db).put(outside, { quotaBytes: 1e6, ttlMs: DAY });
    const store = new SqlSpillStore(two.db);
    expect((await store.get("reader", "chat-a", mine.id))?.equals(mine.bytes)).toBe(true);
    expect((await store.get("reader", null, outside.id))?.equals(outside.bytes)).toBe(true);
    for (const [user, chat, id] of [
      ["someone-else", "chat-a", mine.id],
      ["reader", "chat-b", mine.id],
      ["reader", null, mine.id],
      ["reader", "chat-a", outside.id],
    ] as const) {
      expect(await store.get(user, chat, id)).toBeUndefined();
      expect(await store.has(user, chat, id)).toBe(false);
    }
  });

  it("cleans expired spills on one instance at a time", async () => {
    const old = record("expiring", 10);
    await new SqlSpillStore(one.db).put(old, { quotaBytes: 1e6, ttlMs: DAY });
    const later = Date.now() + 2 * DAY;
    // Instance 1 is cleaning (it holds the cleanup's lock): instance 2's cleanup skips its round.
    const pg = await import("pg");
    const holder = new pg.default.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT pg_advisory_xact_lock(${0x7370696c})`);
      expect(await new SqlSpillStore(two.db).cleanup(later, DAY)).toBe(0);
      expect(await new SqlSpillStore(two.db).has("expiring", "c", old.id)).toBe(true);
      await holder.query("COMMIT");
    } finally {
      await holder.end();
    }
    expect(await new SqlSpillStore(two.db).cleanup(later, DAY)).toBeGreaterThanOrEqual(1);
    expect(await new SqlSpillStore(one.db).has("expiring", "c", old.id)).toBe(false);
    // The lock is transaction-scoped: nothing stays held after a cleanup.
    const held = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks
      WHERE locktype = 'advisory' AND objid = ${0x7370696c}
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`.execute(one.db);
    expect(held.rows[0]?.n).toBe(0);
  });
});

describe("spills on SQLite", () => {
  it("keeps the quota and answers only the owner", async () => {
    const dir = tempDir("toolhost-spills-");
    const database = await openDatabase({ url: join(dir, "t.db") });
    try {
      const store = new SqlSpillStore(database.db);
      const limits = { quotaBytes: 3000, ttlMs: DAY };
      const first = record("u", 1000);
      await store.put(first, limits);
      for (let i = 0; i < 5; i++) await store.put(record("u", 1000), limits);
      expect(await total(database, "u")).toBe(3000);
      expect(await store.has("u", "c", first.id)).toBe(false);
      const last = record("u", 10);
      await store.put(last, limits);
      expect((await store.get("u", "c", last.id))?.equals(last.bytes)).toBe(true);
      expect(await store.get("v", "c", last.id)).toBeUndefined();
      expect(await store.cleanup(Date.now() + 2 * DAY, DAY)).toBe(3);
      expect(await total(database, "u")).toBe(0);
    } finally {
      await database.close();
    }
  });

  it("a SpillArea over the store: streamed and written spills go to the database; reads are cached and rechecked", async () => {
    const dir = tempDir("toolhost-spill-area-");
    const database = await openDatabase({ url: join(dir, "t.db") });
    try {
      const area = new SpillArea(join(dir, "data"), { store: new SqlSpillStore(database.db) });
      const stream = area.openStream("u", "c", "bash", "stdout", 100);
      for (let i = 0; i < 50; i++) stream.write(Buffer.from(`line ${i}\n`));
      const streamed = await stream.persist();
      expect(streamed).toMatchObject({ path: expect.stringMatching(/^spill:[0-9a-f]{24}$/), complete: true });
      const written = await area.writeFile("u", "c", "t", "f", "whole text");
      // Nothing but the database holds them: the stream's local buffer is gone.
      const chatDir = area.directoryFor("u", "c");
      expect(existsSync(chatDir) ? readdirSync(chatDir) : []).toEqual([]);
      expect(await total(database, "u")).toBe(stream.totalBytes + "whole text".length);

      const file = (await area.open("u", "c", written.path)) as string;
      expect(readFileSync(file, "utf8")).toBe("whole text");
      expect(readFileSync((await area.open("u", "c", streamed.path)) as string, "utf8")).toContain("line 49\n");
      for (const [user, chat, name] of [
        ["v", "c", written.path],
        ["u", "d", written.path],
        ["u", null, written.path],
        ["u", "c", "spill:nothex"],
        ["u", "c", "spill:000000000000000000000000"],
      ] as const) {
        expect(await area.open(user, chat, name)).toBeUndefined();
      }
      // Removed from the database (quota, expiry, another instance): the cached copy is not served any more.
      await database.db.deleteFrom("spills").execute();
      expect(await area.open("u", "c", written.path)).toBeUndefined();
    } finally {
      await database.close();
    }
  });
});
