/**
 * What the SQL drivers share: JSON-safe values (bigints and exact numerics as strings, dates as ISO-8601 text,
 * bytes as base64), the classified errors they throw (never carrying the source's URL or password), and the cancel
 * plumbing between a call's signal and a statement running on the server.
 */
import {
  AccessDeniedError,
  ToolAbortedError,
  ToolArgumentError,
  ToolError,
  ToolExecutionError,
  ToolTimeoutError,
} from "../../core/errors.js";
import { setOwn } from "../../core/json-schema.js";
import { scrubSecret } from "./sources.js";
import type { QueryColumn, QueryResult } from "./types.js";

/** Connections opened per source at most (each call holds one while it runs). */
export const POOL_SIZE = 3;
/** How long a connection attempt may take before the source counts as unreachable. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** How long an unused pooled connection stays open. */
export const IDLE_CLOSE_MS = 30_000;

/**
 * Most characters one value of a result carries: a text's characters, a blob's base64, a JSON value's text. A longer
 * value is cut there and ends with a marker saying how long it was (cutValueText), so one `repeat('x', 200000000)`
 * neither fills the result nor holds the server while it is serialized and spilled.
 */
export const VALUE_MAX_CHARS = 65_536;
/** Most bytes of a blob kept (their base64 is VALUE_MAX_CHARS characters). */
export const VALUE_MAX_BYTES = (VALUE_MAX_CHARS / 4) * 3;
/** Most characters of values in one result: past them the rest of the rows are left unread (`truncated`). */
export const RESULT_MAX_CHARS = 4_194_304;
/**
 * Most bytes one row may take on the wire where the driver lets Toolhost see a row's size before it is read whole
 * (PostgreSQL): a longer row fails its call (`validation_failed`, select a part of it) instead of being buffered
 * whole, only to be cut to VALUE_MAX_CHARS per value. On MySQL and MariaDB the server's max_allowed_packet bounds rows.
 */
export const ROW_MAX_BYTES = 64 * 1024 * 1024;

/** The kept start of a cut value and its marker. Plain JavaScript: the SQLite worker's program embeds its source. */
export function cutValueText(kept: string, total: number, unit: string): string {
  return `${kept}…[cut: ${total} ${unit} in all]`;
}

/** A text value, cut at VALUE_MAX_CHARS. */
export function cutText(text: string): string {
  return text.length > VALUE_MAX_CHARS ? cutValueText(text.slice(0, VALUE_MAX_CHARS), text.length, "characters") : text;
}

/** A blob as base64, cut at VALUE_MAX_BYTES before it is encoded. */
export function blobText(bytes: Uint8Array): string {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return buffer.length > VALUE_MAX_BYTES
    ? cutValueText(buffer.subarray(0, VALUE_MAX_BYTES).toString("base64"), buffer.length, "bytes")
    : buffer.toString("base64");
}

/**
 * The characters a result's rows may still take (RESULT_MAX_CHARS in all): `take(row)` counts one row's values
 * (texts by their length, structured values by their JSON text, others as a few characters) and says whether the
 * result has room for more rows.
 */
export class ResultBudget {
  #left = RESULT_MAX_CHARS;

  /** Counts `row` (already JSON-safe); false once the result is full: the caller stops reading rows. */
  take(row: readonly unknown[]): boolean {
    for (const value of row) {
      this.#left -=
        typeof value === "string" ? value.length : value !== null && typeof value === "object" ? jsonLength(value) : 8;
    }
    return this.#left > 0;
  }
}

function jsonLength(value: object): number {
  try {
    return JSON.stringify(value).length;
  } catch {
    return 8;
  }
}

/**
 * A value a driver returned, made JSON-safe. Strings, numbers, booleans and null pass through; a text or blob
 * longer than VALUE_MAX_CHARS is cut (cutText, blobText), and so is a structured value whose JSON text is: it
 * becomes that text, cut.
 */
export function jsonSafe(value: unknown): unknown {
  const safe = jsonSafeValue(value);
  if (safe !== null && typeof safe === "object") {
    const text = JSON.stringify(safe);
    if (text.length > VALUE_MAX_CHARS) return cutText(text);
  }
  return safe;
}

