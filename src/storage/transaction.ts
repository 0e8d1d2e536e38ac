/**
 * The one transaction helper every read-modify-write of stored state goes through (settings, agent quotas,
 * approvals, tokens, message queues). It gives the same guarantee on both dialects: the work runs on one
 * connection, inside one transaction, and either everything it wrote is committed or nothing is.
 *
 * - **SQLite** (better-sqlite3 through Kysely): `BEGIN IMMEDIATE`, which takes the database's write lock at the
 *   start, so two processes on one file (two servers, or the CLI while the server serves) serialize their
 *   read-modify-writes instead of failing on the upgrade from a read to a write lock. better-sqlite3 is
 *   synchronous, so SQLite's own busy handler would block the event loop while another process holds the lock:
 *   the helper lowers the busy timeout to {@link SQLITE_BEGIN_WAIT_MS} for the `BEGIN IMMEDIATE` and retries a
 *   `SQLITE_BUSY` asynchronously (short randomized sleeps) for up to {@link TransactionOptions.busyTimeoutMs}
 *   (default 10 s) before giving up with {@link TransactionContentionError}; the connection's usual busy timeout
 *   ({@link SQLITE_BUSY_TIMEOUT_MS}) applies to the statements inside. Within one process Kysely's single SQLite
 *   connection is held for the whole transaction, so other queries of the process wait (asynchronously) until it
 *   ends.
 * - **PostgreSQL**: `BEGIN` … `COMMIT` at READ COMMITTED on a connection taken from the pool. Callers lock what
 *   they read with `SELECT … FOR UPDATE` (use {@link TransactionContext.forUpdate}, which is a no-op on SQLite
 *   where the whole database is already locked) or write with an atomic upsert (`INSERT … ON CONFLICT DO UPDATE`
 *   with an expression over the stored value). A row that may not exist yet is created first with
 *   `INSERT … ON CONFLICT DO NOTHING` and then locked, so two first writers cannot both "insert". Deadlocks
 *   (`40P01`) and serialization failures (`40001`) are retried.
 *
 * Rules for `work`:
 * - Use only the `trx` it receives (not the outer Kysely instance: on SQLite that would wait for the connection
 *   this transaction holds, forever). Calling {@link inTransaction} again with `trx` joins the running transaction.
 * - It may run more than once (after a retry), so keep side effects other than database writes out of it, or make
 *   them idempotent. Throwing from it rolls the transaction back and rethrows the same error.
 * - Keep it short: no network calls, no tool execution, no waiting on the user while holding the transaction.
 *
 * @example
 * ```ts
 * const remaining = await inTransaction(db, async (trx, tx) => {
 *   await trx.insertInto("quotas").values({ id, used: 0 }).onConflict((oc) => oc.column("id").doNothing()).execute();
 *   const row = await tx.forUpdate(trx.selectFrom("quotas").select("used").where("id", "=", id)).executeTakeFirstOrThrow();
 *   if (row.used + cost > limit) throw new QuotaError(…);
 *   await trx.updateTable("quotas").set({ used: row.used + cost }).where("id", "=", id).execute();
 *   return limit - row.used - cost;
 * });
 * ```
 */
import { type Kysely, PostgresAdapter, SqliteAdapter, sql } from "kysely";
import { BrandedError, errorBrand } from "../core/errors.js";

/** The database dialects Toolhost runs on. */
export type Dialect = "sqlite" | "postgres";

/** What {@link inTransaction} hands to the work besides the transaction's Kysely instance. */
export interface TransactionContext {
  /** The dialect of the database. */
  readonly dialect: Dialect;
  /** 1 for the first run of the work, 2 after the first retry, … */
  readonly attempt: number;
  /**
   * Adds `FOR UPDATE` to a select on PostgreSQL (locks the selected rows until commit); returns the query unchanged
   * on SQLite, where `BEGIN IMMEDIATE` already holds the database's write lock.
   */
  forUpdate<Q extends { forUpdate(): Q }>(query: Q): Q;
}

/** Options of {@link inTransaction}. */
export interface TransactionOptions {
  /** SQLite: how long to keep retrying `BEGIN IMMEDIATE` while another process holds the write lock, in ms. Default 10 000. */
  busyTimeoutMs?: number;
  /**
   * How many times to run the work in total when the database reports contention (SQLite `SQLITE_BUSY`,
   * PostgreSQL deadlock or serialization failure). Default 8.
   */
  maxAttempts?: number;
}

/** Thrown by {@link inTransaction} when every attempt met contention; `cause` is the last database error. */
export class TransactionContentionError extends BrandedError {
  static override readonly brand: symbol = errorBrand("TransactionContentionError");
  constructor(attempts: number, cause: unknown) {
    super(
      `The database stayed busy through ${attempts} attempts of one transaction (another process holds its write lock). Retry the request; if it persists, look for a process that keeps a long transaction open on the same database.`,
      { cause },
    );
  }
}

/** The busy timeout openDatabase gives every SQLite connection (`PRAGMA busy_timeout`), in ms. */
export const SQLITE_BUSY_TIMEOUT_MS = 5000;
/** The synchronous busy wait of one `BEGIN IMMEDIATE` attempt, in ms (the rest of the wait is asynchronous). */
export const SQLITE_BEGIN_WAIT_MS = 5;

