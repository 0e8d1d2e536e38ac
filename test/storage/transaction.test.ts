/** inTransaction on SQLite and PostgreSQL: atomicity, joining, rollback, contention between connections. */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { SqlToolSettingsStore } from "../../src/storage/repositories.js";
import { dialectOf, inTransaction, TransactionContentionError } from "../../src/storage/transaction.js";
import { freshStore, HAVE_POSTGRES, type TestStore } from "../helpers/stores.js";

const open = (store: TestStore) =>
  openDatabase(store.databaseUrl ? { url: store.databaseUrl } : { dataDir: store.dataDir });

async function counter(database: ToolhostDatabase, user: string): Promise<number> {
  const row = await new SqlToolSettingsStore(database.db).get(user, "counter");
  return Number(row?.parameters?.n ?? 0);
}

for (const dialect of ["sqlite", "postgres"] as const) {
  describe.skipIf(dialect === "postgres" && !HAVE_POSTGRES)(`inTransaction on ${dialect}`, () => {
    it("commits the work's writes together, or none of them when the work throws", async () => {
      const store = await freshStore(dialect);
      const database = await open(store);
      try {
        expect(dialectOf(database.db)).toBe(dialect);
        const insert = (trx: typeof database.db, id: string) =>
          trx
            .insertInto("chats")
            .values({
              id,
              user_id: "u",
              title: null,
              working_directory: null,
              provider: null,
              model: null,
              created_at: "t",
              updated_at: "t",
            })
            .execute();
        await expect(
          inTransaction(database.db, async (trx) => {
            await insert(trx, "a");
            // Joining the running transaction: no nested BEGIN, and its write is undone with the outer one.
            await inTransaction(trx, async (inner, tx) => {
              expect(tx.attempt).toBe(1);
              await insert(inner, "b");
            });
            throw new Error("changed my mind");
          }),
        ).rejects.toThrow("changed my mind");
        expect(await database.db.selectFrom("chats").select("id").execute()).toEqual([]);
        const result = await inTransaction(database.db, async (trx) => {
          await insert(trx, "a");
          await insert(trx, "b");
          return "done";
        });
        expect(result).toBe("done");
        expect((await database.db.selectFrom("chats").select("id").orderBy("id").execute()).map((r) => r.id)).toEqual([
          "a",
          "b",
        ]);
      } finally {
        await database.close();
      }
    });

    it("serializes read-modify-writes from two connections (two processes' worth): no increment lost", async () => {
      const store = await freshStore(dialect);
      const a = await open(store);
      const b = await open(store);
      try {
        const increment = (database: ToolhostDatabase) =>
          new SqlToolSettingsStore(database.db).modify("u", "counter", (current) => ({
            enabled: null,
            parameters: { n: Number(current?.parameters?.n ?? 0) + 1 },
          }));
        await Promise.all(Array.from({ length: 60 }, (_, i) => increment(i % 2 ? a : b)));
        expect(await counter(a, "u")).toBe(60);
        expect((await new SqlToolSettingsStore(a.db).get("u", "counter"))?.version).toBe(60);
      } finally {
        await a.close();
        await b.close();
      }
    });
  });
}

describe("inTransaction on SQLite under a held write lock", () => {
  it("waits for another connection's transaction, and gives up with TransactionContentionError after busyTimeoutMs", async () => {
    const store = await freshStore("sqlite");
    const a = await open(store);
    const b = await open(store);
    try {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      const holder = inTransaction(a.db, async () => {
        entered();
        await held;
      });
      await inside;
      await expect(inTransaction(b.db, async () => "never", { busyTimeoutMs: 50 })).rejects.toBeInstanceOf(
        TransactionContentionError,
      );
      const waiter = inTransaction(
        b.db,
        async (trx) => (await sql<{ one: number }>`select 1 as one`.execute(trx)).rows[0]?.one,
      );
      setTimeout(release, 30);
      await holder;
      expect(await waiter).toBe(1);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
