/**
 * The PostgreSQL driver (`pg`). Every call runs in its own read-only transaction (`BEGIN READ ONLY`, on a session
 * whose `default_transaction_read_only` is on) with a server-side `statement_timeout`; the caller's statement goes
 * through the extended query protocol, so the server itself refuses a second statement, and it is executed with a
 * row limit of maxRows + 1: the server stops producing rows there (the portal is suspended) and the rest is never
 * computed or sent. A cancel (the call's signal) runs `pg_cancel_backend` from a separate connection. After each call
 * the transaction is rolled back and the session reset (`DISCARD ALL`: advisory locks, prepared statements) before
 * the connection returns to the source's small pool.
 *
 * A role that can bypass a read-only transaction (a superuser, or a member of pg_execute_server_program or
 * pg_write_server_files: `COPY … TO PROGRAM`, server files), or may switch to one (SET ROLE), is refused: the source
 * must connect as a read-only role.
 */
import type { FieldDef, PoolClient } from "pg";
import pg from "pg";
import { ToolError } from "../../core/errors.js";
import {
  AccountCheck,
  abortError,
  CONNECT_TIMEOUT_MS,
  connectionLost,
  cutText,
  cutValueText,
  IDLE_CLOSE_MS,
  isoLocal,
  jsonColumnValue,
  POOL_SIZE,
  queryResult,
  ResultBudget,
  ROW_MAX_BYTES,
  readOnlyRefusal,
  severalStatements,
  sourceFailure,
  sqlRejected,
  statementTimeout,
  unreachable,
  VALUE_MAX_BYTES,
  VALUE_MAX_CHARS,
  valueTooLarge,
} from "./common.js";
import type { DataDriver, QueryColumn, QueryRequest, QueryResult, SchemaRequest, SchemaTable } from "./types.js";

const TYPE_NAMES: Record<number, string> = {
  16: "boolean",
  17: "bytea",
  20: "bigint",
  21: "smallint",
  23: "integer",
  25: "text",
  26: "oid",
  114: "json",
  700: "real",
  701: "double precision",
  1042: "character",
  1043: "character varying",
  1082: "date",
  1083: "time",
  1114: "timestamp",
  1184: "timestamptz",
  1186: "interval",
  1700: "numeric",
  2950: "uuid",
  3802: "jsonb",
};

/** A value in PostgreSQL's text format, made JSON-safe by its type's oid. */
function fromText(text: string | null, oid: number): unknown {
  if (text === null) return null;
  if (oid === 17 && text.startsWith("\\x")) {
    // bytea in the hex format, as base64; one too long to carry whole: its first bytes, decoded from only as much
    // of the hex as they need.
    if (text.length > 2 + VALUE_MAX_BYTES * 2) {
      const kept = Buffer.from(text.slice(2, 2 + VALUE_MAX_BYTES * 2), "hex").toString("base64");
      return cutValueText(kept, (text.length - 2) / 2, "bytes");
    }
    return Buffer.from(text.slice(2), "hex").toString("base64");
  }
  // Any other value too long to carry whole: its first characters (a JSON value stays its text).
  if (text.length > VALUE_MAX_CHARS) return cutText(text);
  switch (oid) {
    case 16:
      return text === "t";
    case 21:
    case 23:
    case 26:
      return Number(text);
    case 700:
    case 701: {
      const n = Number(text);
      return Number.isFinite(n) ? n : text;
    }
    case 114:
    case 3802:
      return jsonColumnValue(text);
    case 17:
      return text; // bytea in the escape format: its text
    case 1114:
      return isoLocal(text);
    case 1184: {
      const date = new Date(isoLocal(text).replace(/([+-]\d\d)$/, "$1:00"));
      if (Number.isNaN(date.getTime())) return text;
      // A Date holds milliseconds: the microseconds PostgreSQL keeps come back from the text (zone offsets are
      // whole seconds, so the fraction is the same in UTC).
      const fraction = /:\d\d\.(\d{4,6})(?=[+-])/.exec(text)?.[1];
      return fraction ? date.toISOString().replace(/\.\d{3}Z$/, `.${fraction}Z`) : date.toISOString();
    }
    default:
      return text; // bigint, numeric, dates, arrays and the rest: their exact text
  }
}

