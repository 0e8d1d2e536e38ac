/**
 * The SQLite driver (`better-sqlite3`). better-sqlite3 runs a statement synchronously and cannot interrupt it, so
 * statements run in small child processes of this one (a pool of up to POOL_SIZE, reused while idle): a timeout or
 * cancel kills the process, which ends the statement for certain, and a long statement never blocks this process.
 *
 * Each call opens the file read-only (`readonly`, `fileMustExist`), sets `PRAGMA query_only`, prepares the SQL —
 * better-sqlite3 refuses a string with a second statement — and runs it only when SQLite itself reports the
 * statement read-only (`sqlite3_stmt_readonly`: a read-only connection still lets `VACUUM INTO` write a new file;
 * an EXPLAIN counts as its explained statement does). SQLite reports ATTACH and DETACH read-only, so every statement
 * but an EXPLAIN (which lists a program without running it) is refused when its program calls the internal
 * sqlite_attach or sqlite_detach function.
 * Rows are stepped one at a time and the statement is left after maxRows + 1. The connection is closed after the
 * call, so nothing (an ATTACH, a PRAGMA) carries over to the next one.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { ToolError } from "../../core/errors.js";
import {
  abortError,
  cutValueText,
  POOL_SIZE,
  queryResult,
  RESULT_MAX_CHARS,
  readOnlyRefusal,
  severalStatements,
  sourceFailure,
  sqlRejected,
  statementTimeout,
  unreachable,
  VALUE_MAX_BYTES,
  VALUE_MAX_CHARS,
} from "./common.js";
import type { DataDriver, QueryRequest, QueryResult, SchemaRequest, SchemaTable } from "./types.js";

/** The child's program (CommonJS, run with `node -e`; argv[1] is better-sqlite3's resolved path). */
const CHILD_SOURCE = String.raw`
const Database = require(process.argv[1]);
// The limits and the marker of a cut value are common.ts's, written in here.
const VALUE_MAX_CHARS = ${VALUE_MAX_CHARS}, VALUE_MAX_BYTES = ${VALUE_MAX_BYTES}, RESULT_MAX_CHARS = ${RESULT_MAX_CHARS};
const cutValueText = ${cutValueText.toString()};
const safe = (v) => {
  if (typeof v === "bigint") return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  if (Buffer.isBuffer(v)) {
    return v.length > VALUE_MAX_BYTES ? cutValueText(v.subarray(0, VALUE_MAX_BYTES).toString("base64"), v.length, "bytes") : v.toString("base64");
  }
  if (typeof v === "string" && v.length > VALUE_MAX_CHARS) return cutValueText(v.slice(0, VALUE_MAX_CHARS), v.length, "characters");
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  return v;
};
const bind = (v) => (typeof v === "boolean" ? (v ? 1 : 0) : v !== null && typeof v === "object" ? JSON.stringify(v) : v);
// The statement's first word, lower-cased, past whitespace and comments as SQLite's tokenizer skips them ("" if none).
function firstWord(sql) {
  let i = 0;
  for (;;) {
    while (i < sql.length && " \t\n\v\f\r".includes(sql[i])) i++;
    if (sql.startsWith("--", i)) { const end = sql.indexOf("\n", i); if (end < 0) return ""; i = end + 1; }
    else if (sql.startsWith("/*", i)) { const end = sql.indexOf("*/", i + 2); if (end < 0) return ""; i = end + 2; }
    else break;
  }
  const word = /^[A-Za-z_][A-Za-z0-9_$\u0080-\uffff]*/.exec(sql.slice(i));
  return word ? word[0].toLowerCase() : "";
}
// An EXPLAIN or EXPLAIN QUERY PLAN statement: it starts with EXPLAIN and lists a program or a plan, by its columns.
const EXPLAIN_COLUMNS = ["addr,opcode,p1,p2,p3,p4,p5,comment", "id,parent,notused,detail"];
const isExplain = (stmt, sql) =>
  firstWord(sql) === "explain" && stmt.reader && EXPLAIN_COLUMNS.includes(stmt.columns().map((c) => c.name).join(","));
// The opcode that runs ATTACH or DETACH: a call of the internal sqlite_attach or sqlite_detach function (p4 names it,
// with its argument count). A string constant's p4 is its text, which may name the functions too.
const attaches = (op) => /^(Function|PureFunc)0?$/.test(op.opcode) && /^sqlite_(attach|detach)\(/.test(String(op.p4));
function open(path) {
  let db;
  try { db = new Database(path, { readonly: true, fileMustExist: true }); }
  catch (e) { const err = new Error(e.message); err.kind = "unreachable"; throw err; }
  db.pragma("query_only = 1");
  return db;
}
function prepare(db, sql) {
  try { return db.prepare(sql); }
  catch (e) {
    const err = new Error(e.message);
    err.kind = /more than one statement/i.test(e.message) ? "several" : /readonly|read-only/i.test(e.message) ? "readonly" : "sql";
    throw err;
  }
}
function query(m) {
  const db = open(m.path);
  try {
    const stmt = prepare(db, m.sql);
    if (!stmt.readonly) { const err = new Error("SQLite reports the statement as one that writes"); err.kind = "readonly"; throw err; }
    const params = m.params.map(bind);
    // ATTACH counts as read-only to SQLite, but would open another file: the source is this one file. An EXPLAIN
    // lists a program without running it (and cannot be explained again): only other statements are checked.
    if (!isExplain(stmt, m.sql)) {
      const program = db.prepare("EXPLAIN " + m.sql).all(...params);
      if (program.some(attaches)) { const err = new Error("ATTACH and DETACH open other database files"); err.kind = "readonly"; throw err; }
    }
    if (!stmt.reader) { stmt.run(...params); return { columns: [], rows: [], truncated: false }; }
    stmt.raw(true); stmt.safeIntegers(true);
    const columns = stmt.columns().map((c) => (c.type ? { name: c.name, type: c.type } : { name: c.name }));
    // Rows stop at maxRows, or once their values pass RESULT_MAX_CHARS characters (common.ts's ResultBudget).
    const rows = []; let truncated = false; let left = RESULT_MAX_CHARS;
    for (const row of stmt.iterate(...params)) {
      if (rows.length >= m.maxRows || left <= 0) { truncated = true; break; }
      const values = row.map(safe);
      rows.push(values);
      for (const v of values) left -= typeof v === "string" ? v.length : 8;
    }
    return { columns, rows, truncated };
  } finally { db.close(); }
}
function schema(m) {
  const db = open(m.path);
  try {
    let list = db.prepare("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name").all().map((r) => r.name);
    if (m.table !== undefined) list = list.filter((n) => n === m.table);
    return list.map((name) => {
      const info = db.prepare("SELECT name, type, \"notnull\" AS nn, pk FROM pragma_table_info(?) ORDER BY cid").all(name);
      // A primary key never holds NULL in a WITHOUT ROWID table, nor as the rowid's alias (a lone INTEGER PRIMARY
      // KEY), whatever NOT NULL says; other primary keys of rowid tables may (SQLite's old quirk).
      const withoutRowid = db.prepare("SELECT wr FROM pragma_table_list WHERE name = ?").get(name)?.wr === 1;
      const keys = info.filter((c) => c.pk > 0).length;
      const columns = info.map((c) => ({
        name: c.name,
        type: c.type,
        nullable: c.nn === 0 && !(c.pk > 0 && (withoutRowid || (keys === 1 && String(c.type).toUpperCase() === "INTEGER"))),
      }));
      const table = { name, columns };
      if (m.table !== undefined) {
        table.indexes = db.prepare("SELECT name, \"unique\" AS u FROM pragma_index_list(?) ORDER BY name").all(name).map((i) => ({
          name: i.name,
          columns: db.prepare("SELECT name FROM pragma_index_info(?) ORDER BY seqno").all(i.name).map((c) => c.name),
          unique: i.u === 1,
        }));
        const fks = new Map();
        for (const f of db.prepare("SELECT id, \"table\" AS t, \"from\" AS f, \"to\" AS o FROM pragma_foreign_key_list(?) ORDER BY id, seq").all(name)) {
          const fk = fks.get(f.id) || { columns: [], referencedTable: f.t, referencedColumns: [] };
          fk.columns.push(f.f); fk.referencedColumns.push(f.o); fks.set(f.id, fk);
        }
        table.foreignKeys = [...fks.values()];
      }
      return table;
    });
  } finally { db.close(); }
}
function version(m) {
  const db = open(m.path);
  try { return db.prepare("SELECT sqlite_version() AS v").get().v; } finally { db.close(); }
}
process.on("message", (m) => {
  try {
    const result = m.op === "query" ? query(m) : m.op === "schema" ? schema(m) : version(m);
    process.send({ ok: true, result });
  } catch (e) {
    process.send({ ok: false, kind: e.kind || "failed", message: String(e.message) });
  }
});
`;

