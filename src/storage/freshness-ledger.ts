/**
 * The freshness ledger in the database (`file_reads`): which content hash each chat last saw of each file, stored in
 * batches (see SqlFreshnessLedger).
 */
import type { Kysely } from "kysely";
import type { FreshnessLedger } from "../core/types.js";
import type { DatabaseSchema } from "./database.js";
import { WriteBehind } from "./write-behind.js";

const now = () => new Date().toISOString();

/** How long (ms) the first read recorded waits for others to share its upsert. */
const LEDGER_BATCH_MS = 20;
/** How long (ms) reads wait after a failed upsert before the next try. */
const LEDGER_RETRY_MS = 1_000;
/** Most reads one upsert of the freshness ledger writes. */
const LEDGER_BATCH_ROWS = 200;

/** One read waiting to be stored. */
interface PendingRead {
  chat_id: string;
  path: string;
  sha256: string;
  read_at: string;
}

/**
 * The freshness ledger in `file_reads`, per chat; survives restarts.
 *
 * Reads are stored in batches: {@link recordRead} keeps the read in this process at once (so {@link getRead} here
 * sees it) and stores it within {@link LEDGER_BATCH_MS}, one multi-row upsert for the reads of that window (the
 * newest read of a chat and path wins). {@link flush} stores them at once; the app context flushes before it closes
 * the database. A read not yet stored when the process dies is lost, which is safe: a later write to that file is
 * refused as "not read" and the model reads it again. A failed upsert keeps its reads for the next batch.
 */
export class SqlFreshnessLedger implements FreshnessLedger {
  /** Reads not yet stored, by chat and path. */
  #pending = new Map<string, PendingRead>();
  readonly #writer = new WriteBehind(() => this.#upsert(), LEDGER_BATCH_MS, { unref: true });

  /** `onError` hears a failed upsert (its reads stay queued for the next batch). */
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  async recordRead(chatId: string, absolutePath: string, sha256: string): Promise<void> {
    const key = `${chatId}\0${absolutePath}`;
    // Re-inserted, so the batch's order is the order of the newest reads.
    this.#pending.delete(key);
    this.#pending.set(key, { chat_id: chatId, path: absolutePath, sha256, read_at: now() });
    if (this.#pending.size >= LEDGER_BATCH_ROWS) void this.#writer.now().catch(() => {});
    else this.#writer.soon();
  }

  async getRead(chatId: string, absolutePath: string): Promise<string | undefined> {
    const pending = this.#pending.get(`${chatId}\0${absolutePath}`);
    if (pending) return pending.sha256;
    const row = await this.db
      .selectFrom("file_reads")
      .select("sha256")
      .where("chat_id", "=", chatId)
      .where("path", "=", absolutePath)
      .executeTakeFirst();
    // A read recorded while the query ran is newer than the stored one.
    return this.#pending.get(`${chatId}\0${absolutePath}`)?.sha256 ?? row?.sha256;
  }

  /** Stores every read recorded so far; rejects when the database refuses them (they stay queued). */
  async flush(): Promise<void> {
    while (this.#pending.size > 0 || this.#writer.busy) await this.#writer.now();
  }

  async #upsert(): Promise<void> {
    const batch = [...this.#pending.values()].slice(0, LEDGER_BATCH_ROWS);
    if (batch.length === 0) return;
    for (const row of batch) this.#pending.delete(`${row.chat_id}\0${row.path}`);
    try {
      await this.db
        .insertInto("file_reads")
        .values(batch)
        .onConflict((oc) =>
          oc.columns(["chat_id", "path"]).doUpdateSet((eb) => ({
            sha256: eb.ref("excluded.sha256"),
            read_at: eb.ref("excluded.read_at"),
          })),
        )
        .execute();
    } catch (error) {
      // Put back what no newer read replaced, for the next batch.
      for (const row of batch) {
        const key = `${row.chat_id}\0${row.path}`;
        if (!this.#pending.has(key)) this.#pending.set(key, row);
      }
      this.onError(error);
      // The database may be restarting: try again in a second, not at once.
      this.#writer.soon(LEDGER_RETRY_MS);
      throw error;
    }
    if (this.#pending.size > 0) this.#writer.soon();
  }
}