/** The frontend messages of pg's connection that a submittable sends (pg's own Query uses the same). */
interface ExtendedProtocol {
  parse(message: { text: string; types: number[] }): void;
  bind(message: { values: (string | null)[] }): void;
  describe(message: { type: "P"; name: string }): void;
  execute(message: { portal: string; rows: number }): void;
  sync(): void;
}

interface PortalOutcome {
  fields: FieldDef[];
  rows: unknown[][];
  truncated: boolean;
}

/**
 * The caller's statement as one extended-protocol exchange (Parse, Bind, Describe, Execute with a row limit, Sync),
 * handed to pg's client as a submittable. Rows arrive as text and are converted as they come.
 */
class PortalQuery {
  #fields: FieldDef[] = [];
  readonly #rows: unknown[][] = [];
  readonly #budget = new ResultBudget();
  #full = false;
  #truncated = false;
  #error: unknown;
  #done = false;

  constructor(
    private readonly text: string,
    private readonly values: unknown[],
    private readonly limit: number,
    private readonly callback: (error: unknown, outcome?: PortalOutcome) => void,
  ) {}

  submit(connection: ExtendedProtocol): void {
    // Nothing here may throw: pg would not route the exchange's answers back to this query.
    connection.parse({ text: this.text, types: [] });
    connection.bind({ values: this.values.map(bindValue) });
    connection.describe({ type: "P", name: "" });
    connection.execute({ portal: "", rows: this.limit });
    connection.sync();
  }

  handleRowDescription(message: { fields: FieldDef[] }): void {
    this.#fields = message.fields;
  }

  handleDataRow(message: { fields: (string | null)[] }): void {
    // Past the result's characters, the rows still arriving (at most maxRows + 1 in all) are dropped unread.
    if (this.#full) {
      this.#truncated = true;
      return;
    }
    const fields = this.#fields;
    const row = message.fields.map((v, i) => fromText(v, fields[i]?.dataTypeID ?? 25));
    this.#rows.push(row);
    this.#full = !this.#budget.take(row);
  }

  handlePortalSuspended(): void {
    this.#truncated = true;
  }

  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handleCopyInResponse(connection: { sendCopyFail(message: string): void }): void {
    connection.sendCopyFail("COPY FROM is not available to the data tools");
  }
  handleCopyData(): void {}

  handleError(error: unknown): void {
    // pg stops routing messages to this query after an error; the Sync already sent ends the exchange.
    this.#error = error;
    this.#finish();
  }

