/**
 * Starts the HTTP service on a real socket (@hono/node-server). Binds 127.0.0.1 by default. On first start with
 * no token in the database it creates one for user `local` and prints it once, with the URL.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener, serve } from "@hono/node-server";
import { firstTokenUser } from "../app/admin.js";
import type { AppContext } from "../app/context.js";
import { createMcpClientManager } from "../mcp/client/index.js";
import { isLoopbackHost } from "../mcp/server/host-check.js";
import { createServerApp, type ServerAppOptions } from "./app.js";

/**
 * The HTTP service as a Node request listener, `(req, res) => void`, for a host that runs its own `node:http`
 * server (or a framework that accepts such a handler). Routes are answered at their absolute paths (`/api/…`,
 * `/mcp`, `/`). Unlike startServer it neither creates a first token, nor starts the approval sweeper, nor connects
 * the configured MCP servers: call `ctx.approvals.startSweeper()` yourself when the process should expire
 * unanswered asks, and pass `mcpClients` (started) to import the MCP servers' tools.
 */
export function createRequestListener(
  ctx: AppContext,
  options: ServerAppOptions = {},
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return getRequestListener(createServerApp(ctx, options).fetch);
}

/** A running server. */
export interface RunningServer {
  url: string;
  port: number;
  /** Closes the socket and every connection at once; the application context stays open. */
  close(): Promise<void>;
  /**
   * Stops serving in order: stops accepting connections (idle keep-alive ones close), closes the application
   * context — which cancels running chat turns and tool calls (shell tools kill their process groups), waits
   * (bounded, about 10 s when something hangs) for their audit lines and stored steps, and closes the database —
   * then closes the connections still open. What `toolhost serve` does on SIGTERM or Ctrl-C.
   */
  shutdown(): Promise<void>;
}

/**
 * How long an idle kept-alive connection stays open, in ms: above what HTTP clients keep idle connections for
 * (undici 4 s, or the server's hint less 2 s; browsers and proxies up to 60 s), so that the client, not the server,
 * closes an idle connection, and a loaded server does not drop a request that already arrived on one.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Options of startServer. `port` 0 picks a free port. */
export interface StartServerOptions {
  port?: number;
  host?: string;
  /** Where the first-start token notice goes (default stdout). */
  print?: (line: string) => void;
}

/** Listens and resolves once the socket is bound. Rejects when the port is taken (EADDRINUSE) or the host is invalid. */
export async function startServer(ctx: AppContext, options: StartServerOptions = {}): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  const print = options.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  // External MCP servers: their tools are imported into the registry; connecting happens in the background.
  const mcpClients = createMcpClientManager(ctx);
  ctx.onClose(() => mcpClients.close());
  void mcpClients.start();
  const app = createServerApp(ctx, { host, mcpClients });
  const headersTimeout = ctx.config.headersTimeoutMs;
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve(
      {
        fetch: app.fetch,
        port: options.port ?? 8787,
        hostname: host,
        // Node checks headersTimeout only this often (30 s by default, which would stretch a 20 s deadline to 50 s).
        serverOptions: { connectionsCheckingInterval: Math.min(1_000, Math.max(50, headersTimeout / 4)) },
      },
      () => resolve(s),
    );
    s.once("error", reject);
  });
  const http = server as unknown as {
    keepAliveTimeout: number;
    headersTimeout: number;
    closeAllConnections?: () => void;
    closeIdleConnections?: () => void;
  };
  // Node's 5 s default let a busy server reset a kept-alive connection on which the client had already sent its next
  // request (the idle timer fires before the server reads it when the event loop lags): that request is lost.
  http.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // A request's headers must arrive within this of its first byte (an idle kept-alive connection is not a request:
  // the keep-alive timeout governs it); its body has a deadline of its own (bodyDeadline in ./unread-body.ts).
  http.headersTimeout = headersTimeout;
  const port = (server.address() as AddressInfo).port;
  // Said once the socket is bound (a host that cannot be bound gets its own error instead).
  if (!isLoopbackHost(host) && ctx.config.mcpAllowedHosts === undefined) {
    ctx.logger.warn(
      { host },
      "bound to a non-loopback address: /mcp accepts any Host header; set TOOLHOST_MCP_ALLOWED_HOSTS to the names clients use (DNS-rebinding protection), and TOOLHOST_PUBLIC_URL to the URL they reach the service at",
    );
  }
  // Expire unanswered approvals and resume turns whose process stopped while they waited.
  const stopSweeper = ctx.approvals.startSweeper();
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  print(`Toolhost ${url} (data: ${ctx.dataDir}, database: ${ctx.database.dialect} ${ctx.database.location})`);
  const owner = firstTokenUser(ctx.admins);
  const first = await ctx.tokens.createFirst(owner, "created on first start");
  if (first) {
    const { token } = first;
    print(`No API token existed, so one was created for user "${owner}". It is shown only this once:`);
    print(`  ${token}`);
    print(`Try: curl -H "Authorization: Bearer ${token}" ${url}/api/settings/tools`);
  } else {
    // The CLI opens the database its own environment names: on a shared database it needs the same URL.
    const sameDatabase =
      ctx.database.dialect === "sqlite"
        ? ""
        : " (run it with this server's TOOLHOST_DATABASE_URL, or it writes to a local SQLite file this server never reads)";
    print(
      `API tokens exist (printed when created; only their hashes are stored). Need one? \`toolhost token create --user NAME\` prints a new one${sameDatabase}; \`toolhost token list\` shows the existing ones.`,
    );
  }
  return {
    url,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        stopSweeper();
        server.close(() => resolve());
        http.closeAllConnections?.();
      }),
    async shutdown() {
      stopSweeper();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      http.closeIdleConnections?.();
      // Requests in flight get their answers (a cancelled call answers `aborted`) while the context closes.
      await ctx.close();
      http.closeAllConnections?.();
      await closed;
    },
  };
}