let betterSqlitePath: string | undefined;

interface ChildReply {
  ok: boolean;
  result?: unknown;
  kind?: string;
  message?: string;
}

/** One child process running one request at a time. */
class SqliteChild {
  readonly process: ChildProcess;
  #pending: ((reply: ChildReply | Error) => void) | undefined;
  dead = false;

  constructor() {
    betterSqlitePath ??= createRequire(import.meta.url).resolve("better-sqlite3");
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    this.process = spawn(process.execPath, ["-e", CHILD_SOURCE, betterSqlitePath], {
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      env,
    });
    this.process.on("message", (reply: ChildReply) => this.#settle(reply));
    this.process.on("exit", () => {
      this.dead = true;
      this.#settle(new Error("the SQLite worker process exited"));
    });
    this.process.on("error", (error) => {
      this.dead = true;
      this.#settle(error);
    });
    this.idle();
  }

  #settle(reply: ChildReply | Error): void {
    const pending = this.#pending;
    this.#pending = undefined;
    pending?.(reply);
  }

  /** Lets this process exit while the child waits for work. */
  idle(): void {
    this.process.unref();
    (this.process.channel as { unref?: () => void } | undefined)?.unref?.();
  }

  request(message: Record<string, unknown>): Promise<ChildReply> {
    this.process.ref();
    (this.process.channel as { ref?: () => void } | undefined)?.ref?.();
    return new Promise((resolve, reject) => {
      this.#pending = (reply) => (reply instanceof Error ? reject(reply) : resolve(reply));
      this.process.send(message, (error) => {
        if (error) this.#settle(error);
      });
    });
  }