  handleReadyForQuery(): void {
    this.#finish();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    if (this.#error) this.callback(this.#error);
    else this.callback(undefined, { fields: this.#fields, rows: this.#rows, truncated: this.#truncated });
  }
}

/** A JSON argument in PostgreSQL's text format (objects and arrays as JSON text). */
function bindValue(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Clients whose server sent a row too large to read, with why: their connection was ended, their call fails with it. */
const parserFailures = new WeakMap<object, Error>();

/**
 * Guards the parser of a client's connection. pg parses the server's messages in its socket's "data" listener,
 * buffering each message whole and then decoding its values as strings: a huge row would be buffered whole (a
 * `repeat('x', 600000000)`: most of a gigabyte, then a throw there, outside any call, that ends the process). The
 * guard follows the messages' headers and ends the connection at the header of a row longer than ROW_MAX_BYTES
 * (recorded in parserFailures for the call); anything the parser still throws ends it too.
 */
function guardParser(client: PoolClient): void {
  type Stream = NodeJS.EventEmitter & { destroy(error?: Error): void };
  const stream = (client as unknown as { connection?: { stream?: Stream } }).connection?.stream;
  if (!stream) return;
  const header = Buffer.alloc(5); // a message's type byte and its length (which counts itself)
  let headerBytes = 0;
  let bodyLeft = 0;
  const fail = (error: Error) => {
    parserFailures.set(client, error);
    stream.destroy(error);
  };
  /** Whether `chunk` holds only messages the parser may read (false: the connection was ended). */
  const fits = (chunk: Buffer): boolean => {
    for (let at = 0; at < chunk.length; ) {
      if (bodyLeft > 0) {
        const skip = Math.min(bodyLeft, chunk.length - at);
        bodyLeft -= skip;
        at += skip;
        continue;
      }
      const take = Math.min(5 - headerBytes, chunk.length - at);
      chunk.copy(header, headerBytes, at, at + take);
      headerBytes += take;
      at += take;
      if (headerBytes < 5) break;
      headerBytes = 0;
      bodyLeft = header.readUInt32BE(1) - 4;
      if (header[0] === 0x44 /* DataRow */ && bodyLeft > ROW_MAX_BYTES) {
        fail(new Error(`a row of ${bodyLeft} bytes, past the ${ROW_MAX_BYTES} a row may take`));
        return false;
      }
    }
    return true;
  };
  for (const listener of stream.listeners("data") as ((chunk: Buffer) => void)[]) {
    stream.removeListener("data", listener);
    stream.on("data", (chunk: Buffer) => {
      if (parserFailures.has(client) || !fits(chunk)) return;
      try {
        listener(chunk);
      } catch (error) {
        fail(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }
}

interface PgError {
  code?: string;
  message?: string;
}

/** Driver of one PostgreSQL source. */
export class PostgresDriver implements DataDriver {
  readonly dialect = "postgres" as const;
  #pool: pg.Pool | undefined;
  readonly #roleChecked = new AccountCheck<void>();

  constructor(
    private readonly source: string,
    private readonly url: string,
  ) {}

  #getPool(): pg.Pool {
    if (!this.#pool) {
      this.#pool = new pg.Pool({
        connectionString: this.url,
        max: POOL_SIZE,
        idleTimeoutMillis: IDLE_CLOSE_MS,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
        options: "-c default_transaction_read_only=on",
        application_name: "toolhost-data",
        allowExitOnIdle: true,
      });
      // A connection that breaks must not crash the process: an idle one (the pool's "error") or one in use, whose
      // client emits "error" when the server ends it mid-statement (the statement itself fails, see #session).
      this.#pool.on("error", () => {});
      this.#pool.on("connect", (client) => {
        client.on("error", () => {});
        guardParser(client);
      });
    }
    return this.#pool;
  }

  async #connect(): Promise<PoolClient> {
    let client: PoolClient;
    try {
      client = await this.#getPool().connect();
    } catch (error) {
      throw unreachable(this.source, this.url, error);
    }
    try {
      await this.#roleChecked.run(() => this.#checkRole(client));
    } catch (error) {
      client.release();
      throw error;
    }
    return client;
  }

  async #checkRole(client: PoolClient): Promise<void> {
    // Any role the session may switch to counts (SET ROLE works on every role it is a member of, also without
    // INHERIT, and a statement may run it first: a DO block), as does the login role behind a role set for it.
    const { rows } = await client.query<{ unsafe: boolean }>(
      `SELECT EXISTS (
         SELECT 1 FROM pg_roles g
         WHERE (g.rolsuper OR g.rolname IN ('pg_execute_server_program', 'pg_write_server_files'))
           AND (pg_has_role(current_user, g.oid, 'MEMBER') OR pg_has_role(session_user, g.oid, 'MEMBER'))) AS unsafe`,
    );
    if (rows[0]?.unsafe) {
      throw readOnlyRefusal(
        this.source,
        "its role is a superuser or may run programs or write files on the server, or may switch to a role that can (SET ROLE), which a read-only transaction does not stop; connect it as a read-only role",
      );
    }
  }

