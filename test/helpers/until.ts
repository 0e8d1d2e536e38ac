import { setTimeout as sleep } from "node:timers/promises";

/**
 * The suite's one polling helper: a test waits for an observable state, never for a fixed time.
 *
 * `until(check, what)` calls `check` (sync or async) every `intervalMs` (default 10 ms) until it returns a value
 * `accept` takes (default: any truthy value), and returns that value. After `timeoutMs` (default 10 s) it throws an Error naming `what` and the last
 * value seen; `giveUp` (optional) is asked on every round and ends the wait at once with its message (a process
 * that exited, say). A check that throws ends the wait with that error. It waits on real time even while a test fakes
 * the global timers (`node:timers/promises` is not faked), so a call can be seen under way before a fake clock moves.
 */
export async function until<T>(
  check: () => T | Promise<T>,
  what: string,
  options: {
    accept?: (value: T) => boolean;
    timeoutMs?: number;
    intervalMs?: number;
    giveUp?: () => string | undefined;
  } = {},
): Promise<NonNullable<T>> {
  const { accept = (value: T) => Boolean(value), timeoutMs = 10_000, intervalMs = 10, giveUp } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (accept(value)) return value as NonNullable<T>;
    const reason = giveUp?.();
    if (reason !== undefined) throw new Error(`gave up waiting for ${what}: ${reason}`);
    if (Date.now() > deadline) {
      const seen = typeof value === "object" ? JSON.stringify(value) : String(value);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last seen: ${seen.slice(0, 200)})`);
    }
    await sleep(intervalMs);
  }
}
