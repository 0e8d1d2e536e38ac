/**
 * MCP over Streamable HTTP (`/mcp` on the HTTP service), served statelessly by the SDK's `createMcpHandler`: a
 * fresh server instance per request, both protocol eras (2025 clients through the stateless compatibility path,
 * 2026-07-28 clients natively). `GET` and `DELETE` answer 405, since a stateless endpoint offers no standalone
 * stream and no session to end; 2026-07-28 clients get change notifications on their `subscriptions/listen`
 * stream instead.
 *
 * Cancellation works across instances: every running call is tracked per authenticated caller (user and token)
 * and request id, so a 2025-style `notifications/cancelled`, which arrives on a request of its own and thus at a
 * fresh instance, aborts the call it names. A dropped connection (and a 2026-07-28 client closing its response
 * stream) aborts the call through the request's signal.
 */

import { createHash } from "node:crypto";
import type { McpHttpHandler } from "@modelcontextprotocol/server";
import type { ApprovalService } from "../../app/approvals/service.js";
import type { SignalBus } from "../../app/signals.js";
import type { ToolRuntime } from "../../core/runtime.js";
import type { Logger } from "../../core/types.js";

let serverSdk:
  | Promise<{
      createMcpHandler: typeof import("@modelcontextprotocol/server").createMcpHandler;
      createMcpServer: typeof import("./tool-server.js").createMcpServer;
      MCP_STATELESS_DENY_RESPONDER: typeof import("./tool-server.js").MCP_STATELESS_DENY_RESPONDER;
    }>
  | undefined;
/**
 * The MCP server SDK and Toolhost's tool server, loaded on the first `/mcp` request: an HTTP service nobody reaches
 * over MCP never loads them.
 */
function loadServerSdk() {
  serverSdk ??= Promise.all([import("@modelcontextprotocol/server"), import("./tool-server.js")]).then(
    ([sdk, toolServer]) => ({
      createMcpHandler: sdk.createMcpHandler,
      createMcpServer: toolServer.createMcpServer,
      MCP_STATELESS_DENY_RESPONDER: toolServer.MCP_STATELESS_DENY_RESPONDER,
    }),
  );
  return serverSdk;
}

/** The request header through which an HTTP client binds a working directory to its connection. */
export const WORKING_DIRECTORY_HEADER = "Toolhost-Working-Directory";

/** Who a request acts for (after bearer authentication) and the directory it bound. */
export interface McpHttpCaller {
  userId: string;
  /** The bearer token (only its digest is kept, to tell one client's request ids from another's). */
  token: string;
  workingDirectory: string | null;
  /**
   * Watches the bearer token while the request is served: calls `onInvalid` once it stops working (revoked, rotated,
   * expired) and returns the function that ends the watch. The request then stops as a dropped connection does (its
   * calls are aborted) and its response ends.
   */
  watchToken?: (onInvalid: () => void) => () => void;
}

interface CallerExtra {
  userId: string;
  tokenKey: string;
  workingDirectory: string | null;
  [key: string]: unknown;
}

/** One running call: its controller, and how a cancellation ends it (see trackCall in #createHandler). */
interface InFlightCall {
  controller: AbortController;
  cancel(reason?: Error): void;
}

const BINDING_HINT = `Bind a working directory by sending the ${WORKING_DIRECTORY_HEADER} header with every request (a directory within the server's chat roots; admins may bind any directory when no roots are configured).`;

/** The Streamable HTTP endpoint: one SDK handler per user (so change notifications reach only that user). */
export class McpHttpEndpoint {
  readonly #runtime: ToolRuntime;
  readonly #logger: Logger | undefined;
  readonly #handlers = new Map<string, Promise<McpHttpHandler>>();
  /**
   * Running calls by caller and request id. A key may hold several: clients sharing a token each number their own
   * requests, and a cancellation naming the id reaches every one of them (none is left where no cancellation can).
   */
  readonly #inFlight = new Map<string, Set<InFlightCall>>();
  readonly #unsubscribe: () => void;

  readonly #approvals: ApprovalService | undefined;
  readonly #signals: SignalBus | undefined;
  /** In-flight keys by their hash (what a cancel signal carries: never the caller's request id itself). */
  readonly #byHash = new Map<string, string>();
  readonly #unsubscribeSignals: (() => void) | undefined;

  /**
   * `signals` (the instances' bus): a `notifications/cancelled` for a request that runs on another instance is
   * passed on to it, and one passed on by another instance cancels the call here.
   */
  readonly #maxBodyBytes: number | undefined;

