/**
 * The migration runner: brings a database's schema up to date, safely when several processes start at once and
 * after a crash of an older version that left the schema half-applied.
 *
 * - Each migration runs in its own transaction together with its bookkeeping row (SQLite and PostgreSQL both have
 *   transactional DDL), so a crash leaves it either applied and recorded, or not applied at all.
 * - Processes are serialized: on SQLite by the `BEGIN IMMEDIATE` of {@link inTransaction} (one writer per file), on
 *   PostgreSQL by a transaction-scoped advisory lock ({@link MIGRATION_LOCK_KEY}) taken before anything is read.
 *   The second process waits, then finds the migration recorded and skips it: concurrent first starts all succeed.
 * - Migrations run idempotently: `CREATE TABLE` and `CREATE INDEX` become `… IF NOT EXISTS`, and `ADD COLUMN` of a
 *   column that exists is skipped. A database an older version left half-migrated (tables created but not
 *   recorded, bookkeeping rows deleted, a table dropped) is completed by running the unrecorded migrations again.
 * - Bookkeeping stays in Kysely's `kysely_migration` table (name, timestamp), so databases created by earlier
 *   versions keep their history. Migrations run in name order; one that landed out of order still runs.
 */
import {
  type AlterTableNode,
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  type KyselyPlugin,
  type Migration,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
  type RootOperationNode,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
  type UnknownRow,
} from "kysely";
import { type Dialect, inTransaction } from "./transaction.js";

/** The PostgreSQL advisory lock key migrations hold (a 64-bit constant: "toolhost" in ASCII, as decimal text). */
export const MIGRATION_LOCK_KEY = BigInt("0x746f6f6c686f7374").toString();

/** The bookkeeping table (shared with earlier versions, which used Kysely's Migrator). */
export const MIGRATION_TABLE = "kysely_migration";

/** A migration failed; the message names it, says that it was rolled back and what to do. */
export class MigrationError extends Error {
  constructor(
    readonly migration: string,
    location: string,
    cause: unknown,
  ) {
    const why = (cause as Error)?.message ?? String(cause);
    super(
      `Database migration "${migration}" failed on ${location}: ${why}. It was rolled back, so the database is as it was before it; earlier migrations stay applied. Fix the cause and start again. If the schema was changed by hand and cannot be repaired, back the database up and move it aside: the next start creates an empty one.`,
      { cause },
    );
    this.name = "MigrationError";
  }
}

/**
 * Makes schema changes idempotent: IF NOT EXISTS on CREATE TABLE / CREATE INDEX, and on PostgreSQL on ADD COLUMN.
 * (SQLite has no ADD COLUMN IF NOT EXISTS: {@link runIdempotently} skips those statements instead.)
 */
class IdempotentDdlPlugin implements KyselyPlugin {
  constructor(private readonly dialect: Dialect) {}

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (node.kind === "CreateTableNode" || node.kind === "CreateIndexNode") return { ...node, ifNotExists: true };
    if (node.kind === "AlterTableNode" && this.dialect === "postgres" && node.columnAlterations) {
      return {
        ...node,
        columnAlterations: node.columnAlterations.map((a) =>
          a.kind === "AddColumnNode" ? { ...a, column: { ...a.column, ifNotExists: true } } : a,
        ),
      };
    }
    return node;
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result;
  }
}

/** The columns an ALTER TABLE adds, or undefined when it does anything else too. */
function addedColumns(node: RootOperationNode): { table: string; columns: string[] } | undefined {
  if (node.kind !== "AlterTableNode") return undefined;
  const alterations = (node as AlterTableNode).columnAlterations;
  if (!alterations?.length || !alterations.every((a) => a.kind === "AddColumnNode")) return undefined;
  return {
    table: (node as AlterTableNode).table.table.identifier.name,
    columns: alterations.map((a) => (a.kind === "AddColumnNode" ? a.column.column.column.name : "")),
  };
}

/**
 * Runs one migration's `up` on the transaction's connection, idempotently: through {@link IdempotentDdlPlugin},
 * and on SQLite skipping an `ALTER TABLE … ADD COLUMN` whose columns the table already has.
 */
async function runIdempotently(trx: Kysely<any>, dialect: Dialect, migration: Migration): Promise<void> {
  await trx.getExecutor().provideConnection(async (raw) => {
    const connection: DatabaseConnection = {
      async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        const added = dialect === "sqlite" ? addedColumns(query.query) : undefined;
        if (added) {
          const existing = await raw.executeQuery<{ name: string }>(
            CompiledQuery.raw("SELECT name FROM pragma_table_info(?)", [added.table]),
          );
          const have = new Set(existing.rows.map((r) => r.name));
          if (added.columns.every((c) => have.has(c))) return { rows: [] };
        }
        return raw.executeQuery<R>(query);
      },
      streamQuery: (query, chunkSize) => raw.streamQuery(query, chunkSize),
    };
    const driver: Driver = {
      async init() {},
      async acquireConnection() {
        return connection;
      },
      // Already inside the migration's transaction: a nested one is part of it.
      async beginTransaction() {},
      async commitTransaction() {},
      async rollbackTransaction() {},
      async releaseConnection() {},
      async destroy() {},
    };
    const db = new Kysely<any>({
      dialect: {
        createAdapter: () => (dialect === "sqlite" ? new SqliteAdapter() : new PostgresAdapter()),
        createDriver: () => driver,
        createIntrospector: (k) => (dialect === "sqlite" ? new SqliteIntrospector(k) : new PostgresIntrospector(k)),
        createQueryCompiler: () => (dialect === "sqlite" ? new SqliteQueryCompiler() : new PostgresQueryCompiler()),
      },
      plugins: [new IdempotentDdlPlugin(dialect)],
    });
    await migration.up(db);
  });
}

/** Options of {@link migrateToLatest}. */
export interface MigrateOptions {
  /** Where the database lives, for error messages. */
  location: string;
}

/**
 * Applies every migration not recorded yet, in name order, each in its own transaction with its bookkeeping row,
 * serialized across processes. Resolves with the names applied by this call (empty when up to date). Throws
 * {@link MigrationError} naming the migration that failed (rolled back).
 */
export async function migrateToLatest(
  db: Kysely<any>,
  migrations: Record<string, Migration>,
  options: MigrateOptions,
): Promise<string[]> {
  const names = Object.keys(migrations).sort();
  const applied: string[] = [];
  for (;;) {
    let current: string | undefined;
    try {
      const ran = await inTransaction(
        db,
        async (trx, tx) => {
          if (tx.dialect === "postgres")
            await sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY}::bigint)`.execute(trx);
          await trx.schema
            .createTable(MIGRATION_TABLE)
            .ifNotExists()
            .addColumn("name", "varchar(255)", (c) => c.notNull().primaryKey())
            .addColumn("timestamp", "varchar(255)", (c) => c.notNull())
            .execute();
          const done = new Set(
            (await trx.selectFrom(MIGRATION_TABLE).select("name").execute()).map((r) => r.name as string),
          );
          current = names.find((name) => !done.has(name));
          if (!current) return undefined;
          await runIdempotently(trx, tx.dialect, migrations[current]!);
          await trx
            .insertInto(MIGRATION_TABLE)
            .values({ name: current, timestamp: new Date().toISOString() })
            .execute();
          return current;
        },
        // A first start of several processes may wait for each other's migrations: be patient.
        { busyTimeoutMs: 60_000 },
      );
      if (ran === undefined) return applied;
      applied.push(ran);
    } catch (error) {
      if (current) throw new MigrationError(current, options.location, error);
      throw error;
    }
  }
}
