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
 * - A start that finds everything recorded checks that the recorded migrations' tables and columns exist (two small
 *   queries: the expected schema is kept in {@link SCHEMA_MANIFEST_TABLE}, derived from the migrations once); what was dropped by hand while its bookkeeping row stayed is recreated by rerunning the migrations that
 *   create it, with a warning (see {@link checkRecordedSchema}).
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
import { BrandedError, errorBrand } from "../core/errors.js";
import { type Dialect, inTransaction } from "./transaction.js";

/** The PostgreSQL advisory lock key migrations hold (a 64-bit constant: "toolhost" in ASCII, as decimal text). */
export const MIGRATION_LOCK_KEY = BigInt("0x746f6f6c686f7374").toString();

/** The bookkeeping table (shared with earlier versions, which used Kysely's Migrator). */
export const MIGRATION_TABLE = "kysely_migration";

/** A migration failed; the message names it, says that it was rolled back and what to do. */
export class MigrationError extends BrandedError {
  static override readonly brand: symbol = errorBrand("MigrationError");
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
    const db = kyselyOver(connection, dialect, [new IdempotentDdlPlugin(dialect)]);
    await migration.up(db);
  });
}

/**
 * A Kysely that runs every query on `connection` (one connection, already inside whatever transaction the caller
 * holds: its transaction calls do nothing), with the adapter, introspector and compiler of `dialect`.
 */
function kyselyOver(connection: DatabaseConnection, dialect: Dialect, plugins: KyselyPlugin[] = []): Kysely<any> {
  const driver: Driver = {
    async init() {},
    async acquireConnection() {
      return connection;
    },
    async beginTransaction() {},
    async commitTransaction() {},
    async rollbackTransaction() {},
    async releaseConnection() {},
    async destroy() {},
  };
  return new Kysely<any>({
    dialect: {
      createAdapter: () => (dialect === "sqlite" ? new SqliteAdapter() : new PostgresAdapter()),
      createDriver: () => driver,
      createIntrospector: (k) => (dialect === "sqlite" ? new SqliteIntrospector(k) : new PostgresIntrospector(k)),
      createQueryCompiler: () => (dialect === "sqlite" ? new SqliteQueryCompiler() : new PostgresQueryCompiler()),
    },
    plugins,
  });
}

/** Options of {@link migrateToLatest}. */
export interface MigrateOptions {
  /** Where the database lives, for error messages. */
  location: string;
  /** Receives a sentence when a start repaired the schema (a table or column was missing); default stderr. */
  warn?: (message: string) => void;
}

/** The tables and columns the migrations create, folded in name order (later drops remove them). */
type ExpectedSchema = Map<string, { columns: Set<string>; migrations: Set<string> }>;

/** Each migration's schema statements, recorded once per process (migrations are pure DDL). */
const recordedStatements = new WeakMap<Migration, RootOperationNode[]>();

/**
 * The schema statements `migration.up` issues, recorded without touching a database: it runs against a Kysely whose
 * driver keeps each query's operation node and answers with no rows.
 */
async function statementsOf(migration: Migration, dialect: Dialect): Promise<RootOperationNode[]> {
  const known = recordedStatements.get(migration);
  if (known) return known;
  const nodes: RootOperationNode[] = [];
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      nodes.push(query.query);
      return { rows: [] };
    },
    async *streamQuery() {},
  };
  const db = kyselyOver(connection, dialect);
  await migration.up(db);
  recordedStatements.set(migration, nodes);
  return nodes;
}

/** What the recorded migrations (in name order) leave: every table with its columns and the migrations touching it. */
async function expectedSchema(
  migrations: Record<string, Migration>,
  names: string[],
  dialect: Dialect,
): Promise<ExpectedSchema> {
  const schema: ExpectedSchema = new Map();
  for (const name of names) {
    for (const node of await statementsOf(migrations[name]!, dialect)) {
      if (node.kind === "CreateTableNode") {
        const table = node.table.table.identifier.name;
        const entry = schema.get(table) ?? { columns: new Set<string>(), migrations: new Set<string>() };
        for (const column of node.columns) entry.columns.add(column.column.column.name);
        entry.migrations.add(name);
        schema.set(table, entry);
      } else if (node.kind === "DropTableNode") {
        schema.delete(node.table.table.identifier.name);
      } else if (node.kind === "AlterTableNode") {
        const entry = schema.get(node.table.table.identifier.name);
        if (!entry) continue;
        entry.migrations.add(name);
        for (const change of node.columnAlterations ?? []) {
          if (change.kind === "AddColumnNode") entry.columns.add(change.column.column.column.name);
          else if (change.kind === "DropColumnNode") entry.columns.delete(change.column.column.name);
        }
      }
    }
  }
  return schema;
}

/** The table that keeps the expected schema of the recorded migrations, so a start need not derive it again. */
export const SCHEMA_MANIFEST_TABLE = "toolhost_schema_manifest";

/**
 * The expected schema of the recorded migrations `names`: read from {@link SCHEMA_MANIFEST_TABLE} when it was stored
 * for exactly these migrations (one small read), else derived by recording the migrations' statements (a few
 * milliseconds) and stored for the next start.
 */