function jsonSafeValue(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case "string":
      return cutText(value);
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "bigint":
      return value.toString();
    default:
      break;
  }
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (value instanceof Uint8Array) return blobText(value);
  if (Array.isArray(value)) return value.map(jsonSafeValue);
  if (typeof value === "object") {
    const out: Record<string, unknown> = {};
    // A column named "__proto__" stays a column (setOwn), not the row's prototype.
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) setOwn(out, k, jsonSafeValue(v));
    return out;
  }
  return String(value);
}

/**
 * Deepest nesting of arrays and objects a JSON column's value keeps as JSON; a deeper one comes back as its text.
 * Results pass through recursive code (serialization, audit, providers) that a value thousands of levels deep
 * would overflow.
 */
export const VALUE_MAX_JSON_DEPTH = 32;

/**
 * A JSON column's text as JSON data, or the text itself when parsing would change it: a value nested deeper than
 * VALUE_MAX_JSON_DEPTH, a number a double does not hold exactly (an integer past 2^53, more than 15 significant
 * digits, or out of range: JSON.parse would round it, or make it Infinity and then null), or text that is not JSON.
 */
export function jsonColumnValue(text: string): unknown {
  return jsonTextIsExact(text) ? parseOrText(text) : text;
}

function parseOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function jsonTextIsExact(text: string): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x22 /* " */) {
      // To the closing quote: one preceded by an odd number of backslashes is escaped.
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i < 0) return true; // not JSON: parseOrText keeps the text
        let backslashes = 0;
        while (text.charCodeAt(i - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
      }
    } else if (ch === 0x5b /* [ */ || ch === 0x7b /* { */) {
      if (++depth > VALUE_MAX_JSON_DEPTH) return false;
    } else if (ch === 0x5d /* ] */ || ch === 0x7d /* } */) {
      depth--;
    } else if (ch === 0x2d /* - */ || (ch >= 0x30 && ch <= 0x39)) {
      let end = i + 1;
      while (end < text.length && /[0-9.eE+-]/.test(text[end] ?? "")) end++;
      const token = text.slice(i, end);
      const mantissa = token.replace(/^-/, "").split(/[eE]/)[0] ?? "";
      const digits = mantissa.replace(".", "").replace(/^0+/, "").replace(/0+$/, "");
      const value = Number(token);
      if (digits.length > 15 || !Number.isFinite(value) || (value === 0 && digits.length > 0)) return false;
      i = end - 1;
    }
  }
  return true;
}

/** `2024-05-01 10:20:30.5` (a database's zone-less datetime text) as `2024-05-01T10:20:30.5`. */
export function isoLocal(text: string): string {
  return text.replace(/^(\d{4,}-\d\d-\d\d) (\d)/, "$1T$2");
}

/** The error for a write (or a privilege) the read-only session refused. */
export function readOnlyRefusal(source: string, detail: string): AccessDeniedError {
  return new AccessDeniedError(
    `Data source "${source}" is read-only for this tool: the database refused the statement (${detail}). Nothing was changed; only reading statements run here.`,
    { rule: "read_only", source },
  );
}

/** The error for SQL the database rejected (syntax, unknown table, wrong parameter count…). */
export function sqlRejected(source: string, detail: string, details: Record<string, unknown> = {}): ToolArgumentError {
  return new ToolArgumentError(`Data source "${source}" rejected the SQL: ${detail}`, {
    argument: "sql",
    source,
    ...details,
  });
}

/** The error for a result row too large to read (past ROW_MAX_BYTES, or the longest string JavaScript holds). */
export function valueTooLarge(source: string, error: unknown): ToolArgumentError {
  const reason = error instanceof Error ? error.message : String(error);
  return new ToolArgumentError(
    `Data source "${source}" returned a row too large to read (${reason.slice(0, 200)}). Select a part of its values instead: substr(column, 1, ${VALUE_MAX_CHARS}), length(column), or fewer columns.`,
    { argument: "sql", source },
  );
}

