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

/** How long a write that must not be lost (a finished turn) is tried again while the database is unreachable, in ms. */
export const UNAVAILABLE_RETRY_MS = 10_000;

/**
 * Runs `work`, and again after a growing pause (100 ms up to 1 s) while it fails because the database is
 * unreachable ({@link isDatabaseUnavailable}: a restart, a failover, a cut connection), for up to `forMs`; then
 * throws its last error. Any other error is thrown at once. Only for work that is safe to repeat: a fenced write
 * whose first attempt did commit finds its fence moved on and stores nothing the second time.
 */
export async function retryWhileUnavailable<T>(work: () => Promise<T>, forMs = UNAVAILABLE_RETRY_MS): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let pause = 100; ; pause = Math.min(1_000, pause * 2)) {
    try {
      return await work();
    } catch (error) {
      if (!isDatabaseUnavailable(error) || Date.now() + pause > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