async function storedExpectedSchema(
  trx: Kysely<any>,
  dialect: Dialect,
  migrations: Record<string, Migration>,
  names: string[],
): Promise<ExpectedSchema> {
  const key = names.join(",");
  await trx.schema
    .createTable(SCHEMA_MANIFEST_TABLE)
    .ifNotExists()
    .addColumn("id", "varchar(32)", (c) => c.notNull().primaryKey())
    .addColumn("migrations", "text", (c) => c.notNull())
    .addColumn("schema", "text", (c) => c.notNull())
    .execute();
  const row = (await trx
    .selectFrom(SCHEMA_MANIFEST_TABLE)
    .select(["migrations", "schema"])
    .where("id", "=", "expected")
    .executeTakeFirst()) as { migrations: string; schema: string } | undefined;
  if (row?.migrations === key) {
    try {
      const stored = JSON.parse(row.schema) as Record<string, { columns: string[]; migrations: string[] }>;
      return new Map(
        Object.entries(stored).map(([table, e]) => [
          table,
          { columns: new Set(e.columns), migrations: new Set(e.migrations) },
        ]),
      );
    } catch {
      // A damaged manifest is derived again below.
    }
  }
  const expected = await expectedSchema(migrations, names, dialect);
  const schema = JSON.stringify(
    Object.fromEntries(
      [...expected].map(([table, e]) => [table, { columns: [...e.columns], migrations: [...e.migrations] }]),
    ),
  );
  await trx.deleteFrom(SCHEMA_MANIFEST_TABLE).where("id", "=", "expected").execute();
  await trx.insertInto(SCHEMA_MANIFEST_TABLE).values({ id: "expected", migrations: key, schema }).execute();
  return expected;
}

/** The database's tables and their columns, in one query. */
async function actualSchema(trx: Kysely<any>, dialect: Dialect): Promise<Map<string, Set<string>>> {
  const rows =
    dialect === "sqlite"
      ? await sql<{
          t: string;
          c: string;
        }>`SELECT m.name AS t, p.name AS c FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'`.execute(
          trx,
        )
      : await sql<{
          t: string;
          c: string;
        }>`SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = current_schema()`.execute(
          trx,
        );
  const tables = new Map<string, Set<string>>();
  for (const { t, c } of rows.rows) {
    const columns = tables.get(t) ?? new Set<string>();
    columns.add(c);
    tables.set(t, columns);
  }
  return tables;
}

/** What is missing: tables, and columns of tables that exist, as readable items (`audit_log`, `chats.title`). */
function missingParts(expected: ExpectedSchema, actual: Map<string, Set<string>>): string[] {
  const missing: string[] = [];
  for (const [table, { columns }] of expected) {
    const have = actual.get(table);
    if (!have) {
      missing.push(table);
      continue;
    }
    for (const column of columns) if (!have.has(column)) missing.push(`${table}.${column}`);
  }
  return missing;
}

/** A recorded migration's table or column is missing and could not be recreated. */
export class SchemaDamageError extends BrandedError {
  static override readonly brand: symbol = errorBrand("SchemaDamageError");
  constructor(
    readonly missing: string[],
    readonly migrations: string[],
    location: string,
    cause?: unknown,
  ) {
    const why = cause ? ` Recreating it failed: ${(cause as Error)?.message ?? String(cause)}.` : "";
    super(
      `The database on ${location} lacks ${missing.join(", ")}, although the migrations that create ${missing.length === 1 ? "it" : "them"} (${migrations.join(", ")}) are recorded as applied: the schema was changed outside Toolhost.${why} Restore the database from a backup, or delete those migrations' rows from the ${MIGRATION_TABLE} table (DELETE FROM ${MIGRATION_TABLE} WHERE name IN (${migrations.map((m) => `'${m}'`).join(", ")})) and start again: they then run again and recreate what is missing, empty.`,
      { cause },
    );
  }
}

/**
 * Checks, inside the migration lock, that every table and column the recorded migrations create exists. When one is
 * missing (dropped by hand while its bookkeeping row stayed), reruns — idempotently, in this transaction — the
 * recorded migrations that create or alter the damaged tables, which recreates what is missing (a dropped table
 * comes back empty: its rows are gone), and reports that through `warn`. Skipped when the database records a
 * migration this version does not know (a newer version's schema). Throws {@link SchemaDamageError} when the
 * repair does not restore the schema.
 */
async function checkRecordedSchema(
  trx: Kysely<any>,
  dialect: Dialect,
  migrations: Record<string, Migration>,
  recorded: Set<string>,
  options: MigrateOptions,
): Promise<void> {
  if ([...recorded].some((name) => !(name in migrations))) return;
  const names = [...recorded].sort();
  const expected = await storedExpectedSchema(trx, dialect, migrations, names);
  const missing = missingParts(expected, await actualSchema(trx, dialect));
  if (missing.length === 0) return;
  const damaged = new Set(missing.map((part) => part.split(".")[0]!));
  const rerun = names.filter((name) => [...damaged].some((table) => expected.get(table)?.migrations.has(name)));
  try {
    for (const name of rerun) await runIdempotently(trx, dialect, migrations[name]!);
  } catch (error) {
    throw new SchemaDamageError(missing, rerun, options.location, error);
  }
  const still = missingParts(expected, await actualSchema(trx, dialect));
  if (still.length > 0) throw new SchemaDamageError(still, rerun, options.location);
  const warn = options.warn ?? ((message: string) => process.stderr.write(`warning: ${message}\n`));
  warn(
    `The database on ${options.location} lacked ${missing.join(", ")} although ${rerun.join(", ")} ${rerun.length === 1 ? "was" : "were"} recorded as applied (changed outside Toolhost); recreated by running ${rerun.length === 1 ? "it" : "them"} again. A table dropped this way comes back empty: restore its rows from a backup if you need them.`,
  );
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
          if (!current) {
            // Up to date by the bookkeeping: check that what it records is really there (repairing what is not).
            await checkRecordedSchema(trx, tx.dialect, migrations, done, options);
            return undefined;
          }
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
