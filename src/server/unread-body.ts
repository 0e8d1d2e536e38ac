/**
 * What happens to a request body the route answered without reading: a 413 judged on the declared Content-Length,
 * a 401 before the body. HTTP/1.1 keeps one connection for many requests, so the unread rest of the body still
 * stands between this answer and the client's next request on the same socket.
 *
 * The rest is read and discarded before the answer goes out, within caps; the connection then stays open for the
 * next request. A client that sends more than the caps allow (bytes, or a pause between chunks, or time overall)
 * gets its answer with `Connection: close` and the socket is ended, so no client is ever told "keep-alive" about a
 * socket the server is about to drop (its next request would be lost). Runs under Node only: other hosts pass no
 * `incoming` and manage their own connections.
 */
import type { IncomingMessage } from "node:http";
import type { Context, Next } from "hono";

/** The caps on discarding an unread request body: bytes, and milliseconds between chunks and overall. */
export const UNREAD_BODY_CAPS = { maxBytes: 64 * 1024 * 1024, idleMs: 1_000, totalMs: 10_000 } as const;

/** Hono middleware: after the route answered, discards what remains of its request body or ends the connection. */
export async function finishUnreadBody(c: Context, next: Next): Promise<void> {
  await next();
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (!incoming || incoming.complete || c.res.headers.get("connection") === "close") return;
  if (!(await discardRest(c.req.raw.body))) c.res.headers.set("connection", "close");
}

/**
 * Reads and drops the rest of a request body (the request's own stream: a limit a middleware wrapped around it
 * still applies). Resolves true once the body ended within {@link UNREAD_BODY_CAPS}; false when a cap was reached,
 * the stream failed, or another reader holds it (the caller then ends the connection).
 */
async function discardRest(body: ReadableStream<Uint8Array> | null): Promise<boolean> {
  if (!body || body.locked) return false;
  const reader = body.getReader();
  const deadline = Date.now() + UNREAD_BODY_CAPS.totalMs;
  let bytes = 0;
  let timer: NodeJS.Timeout | undefined;
  try {
    for (;;) {
      const wait = Math.min(UNREAD_BODY_CAPS.idleMs, deadline - Date.now());
      const stalled = new Promise<"stalled">((resolve) => {
        timer = setTimeout(() => resolve("stalled"), Math.max(0, wait));
      });
      const chunk = await Promise.race([reader.read(), stalled]);
      clearTimeout(timer);
      if (chunk === "stalled") return false;
      if (chunk.done) return true;
      bytes += chunk.value.byteLength;
      if (bytes > UNREAD_BODY_CAPS.maxBytes) return false;
    }
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  }
}

/**
 * Hono middleware: a request whose body has not fully arrived `ms` after its headers is answered 408
 * `request_timeout` with `Connection: close`, and the connection ends, whatever the route was doing with it (a
 * slow client holds nothing longer than that). Node's own `requestTimeout` cannot do this: it is checked only every
 * `connectionsCheckingInterval` (30 s) and is lifted to `headersTimeout` when that is larger, so the deadline has its
 * own timer here. The route's own answer, if it comes later, goes nowhere. Runs under Node only (it needs `incoming`).
 */
export function bodyDeadline(ms: number) {
  return async (c: Context, next: Next): Promise<void> => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const declared = incoming?.headers["content-length"];
    const hasBody =
      (declared !== undefined && declared !== "0") || incoming?.headers["transfer-encoding"] !== undefined;
    if (!incoming || incoming.complete || !hasBody) return next();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<"expired">((resolve) => {
      timer = setTimeout(() => resolve("expired"), ms);
    });
    const arrived = () => clearTimeout(timer);
    incoming.once("end", arrived);
    incoming.once("close", arrived);
    const handled = next().then(() => "handled" as const);
    try {
      if ((await Promise.race([handled, expired])) === "handled" || incoming.complete) {
        await handled;
        return;
      }
    } finally {
      clearTimeout(timer);
      incoming.off("end", arrived);
      incoming.off("close", arrived);
    }
    // The route still waits for the body: its eventual answer or failure is dropped.
    handled.catch(() => {});
    const seconds = ms / 1000;
    c.res = c.json(
      {
        error: {
          code: "request_timeout",
          message: `The request body did not arrive within ${seconds} s of its headers (TOOLHOST_BODY_TIMEOUT_SECONDS); send it whole and promptly.`,
        },
      },
      408,
      { connection: "close" },
    );
  };
}
