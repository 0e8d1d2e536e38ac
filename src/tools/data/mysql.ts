/**
 * The MySQL / MariaDB driver (`mysql2`). Every call runs in `START TRANSACTION READ ONLY` (on MariaDB an XA
 * transaction, which a compound statement cannot end: see #session), on a session whose
 * transactions are all read-only (a DDL statement's implicit commit would otherwise leave the first), with a server-side
 * statement timeout (MariaDB `max_statement_time`, MySQL `max_execution_time`), on a connection without
 * multi-statement support, so the server refuses a second statement. Parameters (`?`) are bound by the driver.
 * Rows are streamed; at maxRows + 1 the statement is stopped on the server (`KILL QUERY` from a second connection)
 * and its connection dropped, so the rest is never read. A cancel also runs `KILL QUERY`. After each call the
 * transaction is rolled back and the session reset (COM_RESET_CONNECTION: variables, named locks, table locks)
 * before the connection returns to the source's small pool.
 *
 * An account holding a global privilege that a read-only transaction does not stop (FILE: `SELECT … INTO OUTFILE`;
 * SUPER; ALL PRIVILEGES on `*.*`), itself or through a MariaDB role it may enable, is refused: the source must
 * connect as a read-only account.
 */
import { randomBytes } from "node:crypto";
import mysql from "mysql2";
import { ToolError } from "../../core/errors.js";
import {
  AccountCheck,
  abortError,
  CONNECT_TIMEOUT_MS,
  connectionLost,
  IDLE_CLOSE_MS,
  isoLocal,
  jsonColumnValue,
  jsonSafe,
  POOL_SIZE,
  queryResult,
  ResultBudget,
  readOnlyRefusal,
  severalStatements,
  sourceFailure,
  sqlRejected,
  statementTimeout,
  unreachable,
  valueTooLarge,
} from "./common.js";
import type { DataDriver, QueryColumn, QueryRequest, QueryResult, SchemaRequest, SchemaTable } from "./types.js";

type Connection = mysql.PoolConnection;

const DANGEROUS_GRANT = /^GRANT\s+(?:.*\b(?:FILE|SUPER)\b.*|ALL(?: PRIVILEGES)?)\s+ON\s+\*\.\*/i;
const DATETIME_TYPES = new Set([7, 10, 12]); // TIMESTAMP, DATE, DATETIME (mysql2 field types)
const JSON_TYPE = 245; // MySQL's JSON (MariaDB's JSON is text); read as its text (jsonStrings), see jsonColumnValue

function run<T = Record<string, unknown>>(connection: Connection, sql: string, values: unknown[] = []): Promise<T[]> {
  return new Promise((resolve, reject) =>
    connection.query({ sql, values }, (error, rows) => (error ? reject(error) : resolve(rows as T[]))),
  );
}

interface MysqlError {
  code?: string;
  errno?: number;
  sqlMessage?: string;
  message?: string;
  fatal?: boolean;
}

/** Driver of one MySQL or MariaDB source. */
export class MysqlDriver implements DataDriver {
  readonly dialect = "mysql" as const;
  #pool: mysql.Pool | undefined;
  readonly #checked = new AccountCheck<{ mariadb: boolean; version: string }>();

  constructor(
    private readonly source: string,
    private readonly url: string,
  ) {}