const active = new WeakMap<object, TransactionContext>();

/**
 * Direct control of one SQLite connection's transactions, bypassing Kysely's query pipeline: openDatabase registers
 * one for each SQLite Kysely instance it creates ({@link registerSqliteTransactions}). Through Kysely, a transaction's
 * own statements (the busy-timeout switch, `BEGIN IMMEDIATE`, the switch back, `COMMIT`) were four query executions,
 * about a fifth of the CPU of a settings write; these are prepared once and run directly. {@link inTransaction}
 * calls them only while it holds the Kysely instance's single connection, so nothing else runs on it meanwhile.
 */
export interface SqliteTransactions {
  /**
   * `BEGIN IMMEDIATE` with the busy timeout lowered to {@link SQLITE_BEGIN_WAIT_MS} for it (restored to
   * {@link SQLITE_BUSY_TIMEOUT_MS} afterwards, also when it fails). Throws the database's error (`SQLITE_BUSY`
   * while another connection holds the write lock).
   */
  beginImmediate(): void;
  /** `COMMIT`. Throws the database's error (the transaction then may still be open: roll it back). */
  commit(): void;
  /** `ROLLBACK` when a transaction is open (SQLite may have ended it already, e.g. after an error). */
  rollback(): void;
}

const sqliteTransactions = new WeakMap<object, SqliteTransactions>();

/** Registers the direct transaction control of a SQLite Kysely instance (openDatabase does, for each it opens). */
export function registerSqliteTransactions(db: Kysely<any>, control: SqliteTransactions): void {
  sqliteTransactions.set(db, control);
}

/** The dialect of a Kysely instance (from its adapter). Throws for a dialect Toolhost does not support. */
export function dialectOf(db: Kysely<any>): Dialect {
  const adapter = db.getExecutor().adapter;
  if (adapter instanceof SqliteAdapter) return "sqlite";
  if (adapter instanceof PostgresAdapter) return "postgres";
  throw new Error(`Unsupported database adapter ${adapter.constructor.name}: Toolhost runs on SQLite or PostgreSQL.`);
}

function isContention(error: unknown, dialect: Dialect): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  return dialect === "sqlite"
    ? code.startsWith("SQLITE_BUSY") || code === "SQLITE_LOCKED"
    : code === "40001" || code === "40P01";
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `work` in one transaction on `db` (see the module documentation for the guarantees per dialect) and
 * returns its result after COMMIT. Throws what `work` throws (after ROLLBACK), a
 * {@link TransactionContentionError} when every attempt met contention, or the database's error otherwise.
 * Passing the `trx` of a running transaction joins it (no nested BEGIN, no retry of its own).
 *
 * @param db the Kysely instance of an open Toolhost database (or the `trx` of a running transaction)
 * @param work the read-modify-write; receives the transaction's Kysely instance and a {@link TransactionContext}
 */
export async function inTransaction<DB, T>(
  db: Kysely<DB>,
  work: (trx: Kysely<DB>, tx: TransactionContext) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  const joined = active.get(db);
  if (joined) return work(db, joined);
  const dialect = dialectOf(db);
  const native = dialect === "sqlite" ? sqliteTransactions.get(db) : undefined;
  const maxAttempts = Math.max(1, options.maxAttempts ?? 8);
  const deadline = Date.now() + (options.busyTimeoutMs ?? 10_000);
  let lastError: unknown;
  let attempt = 0;
  while (attempt < maxAttempts) {
    attempt++;
    const tx: TransactionContext = {
      dialect,
      attempt,
      forUpdate: (query) => (dialect === "postgres" ? query.forUpdate() : query),
    };
    let began = false;
    try {
      return await db.connection().execute(async (conn) => {
        if (native) {
          native.beginImmediate();
        } else if (dialect === "sqlite") {
          await sql.raw(`PRAGMA busy_timeout = ${SQLITE_BEGIN_WAIT_MS}`).execute(conn);
          try {
            await sql.raw("BEGIN IMMEDIATE").execute(conn);
          } finally {
            await sql.raw(`PRAGMA busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`).execute(conn);
          }
        } else {
          await sql.raw("BEGIN").execute(conn);
        }
        began = true;
        active.set(conn, tx);
        try {
          const result = await work(conn, tx);
          if (native) native.commit();
          else await sql.raw("COMMIT").execute(conn);
          return result;
        } catch (error) {
          try {
            if (native) native.rollback();
            else await sql.raw("ROLLBACK").execute(conn);
          } catch {
            // SQLite may have rolled back already (e.g. after SQLITE_BUSY on COMMIT); nothing left to undo.
          }
          throw error;
        } finally {
          active.delete(conn);
        }
      });
    } catch (error) {
      if (!isContention(error, dialect)) throw error;
      lastError = error;
      if (!began && dialect === "sqlite") {
        // Waiting for another process's write lock: retry until the deadline without counting attempts.
        if (Date.now() >= deadline) break;
        attempt--;
        await sleep(1 + Math.random() * 4);
        continue;
      }
      if (attempt < maxAttempts) await sleep(Math.min(200, 2 ** attempt) * (0.5 + Math.random()));
    }
  }
  throw new TransactionContentionError(attempt, lastError);
}
