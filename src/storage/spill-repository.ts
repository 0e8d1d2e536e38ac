/**
 * Spills in the database (the `spills` table): the full outputs behind cut tool results, stored where every
 * instance on the database reads them (core/output-spill.ts names them `spill:<id>` and caches what it reads).
 *
 * - Ownership is the pair (user, chat): every read filters on both, so another user's (or chat's) spill is found
 *   exactly as often as a missing one: never.
 * - The per-user quota is kept in the transaction that adds a spill: on PostgreSQL a transaction-scoped advisory lock
 *   per user serializes the user's additions across instances (SQLite's `BEGIN IMMEDIATE` already serializes every
 *   write), so two instances adding at once cannot both stay under the quota by counting before the other's insert.
 * - Expired spills are removed by one instance at a time: the cleanup takes a transaction-scoped advisory lock with
 *   `pg_try_advisory_xact_lock` and returns at once when another instance holds it.
 */
import { type Kysely, sql } from "kysely";
import type { SpillRecord, SpillStore } from "../core/output-spill.js";
import type { DatabaseSchema } from "./database.js";
import { inTransaction } from "./transaction.js";

/** The advisory lock key of the expiry cleanup (an arbitrary constant: "spil" in ASCII). */
const CLEANUP_LOCK = 0x7370696c;

/** SpillStore over a Kysely database (SQLite or PostgreSQL). */
export class SqlSpillStore implements SpillStore {
  constructor(readonly db: Kysely<DatabaseSchema>) {}

  /** See SpillStore.put. */
  async put(record: SpillRecord, limits: { quotaBytes: number; ttlMs: number }): Promise<void> {
    const now = Date.now();
    await inTransaction(this.db, async (trx, tx) => {
      if (tx.dialect === "postgres") {
        await sql`SELECT pg_advisory_xact_lock(hashtext(${`toolhost.spills:${record.userId}`}))`.execute(trx);
      }
      await trx
        .insertInto("spills")
        .values({
          id: record.id,
          user_id: record.userId,
          chat_id: record.chatId,
          tool: record.tool.slice(0, 200),
          field: record.field.slice(0, 200),
          size: record.bytes.length,
          complete: record.complete ? 1 : 0,
          data: record.bytes,
          created_at: new Date(now).toISOString(),
        })
        .execute();
      await trx
        .deleteFrom("spills")
        .where("user_id", "=", record.userId)
        .where("created_at", "<", new Date(now - limits.ttlMs).toISOString())
        .execute();
      const older = await trx
        .selectFrom("spills")
        .select(["id", "size"])
        .where("user_id", "=", record.userId)
        .where("id", "!=", record.id)
        .orderBy("created_at", "desc")
        .orderBy("id", "desc")
        .execute();
      let total = record.bytes.length;
      const drop: string[] = [];
      for (const row of older) {
        total += Number(row.size);
        if (total > limits.quotaBytes) drop.push(row.id);
      }
      for (let i = 0; i < drop.length; i += 500) {
        await trx
          .deleteFrom("spills")
          .where("id", "in", drop.slice(i, i + 500))
          .execute();
      }
    });
  }

  /** See SpillStore.get. */
  async get(userId: string, chatId: string | null, id: string): Promise<Buffer | undefined> {
    const row = await this.db
      .selectFrom("spills")
      .select("data")
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .where("chat_id", chatId === null ? "is" : "=", chatId)
      .executeTakeFirst();
    return row ? Buffer.from(row.data) : undefined;
  }

  /** See SpillStore.has. */
  async has(userId: string, chatId: string | null, id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom("spills")
      .select("id")
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .where("chat_id", chatId === null ? "is" : "=", chatId)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** See SpillStore.cleanup. */
  async cleanup(now: number, ttlMs: number): Promise<number> {
    const cutoff = new Date(now - ttlMs).toISOString();
    return inTransaction(this.db, async (trx, tx) => {
      if (tx.dialect === "postgres") {
        const got = await sql<{
          locked: boolean;
        }>`SELECT pg_try_advisory_xact_lock(${sql.lit(CLEANUP_LOCK)}) AS locked`.execute(trx);
        if (!got.rows[0]?.locked) return 0;
      }
      const result = await trx.deleteFrom("spills").where("created_at", "<", cutoff).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }
}