  kill(): void {
    this.dead = true;
    this.process.kill("SIGKILL");
  }
}

/** Driver of one SQLite file. */
export class SqliteDriver implements DataDriver {
  readonly dialect = "sqlite" as const;
  readonly #idle: SqliteChild[] = [];
  readonly #busy = new Set<SqliteChild>();
  readonly #waiting: (() => void)[] = [];

  constructor(
    private readonly source: string,
    private readonly path: string,
  ) {}

  async #acquire(): Promise<SqliteChild> {
    for (;;) {
      const idle = this.#idle.pop();
      if (idle && !idle.dead) return idle;
      if (idle) continue;
      if (this.#busy.size < POOL_SIZE) return new SqliteChild();
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }

  #release(child: SqliteChild): void {
    this.#busy.delete(child);
    if (!child.dead) {
      child.idle();
      this.#idle.push(child);
    }
    this.#waiting.shift()?.();
  }

  /** Sends one request to a child; kills it at the timeout or on abort. */
  async #run<T>(message: Record<string, unknown>, signal: AbortSignal, timeoutMs: number): Promise<T> {
    if (signal.aborted) throw abortError(signal, this.source, timeoutMs);
    const child = await this.#acquire();
    this.#busy.add(child);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill();
    }, timeoutMs);
    const onAbort = () => child.kill();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const reply = await child.request({ ...message, path: this.path });
      if (reply.ok) return reply.result as T;
      const detail = String(reply.message ?? "").slice(0, 500);
      switch (reply.kind) {
        case "readonly":
          throw readOnlyRefusal(this.source, detail);
        case "several":
          throw severalStatements(this.source);
        case "sql":
          throw sqlRejected(this.source, detail);
        case "unreachable":
          throw unreachable(this.source, "", new Error(detail));
        default:
          if (/readonly|read-only|query_only/i.test(detail)) throw readOnlyRefusal(this.source, detail);
          throw sqlRejected(this.source, detail);
      }
    } catch (error) {
      if (signal.aborted) throw abortError(signal, this.source, timeoutMs);
      if (timedOut) throw statementTimeout(this.source, timeoutMs);
      throw error instanceof ToolError ? error : sourceFailure(this.source, "", error);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      this.#release(child);
    }
  }

  version(signal: AbortSignal): Promise<string> {
    return this.#run<string>({ op: "version" }, signal, 10_000);
  }

  async query(request: QueryRequest): Promise<QueryResult> {
    const started = performance.now();
    const result = await this.#run<Pick<QueryResult, "columns" | "rows" | "truncated">>(
      { op: "query", sql: request.sql, params: request.params, maxRows: request.maxRows },
      request.signal,
      request.timeoutMs,
    );
    return queryResult(started, result);
  }

  schema(request: SchemaRequest): Promise<SchemaTable[]> {
    return this.#run<SchemaTable[]>({ op: "schema", table: request.table }, request.signal, request.timeoutMs);
  }

  async close(): Promise<void> {
    for (const child of [...this.#idle, ...this.#busy]) child.kill();
    this.#idle.length = 0;
  }
}
