/**
 * The seam between the SQL data tools (sql_schema, sql_query) and the databases they read: one {@link DataDriver}
 * per data source, made by the driver of its URL's scheme. A driver owns its connections (a small lazy pool),
 * enforces read-only access with the database's own means (read-only transactions or connections, server-side
 * statement timeouts), cancels a query on the server when the call's signal aborts, and reports failures as the
 * classified errors of core/errors.ts. Another kind of database (a document store) fits the same interface: a
 * dialect name, a version, a schema listing and a query that returns columns and rows.
 */

/** The databases Toolhost has drivers for. */
export type DataDialect = "postgres" | "mysql" | "sqlite";

/** A data source as declared (config file `dataSources`, or stored by an admin). `url` holds its credentials. */
export interface DataSourceConfig {
  /** `postgres://…`, `mysql://…` (also MariaDB) or `sqlite:/absolute/path.db`. */
  url: string;
  /** What the data is, for the model (shown in the tools' descriptions). */
  description?: string;
}

/** Where a data source's declaration came from. */
export type DataSourceOrigin = "config-file" | "database";

/** A named, validated data source. */
export interface NamedDataSource extends DataSourceConfig {
  name: string;
  dialect: DataDialect;
  origin: DataSourceOrigin;
}

/** A data source as shown to people and models: no URL, only its dialect and host (never its password). */
export interface DataSourceSummary {
  name: string;
  dialect: DataDialect;
  description?: string;
  /** `host:port/database` for a server, the file path for SQLite. */
  location: string;
  origin: DataSourceOrigin;
}

/** One column of a result. `type` is the database's type name when the driver knows it. */
export interface QueryColumn {
  name: string;
  type?: string;
}

/** What sql_query returns (besides the source). Values are JSON-safe (see values.ts). */
export interface QueryResult {
  columns: QueryColumn[];
  rows: unknown[][];
  /** Rows returned (at most maxRows). */
  rowCount: number;
  /** True when the statement produced more than maxRows rows; the rest were not read. */
  truncated: boolean;
  durationMs: number;
}

/** A column of a table in a schema listing. */
export interface SchemaColumn {
  name: string;
  type: string;
  nullable: boolean;
}

/** An index of a table. */
export interface SchemaIndex {
  name: string;
  columns: string[];
  unique: boolean;
}

/** A foreign key of a table. */
export interface SchemaForeignKey {
  name?: string;
  columns: string[];
  referencedTable: string;
  referencedColumns: string[];
}

/** A table (or view) in a schema listing; indexes and foreign keys only when one table was asked for. */
export interface SchemaTable {
  name: string;
  schema?: string;
  columns: SchemaColumn[];
  /** The database's estimate of its row count, when it keeps one. */
  rowEstimate?: number;
  indexes?: SchemaIndex[];
  foreignKeys?: SchemaForeignKey[];
}

/** One query of a call: a single statement, its bound parameters and the call's limits. */
export interface QueryRequest {
  sql: string;
  /** Bound by the driver: `$1…` for PostgreSQL, `?` for MySQL and SQLite; objects and arrays as their JSON text. */
  params: unknown[];
  /** Rows to return at most; the statement is stopped after maxRows + 1 rows. */
  maxRows: number;
  /** Server-side statement timeout in milliseconds. */
  timeoutMs: number;
  /** Aborts the call: the driver cancels the statement on the server. */
  signal: AbortSignal;
}

/** A schema request: every table, or one table (`name` or `schema.name`) with its indexes and foreign keys. */
export interface SchemaRequest {
  table?: string;
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * A connection to one data source. Methods throw classified ToolErrors: AccessDeniedError (`access_denied`) for a
 * write or a privilege the read-only session refuses, ToolArgumentError (`validation_failed`) for SQL the database
 * rejects (several statements, a syntax error, an unknown table), ToolTimeoutError / ToolAbortedError when the
 * statement was cancelled, ToolExecutionError naming the source when it cannot be reached. Messages never contain
 * the source's URL or password.
 */
export interface DataDriver {
  readonly dialect: DataDialect;
  /** The server's version string (connects if needed). */
  version(signal: AbortSignal): Promise<string>;
  schema(request: SchemaRequest): Promise<SchemaTable[]>;
  query(request: QueryRequest): Promise<QueryResult>;
  /** Closes every connection; later calls reconnect. */
  close(): Promise<void>;
}

/** What the data tools find in `ToolContext.services.dataSources`: the declared sources and their drivers. */
export interface DataSourceService {
  /** Every valid declared source (config file, then stored), re-read on each call. */
  list(): Promise<NamedDataSource[]>;
  /** The driver of a listed source (made on first use, kept while its URL is unchanged). */
  driver(source: NamedDataSource): Promise<DataDriver>;
}

/** Name of the ToolContext service holding the {@link DataSourceService}. */
export const DATA_SOURCES_SERVICE = "dataSources";