  /**
   * `maxBodyBytes`: the largest request body the SDK reads (the server's TOOLHOST_MAX_BODY_BYTES, so one limit holds
   * on every route); absent: the SDK's own (4 MiB).
   */
  constructor(
    runtime: ToolRuntime,
    logger?: Logger,
    approvals?: ApprovalService,
    signals?: SignalBus,
    maxBodyBytes?: number,
  ) {
    this.#maxBodyBytes = maxBodyBytes;
    this.#runtime = runtime;
    this.#approvals = approvals;
    this.#logger = logger;
    this.#signals = signals;
    this.#unsubscribeSignals = signals?.subscribe((signal) => {
      if (signal.kind !== "mcp_cancel") return;
      const key = this.#byHash.get(signal.target);
      if (key) this.#cancel(key, new Error("Cancelled by the client."));
    });
    const notify = (handler: Promise<McpHttpHandler> | undefined) =>
      void handler?.then(
        (h) => h.notify.toolsChanged(),
        () => {},
      );
    this.#unsubscribe = runtime.registry.changes.subscribe((userId) => {
      if (userId === null) for (const handler of this.#handlers.values()) notify(handler);
      else notify(this.#handlers.get(userId));
    });
  }

  /** Number of tool calls running through this endpoint (for tests and diagnostics). */
  get inFlight(): number {
    let count = 0;
    for (const calls of this.#inFlight.values()) count += calls.size;
    return count;
  }

  /** Cancels every running call tracked under `key`; returns whether there was one. */
  #cancel(key: string, reason?: Error): boolean {
    const calls = this.#inFlight.get(key);
    if (!calls || calls.size === 0) return false;
    for (const call of [...calls]) call.cancel(reason);
    return true;
  }

  /** Serves one HTTP request for an authenticated caller. */
  async handle(request: Request, caller: McpHttpCaller): Promise<Response> {
    const refusal = await batchRefusal(request);
    if (refusal) return refusal;
    const extra: CallerExtra = {
      userId: caller.userId,
      tokenKey: createHash("sha256").update(caller.token).digest("hex").slice(0, 24),
      workingDirectory: caller.workingDirectory,
    };
    const handler = await this.#handlerFor(caller.userId);
    const invalid = new AbortController();
    const unwatch = caller.watchToken?.(() => invalid.abort());
    if (!unwatch) {
      return handler.fetch(request, {
        authInfo: { token: extra.tokenKey, clientId: caller.userId, scopes: [], extra },
      });
    }
    try {
      const watched = new Request(request, { signal: AbortSignal.any([request.signal, invalid.signal]) });
      const response = await handler.fetch(watched, {
        authInfo: { token: extra.tokenKey, clientId: caller.userId, scopes: [], extra },
      });
      return endsWhen(response, invalid.signal, unwatch);
    } catch (error) {
      unwatch();
      throw error;
    }
  }

  /** Aborts every running call and closes the handlers. */
  async close(): Promise<void> {
    this.#unsubscribe();
    this.#unsubscribeSignals?.();
    for (const calls of this.#inFlight.values()) for (const { controller } of calls) controller.abort();
    await Promise.allSettled([...this.#handlers.values()].map(async (h) => (await h).close()));
    this.#handlers.clear();
  }

  #key(extra: CallerExtra, requestId: unknown): string {
    return JSON.stringify([extra.userId, extra.tokenKey, requestId]);
  }

  #hash(key: string): string {
    return createHash("sha256").update(key).digest("hex").slice(0, 32);
  }

  #handlerFor(userId: string): Promise<McpHttpHandler> {
    let handler = this.#handlers.get(userId);
    if (!handler) {
      handler = this.#createHandler(userId);
      this.#handlers.set(userId, handler);
      // A failed load is not kept: the next request tries again.
      handler.catch(() => {
        if (this.#handlers.get(userId) === handler) this.#handlers.delete(userId);
      });
    }
    return handler;
  }

  async #createHandler(userId: string): Promise<McpHttpHandler> {
    const { createMcpHandler, createMcpServer, MCP_STATELESS_DENY_RESPONDER } = await loadServerSdk();
    return createMcpHandler(
      ({ era, authInfo }) => {
        const extra = authInfo?.extra as CallerExtra | undefined;
        if (!extra || extra.userId !== userId) throw new Error("MCP request without an authenticated caller");
        const server = createMcpServer({
          runtime: this.#runtime,
          ...(this.#approvals ? { approvals: this.#approvals } : {}),
          // A 2025-era request cannot be asked here (its initialize went to another instance): refused, saying so.
          ...(era === "legacy" ? { approvalResponder: MCP_STATELESS_DENY_RESPONDER } : {}),
          userId,
          workingDirectory: extra.workingDirectory,
          bindingHint: BINDING_HINT,
          trackCall: (requestId, controller) => {
            const key = this.#key(extra, requestId);
            const entry: InFlightCall = {
              controller,
              // A cancelled request gets no response (the specification: the receiver should not answer one):
              // closing this request's server instance aborts the SDK's own handling of it, so the result the
              // aborted call still produces is dropped, and ends the request's response stream without an answer.
              cancel: (reason?: Error) => {
                controller.abort(reason);
                void server.close().catch(() => {});
              },
            };
            const calls = this.#inFlight.get(key) ?? new Set<InFlightCall>();
            this.#inFlight.set(key, calls);
            calls.add(entry);
            const hash = this.#hash(key);
            this.#byHash.set(hash, key);
            return () => {
              const tracked = this.#inFlight.get(key);
              if (!tracked?.delete(entry) || tracked.size > 0) return;
              this.#inFlight.delete(key);
              this.#byHash.delete(hash);
            };
          },
        });
        if (era === "legacy") {
          // A 2025-era cancellation arrives on its own POST, i.e. at this fresh instance: abort the call it names.
          server.setNotificationHandler("notifications/cancelled", (notification) => {
            const key = this.#key(extra, notification.params.requestId);
            const reason = notification.params.reason;
            const cancelled = this.#cancel(key, reason === undefined ? undefined : new Error(String(reason)));
            // The call may run on another instance (the load balancer sent its request there): tell them all.
            if (!cancelled) void this.#signals?.publish("mcp_cancel", this.#hash(key));
          });
        }
        return server;
      },
      {
        onerror: (error) => this.#logger?.debug({ err: error.message }, "mcp http"),
        ...(this.#maxBodyBytes !== undefined ? { maxRequestBodySize: this.#maxBodyBytes } : {}),
      },
    );
  }
}

/**
 * The response, its body ending early when `stop` aborts (the caller's token stopped working); `done` is called
 * once the body has ended, however it ended.
 */
function endsWhen(response: Response, stop: AbortSignal, done: () => void): Response {
  const body = response.body;
  if (!body) {
    done();
    return response;
  }
  let end: (() => void) | undefined;
  const piped = new TransformStream<Uint8Array, Uint8Array>({
    start(controller) {
      end = () => {
        try {
          controller.terminate();
        } catch {
          // Already ended.
        }
      };
    },
  });
  const onStop = () => end?.();
  if (stop.aborted) onStop();
  else stop.addEventListener("abort", onStop, { once: true });
  void body
    .pipeTo(piped.writable)
    .catch(() => {})
    .finally(() => {
      stop.removeEventListener("abort", onStop);
      done();
    });
  return new Response(piped.readable, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** The first protocol revision without JSON-RPC batches (2025-03-26 had them; stdio refuses them for every one). */
const FIRST_REVISION_WITHOUT_BATCHES = "2025-06-18";

/**
 * The answer to a POST whose body is a JSON-RPC batch under a revision that has none (the `MCP-Protocol-Version`
 * header names 2025-06-18 or later): `-32600`, as stdio answers a batch; undefined for anything else. The SDK's
 * handler serves such a batch as legacy traffic, which is right only for a 2025-03-26 client.
 */
async function batchRefusal(request: Request): Promise<Response | undefined> {
  const revision = request.headers.get("mcp-protocol-version");
  if (request.method !== "POST" || !revision || revision < FIRST_REVISION_WITHOUT_BATCHES) return undefined;
  if (!(await startsWithBracket(request))) return undefined;
  const message = `Invalid request: JSON-RPC batches are not part of MCP ${revision} (they were removed in ${FIRST_REVISION_WITHOUT_BATCHES}); send one message per request.`;
  return Response.json({ jsonrpc: "2.0", id: null, error: { code: -32600, message } }, { status: 400 });
}

/** Whether the body's first character after whitespace is "[" (read from a copy, only as far as that character). */
async function startsWithBracket(request: Request): Promise<boolean> {
  const reader = request.clone().body?.getReader();
  if (!reader) return false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return false;
      for (const byte of value) {
        // JSON's whitespace: space, tab, line feed, carriage return.
        if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
        return byte === 0x5b;
      }
    }
  } finally {
    void reader.cancel().catch(() => {});
  }
}

/**
 * The OAuth 2.0 protected-resource metadata (RFC 9728) of the `/mcp` resource. Honest about what Toolhost does:
 * bearer tokens in the Authorization header, issued by the operator (`toolhost token create`); no authorization
 * server is advertised, since Toolhost runs none.
 */
export function protectedResourceMetadata(origin: string): Record<string, unknown> {
  return {
    resource: `${origin}/mcp`,
    resource_name: "Toolhost MCP server",
    bearer_methods_supported: ["header"],
    authorization_servers: [],
    scopes_supported: [],
    token_issuance:
      "Bearer tokens are issued by the server's operator (`toolhost token create --user NAME`); there is no OAuth authorization server. Send one as `Authorization: Bearer <token>`.",
  };
}