  /** Runs `work` in a read-only transaction with a statement timeout; cancels on the server when `signal` aborts. */
  async #session<T>(signal: AbortSignal, timeoutMs: number, work: (client: PoolClient) => Promise<T>): Promise<T> {
    if (signal.aborted) throw abortError(signal, this.source, timeoutMs);
    const client = await this.#connect();
    const pid = (client as unknown as { processID?: number }).processID;
    let cancelled: Promise<void> | undefined;
    const onAbort = () => {
      cancelled = this.#cancel(pid);
    };
    let broken = false;
    let lost: unknown;
    const onLost = (error: unknown) => {
      lost ??= error;
    };
    client.on("error", onLost);
    try {
      await client.query("BEGIN READ ONLY");
      await client.query("SELECT set_config('statement_timeout', $1, true)", [String(timeoutMs)]);
      signal.addEventListener("abort", onAbort, { once: true });
      if (signal.aborted) onAbort();
      return await work(client);
    } catch (error) {
      if (signal.aborted) {
        await cancelled;
        throw abortError(signal, this.source, timeoutMs);
      }
      const unreadable = parserFailures.get(client);
      if (unreadable !== undefined) {
        broken = true;
        throw valueTooLarge(this.source, unreadable);
      }
      // 57P01–57P03: the server's own "terminating connection" (administrator, crash, shutdown), sent before it hangs up.
      if (lost !== undefined || /^57P0[123]$/.test((error as PgError).code ?? "")) {
        broken = true;
        throw connectionLost(this.source, this.url, error);
      }
      throw this.#classify(error, timeoutMs);
    } finally {
      signal.removeEventListener("abort", onAbort);
      client.removeListener("error", onLost);
      if (!broken) {
        try {
          await client.query("ROLLBACK");
          await client.query("DISCARD ALL");
        } catch {
          broken = true;
        }
      }
      client.release(broken);
    }
  }

  async #cancel(pid: number | undefined): Promise<void> {
    if (!pid) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query("SELECT pg_cancel_backend($1)", [pid]);
    } catch {
      // the statement_timeout still ends it on the server
    } finally {
      await client.end().catch(() => {});
    }
  }

  #classify(error: unknown, timeoutMs: number): ToolError {
    if (error instanceof ToolError) return error;
    const { code = "", message = "" } = error as PgError;
    if (code === "25006" || code === "42501" || code === "25001") return readOnlyRefusal(this.source, message);
    // 2D000: COMMIT or ROLLBACK inside a DO block or procedure, which cannot end the call's read-only transaction.
    if (code.startsWith("2D")) {
      return readOnlyRefusal(this.source, `${message}: a statement here cannot end its read-only transaction`);
    }
    if (code === "57014") return statementTimeout(this.source, timeoutMs);
    if (code === "42601" && /multiple commands/.test(message)) return severalStatements(this.source);
    if (/^(42|22|0A|21|23|2F|3F|54|P0|08P01)/.test(code) || /bind message supplies/.test(message)) {
      return sqlRejected(this.source, message, code ? { sqlState: code } : {});
    }
    if (/^08|^57P/.test(code) || (error as NodeJS.ErrnoException).syscall) {
      return unreachable(this.source, this.url, error);
    }
    return sourceFailure(this.source, this.url, error);
  }

  async version(signal: AbortSignal): Promise<string> {
    return this.#session(signal, 10_000, async (client) => {
      const { rows } = await client.query<{ v: string }>("SELECT version() AS v");
      return rows[0]?.v ?? "";
    });
  }

  async query(request: QueryRequest): Promise<QueryResult> {
    const started = performance.now();
    const outcome = await this.#session(
      request.signal,
      request.timeoutMs,
      (client) =>
        new Promise<PortalOutcome>((resolve, reject) => {
          client.query(
            new PortalQuery(request.sql, request.params, request.maxRows + 1, (error, result) =>
              error ? reject(error) : resolve(result as PortalOutcome),
            ) as unknown as pg.QueryConfig,
          );
        }),
    );
    const truncated = outcome.truncated || outcome.rows.length > request.maxRows;
    const rows = outcome.rows.slice(0, request.maxRows);
    const columns: QueryColumn[] = outcome.fields.map((f) =>
      TYPE_NAMES[f.dataTypeID] ? { name: f.name, type: TYPE_NAMES[f.dataTypeID] } : { name: f.name },
    );
    return queryResult(started, { columns, rows, truncated });
  }

  async schema(request: SchemaRequest): Promise<SchemaTable[]> {
    return this.#session(request.signal, request.timeoutMs, async (client) => {
      let where = "c.relnamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema', 'pg_toast')";
      const params: string[] = [];
      if (request.table) {
        const dot = request.table.indexOf(".");
        if (dot > 0) {
          params.push(request.table.slice(0, dot), request.table.slice(dot + 1));
          where = "c.relnamespace::regnamespace::text = $1 AND c.relname = $2";
        } else {
          params.push(request.table);
          where += " AND c.relname = $1 AND pg_table_is_visible(c.oid)";
        }
      }
      const { rows } = await client.query<{
        oid: number;
        schema: string;
        name: string;
        estimate: number;
        column: string | null;
        type: string | null;
        notnull: boolean | null;
      }>(
        `SELECT c.oid::int AS oid, c.relnamespace::regnamespace::text AS schema, c.relname AS name,
                c.reltuples::float8 AS estimate, a.attname AS column,
                format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull
         FROM pg_class c
         LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND ${where}
         ORDER BY 2, 3, a.attnum
         LIMIT 20000`,
        params,
      );
      const tables = new Map<number, SchemaTable>();
      for (const r of rows) {
        let table = tables.get(r.oid);
        if (!table) {
          table = { name: r.name, schema: r.schema, columns: [] };
          if (r.estimate >= 0) table.rowEstimate = Math.round(r.estimate);
          tables.set(r.oid, table);
        }
        if (r.column) table.columns.push({ name: r.column, type: r.type ?? "", nullable: !r.notnull });
      }
      if (request.table) {
        for (const [oid, table] of tables) {
          const indexes = await client.query<{ name: string; columns: string[]; unique: boolean }>(
            `SELECT i.relname AS name, x.indisunique AS unique,
                    array(SELECT pg_get_indexdef(x.indexrelid, k + 1, true)
                          FROM generate_subscripts(x.indkey, 1) AS k ORDER BY k) AS columns
             FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
             WHERE x.indrelid = $1 ORDER BY 1`,
            [oid],
          );
          table.indexes = indexes.rows.map((r) => ({ name: r.name, columns: r.columns, unique: r.unique }));
          const keys = await client.query<{ name: string; columns: string[]; table: string; refcolumns: string[] }>(
            `SELECT con.conname AS name,
                    array(SELECT attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
                          JOIN pg_attribute ON attrelid = con.conrelid AND attnum = k.n ORDER BY k.o) AS columns,
                    con.confrelid::regclass::text AS table,
                    array(SELECT attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, o)
                          JOIN pg_attribute ON attrelid = con.confrelid AND attnum = k.n ORDER BY k.o) AS refcolumns
             FROM pg_constraint con WHERE con.conrelid = $1 AND con.contype = 'f' ORDER BY 1`,
            [oid],
          );
          table.foreignKeys = keys.rows.map((r) => ({
            name: r.name,
            columns: r.columns,
            referencedTable: r.table,
            referencedColumns: r.refcolumns,
          }));
        }
      }
      return [...tables.values()];
    });
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    this.#roleChecked.forget();
    await pool?.end().catch(() => {});
  }
}
