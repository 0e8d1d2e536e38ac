/**
 * Whether an error means the database could not be reached, as opposed to a fault of the request: the server turns
 * it into 503 `database_unavailable` (the database restarting, failing over, or down) instead of a 500.
 */

/** Socket errors of a connection that could not be made or was cut. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
]);

/** PostgreSQL SQLSTATEs of an unreachable or stopping server: class 08 (connection exception) and 57P01–57P03. */
function unavailableSqlState(code: string): boolean {
  return code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03";
}

/** What `pg` says about a connection that ended under a query, or a client that lost its connection. */
const PG_MESSAGES = /^(Connection terminated|Client has encountered a connection error|Client was closed)/;

/**
 * True when `error` (or an error in its `cause` chain, up to 5 deep) says the database server could not be reached
 * or dropped the connection: socket errors, PostgreSQL connection SQLSTATEs and shutdown codes, pg's own messages.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && (SOCKET_CODES.has(code) || unavailableSqlState(code))) return true;
    if (PG_MESSAGES.test(current.message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