  #options(): mysql.PoolOptions {
    return {
      uri: this.url.replace(/^mariadb:/i, "mysql:"),
      connectionLimit: POOL_SIZE,
      maxIdle: POOL_SIZE,
      idleTimeout: IDLE_CLOSE_MS,
      connectTimeout: CONNECT_TIMEOUT_MS,
      multipleStatements: false,
      // The server may never ask this process for a local file (LOAD DATA LOCAL INFILE).
      flags: ["-LOCAL_FILES"],
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
      jsonStrings: true,
      decimalNumbers: false,
    };
  }

  #getPool(): mysql.Pool {
    if (!this.#pool) {
      this.#pool = mysql.createPool(this.#options());
      this.#pool.on("connection", (connection) => connection.on("error", () => {}));
    }
    return this.#pool;
  }

  async #connect(): Promise<{ connection: Connection; mariadb: boolean; version: string }> {
    let connection: Connection;
    try {
      connection = await new Promise<Connection>((resolve, reject) =>
        this.#getPool().getConnection((error, c) => (error ? reject(error) : resolve(c))),
      );
    } catch (error) {
      throw unreachable(this.source, this.url, error);
    }
    try {
      return { connection, ...(await this.#checked.run(() => this.#checkAccount(connection))) };
    } catch (error) {
      connection.release();
      throw error instanceof ToolError ? error : sourceFailure(this.source, this.url, error);
    }
  }

  async #checkAccount(connection: Connection): Promise<{ mariadb: boolean; version: string }> {
    const v = (await run<{ v: string }>(connection, "SELECT VERSION() AS v"))[0]?.v ?? "";
    const mariadb = /mariadb/i.test(v);
    const refuse = () =>
      readOnlyRefusal(
        this.source,
        "its account holds FILE, SUPER or all privileges on every database, itself or through a role it may enable (SET ROLE), which a read-only transaction does not stop; connect it as a read-only account",
      );
    if (await this.#dangerousGrants(connection)) throw refuse();
    if (mariadb) {
      // A statement may enable any role granted to the account first (SET ROLE, inside BEGIN NOT ATOMIC … END).
      // MariaDB's SHOW GRANTS lists the enabled role's grants, and those of the roles granted to it.
      const login = (await run<{ r: string | null }>(connection, "SELECT CURRENT_ROLE() AS r"))[0]?.r ?? null;
      const roles = await run<{ r: string }>(
        connection,
        "SELECT DISTINCT ROLE_NAME AS r FROM information_schema.APPLICABLE_ROLES WHERE ROLE_NAME IS NOT NULL",
      );
      let dangerous = false;
      for (const { r } of roles) {
        try {
          await run(connection, "SET ROLE ?", [r]);
        } catch {
          continue; // a role granted to a role, not to the account: covered by the one granting it
        }
        if (await this.#dangerousGrants(connection)) dangerous = true;
      }
      await run(connection, login === null ? "SET ROLE NONE" : "SET ROLE ?", login === null ? [] : [login]);
      if (dangerous) throw refuse();
    }
    return { mariadb, version: v };
  }

  /** Whether SHOW GRANTS (the account's, and its enabled role's) holds FILE, SUPER or ALL on `*.*`. */
  async #dangerousGrants(connection: Connection): Promise<boolean> {
    const grants = await run<Record<string, string>>(connection, "SHOW GRANTS");
    return grants.some((row) => DANGEROUS_GRANT.test(String(Object.values(row)[0] ?? "")));
  }

  async #kill(threadId: number | null): Promise<void> {
    if (!threadId) return;
    const killer = mysql.createConnection({ ...this.#options(), connectTimeout: CONNECT_TIMEOUT_MS });
    killer.on("error", () => {});
    await new Promise<void>((resolve) => killer.query(`KILL QUERY ${Number(threadId)}`, () => resolve()));
    await new Promise<void>((resolve) => killer.end(() => resolve()));
  }

  /** Runs `work` in a read-only transaction with a statement timeout; KILL QUERY when `signal` aborts. */
  async #session<T>(
    signal: AbortSignal,
    timeoutMs: number,
    work: (connection: Connection, state: { broken: boolean; killed?: Promise<void> }) => Promise<T>,
    sql?: string,
  ): Promise<T> {
    if (signal.aborted) throw abortError(signal, this.source, timeoutMs);
    const { connection, mariadb } = await this.#connect();
    // MariaDB runs several statements as one (BEGIN NOT ATOMIC … END, IF, FOR, EXECUTE IMMEDIATE), which could
    // COMMIT, make the session writable (SET SESSION TRANSACTION READ WRITE) and write in a new transaction. An XA
    // transaction cannot be ended by COMMIT, ROLLBACK, START TRANSACTION or an implicit commit, only by its id, which
    // the statement never sees. It is read-only as the session is.
    const xid = mariadb ? `toolhost-${randomBytes(16).toString("hex")}` : undefined;
    const state: { broken: boolean; killed?: Promise<void> } = { broken: false };
    const onAbort = () => {
      state.killed ??= this.#kill(connection.threadId);
    };
    // A connection the server ends mid-statement reaches only the connection's "error" (the streamed query has no
    // callback to be told): it fails the call at once instead of leaving it to wait out its budget.
    let connectionError: unknown;
    let onLost: (error: unknown) => void = () => {};
    const lost = new Promise<never>((_, reject) => {
      onLost = (error) => {
        connectionError ??= error;
        reject(error);
      };
    });
    lost.catch(() => {});
    connection.on("error", onLost);
    try {
      if (mariadb) await run(connection, "SET SESSION max_statement_time = ?", [timeoutMs / 1000]);
      else await run(connection, "SET SESSION max_execution_time = ?", [timeoutMs]);
      // Read-only for the session too: a statement that commits implicitly (DDL) ends the transaction first, and
      // then runs in a new one, which must be read-only as well.
      await run(connection, "SET SESSION TRANSACTION READ ONLY");
      if (xid) await run(connection, "XA START ?", [xid]);
      else await run(connection, "START TRANSACTION READ ONLY");
      signal.addEventListener("abort", onAbort, { once: true });
      if (signal.aborted) onAbort();
      return await Promise.race([work(connection, state), lost]);
    } catch (error) {
      if ((error as MysqlError).fatal) state.broken = true;
      if (signal.aborted) {
        await state.killed;
        throw abortError(signal, this.source, timeoutMs);
      }
      // A value past the longest JavaScript string (a server whose max_allowed_packet lets it through): mysql2
      // ends the connection.
      if ((error as MysqlError).code === "ERR_STRING_TOO_LONG") {
        state.broken = true;
        throw valueTooLarge(this.source, error);
      }
      // 1927: MariaDB's "Connection was killed", the answer to a statement whose connection an administrator ended.
      if (connectionError !== undefined || (error as MysqlError).errno === 1927) {
        state.broken = true;
        throw connectionLost(this.source, this.url, error);
      }
      throw this.#classify(error, timeoutMs, sql);
    } finally {
      signal.removeEventListener("abort", onAbort);
      connection.removeListener("error", onLost);
      await state.killed;
      if (state.broken) connection.destroy();
      else {
        try {
          if (xid) {
            await run(connection, "XA END ?", [xid]);
            await run(connection, "XA ROLLBACK ?", [xid]);
          } else await run(connection, "ROLLBACK");
          // Nothing of this call's session reaches the next call on the connection (another user's, maybe): user
          // variables, named locks (GET_LOCK outlives a rollback), HANDLERs, session variables, table locks.
          await new Promise<void>((resolve, reject) =>
            connection.reset((error) => (error ? reject(error) : resolve())),
          );
          connection.release();
        } catch {
          connection.destroy();
        }
      }
    }
  }

  /** The classified error of a failed statement; `sql` (the caller's statement) tells a second statement apart. */
  #classify(error: unknown, timeoutMs: number, sql?: string): ToolError {
    if (error instanceof ToolError) return error;
    const e = error as MysqlError;
    const message = e.sqlMessage ?? e.message ?? "";
    switch (e.errno) {
      case 1792: // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
      case 1568: // ER_CANT_CHANGE_TX_CHARACTERISTICS
      case 1044: // ER_DBACCESS_DENIED_ERROR
      case 1045: // ER_ACCESS_DENIED_ERROR (e.g. INTO OUTFILE without FILE)
      case 1142: // ER_TABLEACCESS_DENIED_ERROR
      case 1143: // ER_COLUMNACCESS_DENIED_ERROR
      case 1227: // ER_SPECIFIC_ACCESS_DENIED_ERROR
      case 1370: // ER_PROCACCESS_DENIED_ERROR
      case 1148: // ER_NOT_ALLOWED_COMMAND (LOAD DATA LOCAL: local files are off)
      case 4166: // MariaDB ER_LOAD_INFILE_CAPABILITY_DISABLED
        return readOnlyRefusal(this.source, message);
      case 1399: // ER_XAER_RMFAIL: the statement would end the (XA) read-only transaction
        return readOnlyRefusal(
          this.source,
          "it would end the read-only transaction: COMMIT, ROLLBACK, START TRANSACTION, or a statement that commits implicitly such as DDL",
        );
      case 1969: // MariaDB ER_STATEMENT_TIMEOUT
      case 3024: // MySQL ER_QUERY_TIMEOUT
        return statementTimeout(this.source, timeoutMs);
      default:
        break;
    }
    if (e.errno === 1064 && sql !== undefined && startsSecondStatement(sql, message)) {
      return severalStatements(this.source);
    }
    if (e.errno !== undefined && e.errno >= 1000 && e.errno < 2000 && !e.fatal) {
      return sqlRejected(this.source, message, { errno: e.errno });
    }
    if (e.fatal || /^(E[A-Z]+|PROTOCOL_)/.test(e.code ?? "")) return unreachable(this.source, this.url, error);
    return sourceFailure(this.source, this.url, error);
  }

  async version(signal: AbortSignal): Promise<string> {
    return this.#session(signal, 10_000, async (connection) => {
      return (await run<{ v: string }>(connection, "SELECT VERSION() AS v"))[0]?.v ?? "";
    });
  }

  async query(request: QueryRequest): Promise<QueryResult> {
    const started = performance.now();
    const limit = request.maxRows;
    // mysql2 fills `?` placeholders in the client, ignoring values left over: a count that does not match is refused,
    // as PostgreSQL and SQLite refuse it.
    const placeholders = placeholderCount(request.sql, request.params.length);
    if (placeholders !== request.params.length) {
      throw sqlRejected(
        this.source,
        `the statement has ${placeholders} ? placeholder${placeholders === 1 ? "" : "s"} and ${request.params.length} parameter${request.params.length === 1 ? " was" : "s were"} given.`,
        { rule: "parameter_count" },
      );
    }
    const outcome = await this.#session(
      request.signal,
      request.timeoutMs,
      (connection, state) => {
        return new Promise<{ columns: QueryColumn[]; rows: unknown[][]; truncated: boolean }>((resolve, reject) => {
          let columns: QueryColumn[] = [];
          let dateColumns: boolean[] = [];
          let jsonColumns: boolean[] = [];
          const rows: unknown[][] = [];
          const budget = new ResultBudget();
          let full = false;
          let truncated = false;
          const query = connection.query({
            sql: request.sql,
            values: request.params.map(bindValue),
            rowsAsArray: true,
          });
          // One past the limit (of rows, or of the result's characters), or a second result set: stop the statement
          // on the server and drop the connection unread.
          const stop = () => {
            truncated = true;
            connection.pause();
            state.broken = true;
            state.killed ??= this.#kill(connection.threadId);
            void state.killed.then(() => resolve({ columns, rows, truncated }));
          };
          // A statement may return several result sets (a procedure, a compound statement): the first one with
          // columns is the result; the others would pair their rows with its columns.
          let resultSet: number | undefined;
          query.on("fields", (fields: mysql.FieldPacket[] | undefined, index?: number) => {
            if (!fields || truncated) return;
            if (resultSet !== undefined) return stop();
            resultSet = index ?? 0;
            columns = fields.map((f) => {
              const type = (mysql.Types as unknown as Record<number, string | undefined>)[f.type ?? -1];
              return type ? { name: f.name, type: type.toLowerCase() } : { name: f.name };
            });
            dateColumns = fields.map((f) => DATETIME_TYPES.has(f.type ?? -1));
            jsonColumns = fields.map((f) => f.type === JSON_TYPE);
          });
          query.on("result", (row: unknown) => {
            if (truncated) return;
            if (!Array.isArray(row)) return; // a statement without rows (its OK packet)
            if (rows.length >= limit || full) return stop();
            const values = row.map((v, i) => {
              if (typeof v !== "string") return jsonSafe(v);
              if (dateColumns[i]) return isoLocal(v);
              return jsonSafe(jsonColumns[i] ? jsonColumnValue(v) : v);
            });
            rows.push(values);
            full = !budget.take(values);
          });
          query.on("error", (error: unknown) => {
            if (!truncated) reject(error);
          });
          query.on("end", () => {
            if (!truncated) resolve({ columns, rows, truncated });
          });
        });
      },
      request.sql,
    );
    return queryResult(started, outcome);
  }

  async schema(request: SchemaRequest): Promise<SchemaTable[]> {
    return this.#session(request.signal, request.timeoutMs, async (connection) => {
      const params: string[] = [];
      let where =
        "c.TABLE_SCHEMA = COALESCE(DATABASE(), c.TABLE_SCHEMA) AND c.TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')";
      if (request.table) {
        const dot = request.table.indexOf(".");
        if (dot > 0) {
          where = "c.TABLE_SCHEMA = ? AND c.TABLE_NAME = ?";
          params.push(request.table.slice(0, dot), request.table.slice(dot + 1));
        } else {
          where += " AND c.TABLE_NAME = ?";
          params.push(request.table);
        }
      }
      const rows = await run<{ s: string; t: string; c: string; type: string; n: string; e: string | null }>(
        connection,
        `SELECT c.TABLE_SCHEMA AS s, c.TABLE_NAME AS t, c.COLUMN_NAME AS c, c.COLUMN_TYPE AS type,
                c.IS_NULLABLE AS n, tb.TABLE_ROWS AS e
         FROM information_schema.COLUMNS c
         JOIN information_schema.TABLES tb ON tb.TABLE_SCHEMA = c.TABLE_SCHEMA AND tb.TABLE_NAME = c.TABLE_NAME
         WHERE ${where}
         ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION
         LIMIT 20000`,
        params,
      );
      const tables = new Map<string, SchemaTable>();
      for (const r of rows) {
        const key = `${r.s}.${r.t}`;
        let table = tables.get(key);
        if (!table) {
          table = { name: r.t, schema: r.s, columns: [] };
          if (r.e !== null && r.e !== undefined) table.rowEstimate = Number(r.e);
          tables.set(key, table);
        }
        table.columns.push({ name: r.c, type: r.type, nullable: r.n === "YES" });
      }
      if (request.table) {
        for (const table of tables.values()) {
          const stats = await run<{ name: string; col: string; nonUnique: number | string }>(
            connection,
            `SELECT INDEX_NAME AS name, COLUMN_NAME AS col, NON_UNIQUE AS nonUnique FROM information_schema.STATISTICS
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
            [table.schema, table.name],
          );
          const indexes = new Map<string, { name: string; columns: string[]; unique: boolean }>();
          for (const s of stats) {
            const index = indexes.get(s.name) ?? { name: s.name, columns: [], unique: Number(s.nonUnique) === 0 };
            index.columns.push(s.col);
            indexes.set(s.name, index);
          }
          table.indexes = [...indexes.values()];
          const keys = await run<{ name: string; col: string; rs: string; rt: string; rc: string }>(
            connection,
            `SELECT CONSTRAINT_NAME AS name, COLUMN_NAME AS col, REFERENCED_TABLE_SCHEMA AS rs,
                    REFERENCED_TABLE_NAME AS rt, REFERENCED_COLUMN_NAME AS rc
             FROM information_schema.KEY_COLUMN_USAGE
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND REFERENCED_TABLE_NAME IS NOT NULL
             ORDER BY CONSTRAINT_NAME, ORDINAL_POSITION`,
            [table.schema, table.name],
          );
          const foreign = new Map<string, NonNullable<SchemaTable["foreignKeys"]>[number]>();
          for (const k of keys) {
            const fk = foreign.get(k.name) ?? {
              name: k.name,
              columns: [],
              referencedTable: k.rs === table.schema ? k.rt : `${k.rs}.${k.rt}`,
              referencedColumns: [],
            };
            fk.columns.push(k.col);
            fk.referencedColumns.push(k.rc);
            foreign.set(k.name, fk);
          }
          table.foreignKeys = [...foreign.values()];
        }
      }
      return [...tables.values()];
    });
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    this.#checked.forget();
    if (pool) await new Promise<void>((resolve) => pool.end(() => resolve()));
  }
}

/**
 * A parameter as mysql2 binds it: an object or array as its JSON text (mysql2 would otherwise expand an array into a
 * list and an object into `key = value` pairs); anything else unchanged.
 */
function bindValue(value: unknown): unknown {
  return value !== null && typeof value === "object" ? JSON.stringify(value) : value;
}

/**
 * The `?` value placeholders mysql2 fills in `sql` (outside strings, quoted names and comments), counting up to one
 * past `given`: mysql2's own formatter is run with values that count themselves.
 */
function placeholderCount(sql: string, given: number): number {
  let filled = 0;
  const counters = Array.from({ length: given + 1 }, () => ({
    toSqlString: () => {
      filled += 1;
      return "NULL";
    },
  }));
  mysql.format(sql, counters);
  return filled;
}

/**
 * Whether a syntax error (1064) points at a second statement: the server quotes the text from where it stopped
 * ("… near 'SELECT 2' at line 1"), and in the caller's SQL that text follows a `;`. Any other syntax error is the
 * statement's own, and the model needs the server's words for it.
 */
function startsSecondStatement(sql: string, message: string): boolean {
  const near = /near '([\s\S]*)' at line \d+/.exec(message)?.[1];
  if (!near) return false;
  // The server quotes at most about 80 characters of what follows; look for where that text starts.
  for (let at = sql.indexOf(near); at >= 0; at = sql.indexOf(near, at + 1)) {
    if (sql.slice(0, at).trimEnd().endsWith(";")) return true;
  }
  return false;
}