/** The error for more than one statement in one call. */
export function severalStatements(source: string): ToolArgumentError {
  return new ToolArgumentError(
    `Data source "${source}" runs one SQL statement per call; send each statement in its own call.`,
    { argument: "sql", source },
  );
}

/** The error for a source that cannot be reached; names the source and the failure, never the URL. */
export function unreachable(source: string, url: string, error: unknown): ToolExecutionError {
  const code = (error as { code?: string })?.code;
  const raw = error instanceof Error ? error.message : String(error);
  const reason = scrubSecret(raw || code || "connection failed", url).slice(0, 300);
  return new ToolExecutionError(
    `Data source "${source}" is unreachable: ${reason}. Check that its server is running and the source's address and credentials are right (toolhost data-sources test ${source}).`,
    { source, ...(code ? { cause: code } : {}) },
  );
}

/**
 * A connection the database server ended while a statement ran on it (a restart, a failover, an administrator's
 * terminate or KILL): the call fails at once, and nothing was written (every session is read-only).
 */
export function connectionLost(source: string, url: string, error: unknown): ToolExecutionError {
  const raw = error instanceof Error ? error.message : String(error);
  const reason = scrubSecret(raw, url).slice(0, 300);
  return new ToolExecutionError(
    `Data source "${source}" lost its connection while the statement ran (${reason}): the database server ended it. Nothing was changed; the next call opens a new connection, so run it again unless the statement is what the server stopped.`,
    { source, cause: "connection_lost" },
  );
}

/** The classified error a call's abort stands for (its signal's reason, or a plain cancel). */
export function abortError(signal: AbortSignal, source: string, timeoutMs: number): ToolError {
  const reason = signal.reason;
  if (reason instanceof ToolError) return reason;
  if (reason === "timeout") return statementTimeout(source, timeoutMs);
  return new ToolAbortedError(`The query on data source "${source}" was cancelled; it was stopped on the server.`);
}

/** The error for a statement the server stopped at its statement timeout. */
export function statementTimeout(source: string, timeoutMs: number): ToolTimeoutError {
  return new ToolTimeoutError(
    `The query on data source "${source}" ran past its ${Math.round(timeoutMs / 1000)}s budget and was stopped on the server. Narrow it (a WHERE clause, a LIMIT), or raise timeoutSeconds in the tool settings.`,
    { source, budgetMs: timeoutMs },
  );
}

/** Any other failure of a source, with the password scrubbed from the message. */
export function sourceFailure(source: string, url: string, error: unknown): ToolError {
  if (error instanceof ToolError) return error;
  const message = scrubSecret(error instanceof Error ? error.message : String(error), url).slice(0, 500);
  return new ToolExecutionError(`Data source "${source}" failed: ${message}`, { source });
}

/**
 * A statement's QueryResult: `rowCount` is the number of rows returned (at most maxRows), `durationMs` the whole
 * milliseconds from `started` (a `performance.now()` reading taken when the call began) until now.
 */
export function queryResult(
  started: number,
  outcome: { columns: QueryColumn[]; rows: unknown[][]; truncated: boolean },
): QueryResult {
  return {
    columns: outcome.columns,
    rows: outcome.rows,
    rowCount: outcome.rows.length,
    truncated: outcome.truncated,
    durationMs: Math.round(performance.now() - started),
  };
}

/**
 * The check of a source's account (a role or grants that could bypass a read-only transaction), run once per driver
 * and shared by the calls that meet it under way; forgotten when it fails (or the driver closes), so the next
 * connection runs it again.
 */
export class AccountCheck<T> {
  #result: Promise<T> | undefined;

  /** The check's result: the one held, else `check()`'s (held until it rejects). Rejects as `check` does. */
  run(check: () => Promise<T>): Promise<T> {
    this.#result ??= check().catch((error) => {
      this.#result = undefined;
      throw error;
    });
    return this.#result;
  }

  /** Drops the held result: the next run checks again. */
  forget(): void {
    this.#result = undefined;
  }
}
