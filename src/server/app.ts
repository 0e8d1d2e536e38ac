/**
 * The HTTP service: Hono routes over the application services. Layers: routes → services (src/app) → registry, settings
 * policy, repositories.
 */

import { type Context, Hono, type MiddlewareHandler, type Next } from "hono";
import { bodyLimit } from "hono/body-limit";
import { secureHeaders } from "hono/secure-headers";
import type { AppContext } from "../app/context.js";
import { DataSourcesService } from "../app/data-sources.js";
import { processDirectoryRule } from "../app/working-directory.js";
import { parsePublicUrl } from "../core/config.js";
import { ToolError } from "../core/errors.js";
import { metricsRegistry } from "../core/metrics.js";
import { createMcpClientManager, McpServersService } from "../mcp/client/index.js";
import type { McpClientManager } from "../mcp/client/manager.js";
import { type McpHostPolicy, mcpHostPolicy, mcpHostRejection } from "../mcp/server/host-check.js";
import { McpHttpEndpoint, protectedResourceMetadata, WORKING_DIRECTORY_HEADER } from "../mcp/server/http.js";
import { DataSourceRepository } from "../storage/data-source-repository.js";
import { VERSION } from "../version.js";
import { accessLog } from "./access-log.js";
import { adminOnly, bearerAuth } from "./auth.js";
import { type AuthEnv, errorResponse, HttpError, methodsOfPaths, refusal } from "./http.js";
import { buildOpenApiDocument } from "./openapi.js";
import { adminRoutes } from "./routes/admin.js";
import { agentOpenApiPaths, agentRoutes } from "./routes/agents.js";
import { approvalOpenApiPaths, approvalRoutes } from "./routes/approvals.js";
import { chatOpenApiPaths, chatRoutes } from "./routes/chats.js";
import { dataSourceOpenApiPaths, dataSourceRoutes } from "./routes/data-sources.js";
import { imageRoutes } from "./routes/images.js";
import { mcpServerRoutes } from "./routes/mcp-servers.js";
import { settingsRoutes } from "./routes/settings.js";
import { toolRoutes } from "./routes/tools.js";
import { SETTINGS_PAGE_HTML } from "./settings-page.js";
import { bodyDeadline, finishUnreadBody } from "./unread-body.js";

/** Options of {@link createServerApp}. */
export interface ServerAppOptions {
  /**
   * The address the server binds (default 127.0.0.1): decides the default DNS-rebinding protection of `/mcp`
   * (see mcp/server/host-check.ts).
   */
  host?: string;
  /** Which Host and Origin hostnames `/mcp` accepts; default from `host` and the environment ({@link mcpHostPolicy}). */
  mcpHosts?: McpHostPolicy;
  /**
   * The URL clients reach the service at (e.g. `https://tools.example.com`), default TOOLHOST_PUBLIC_URL: the
   * OAuth protected-resource metadata and the `WWW-Authenticate` hint of `/mcp` name it instead of the request's
   * Host. Unset: they use the request's origin, and only for a Host that `/mcp` accepts.
   */
  publicUrl?: string;
  /** How long a request body may take to arrive after its headers, in ms (default TOOLHOST_BODY_TIMEOUT_SECONDS, 30 s). */
  bodyTimeoutMs?: number;
  /**
   * The external MCP servers' client manager the admin routes act on. startServer passes one it has started;
   * absent, the app makes one that connects nothing until an admin adds or reconnects a server (start it yourself
   * to import the configured servers' tools: `createMcpClientManager(ctx).start()`, from `toolhost/mcp`).
   */
  mcpClients?: McpClientManager;
}

/**
 * Builds the Hono app for a context. Every /api route but health and the OpenAPI document needs a bearer token.
 * Once the context starts closing, requests other than health answer 503 `shutting_down`. Starts nothing by itself
 * (no sweeper, no MCP connection): startServer does, for `toolhost serve`.
 */
export function createServerApp(ctx: AppContext, options: ServerAppOptions = {}): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const openApi = buildOpenApiDocument(VERSION, {
    ...chatOpenApiPaths,
    ...approvalOpenApiPaths,
    ...agentOpenApiPaths,
    ...dataSourceOpenApiPaths,
  });
  // A server is shared: the application's rule for the process directory (app/working-directory.ts) applies.
  ctx.runtime.processCwdFallback = processDirectoryRule(ctx.admins, true);

  app.use("*", accessLog(ctx.logger));
  app.use("*", bodyDeadline(options.bodyTimeoutMs ?? ctx.config.bodyTimeoutMs));
  app.use("*", finishUnreadBody);
  app.onError((error, c) => {
    const response = errorResponse(c, error);
    const refused = refusal(error)?.body;
    if (refused) {
      // A refusal the code made on purpose (e.g. 503 provider_not_configured): a warning with its hint, no stack.
      if (response.status >= 500)
        ctx.logger.warn({ code: refused.code, path: c.req.path, hint: refused.message }, "request refused");
    } else if (response.status === 503) {
      // The database is away (database_unavailable): one line without a stack, not an error per request.
      ctx.logger.warn({ code: "database_unavailable", path: c.req.path, err: String(error) }, "request refused");
    } else if (response.status >= 500) {
      ctx.logger.error({ err: error.stack ?? String(error), path: c.req.path }, "request failed");
    }
    return response;
  });
  // A path that exists under other methods is 405 naming them (Allow), not a 404 that reads as "no such thing".
  let allowedMethods: ((path: string) => string[]) | undefined;
  app.notFound((c) => {
    allowedMethods ??= methodsOfPaths(app.routes);
    const allowed = allowedMethods(c.req.path);
    if (allowed.length > 0) {
      const allow = allowed.join(", ");
      return c.json(
        {
          error: {
            code: "method_not_allowed",
            message: `${c.req.path} does not take ${c.req.method}; it takes ${allow}.`,
          },
        },
        405,
        { Allow: allow },
      );
    }
    return c.json({ error: { code: "not_found", message: `No route for ${c.req.method} ${c.req.path}.` } }, 404);
  });

  // The settings page: its own origin only, never framed, no content sniffing (its script and style are inline).
  app.get(
    "/",
    secureHeaders({
      contentSecurityPolicy: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'unsafe-inline'"],
        styleSrc: ["'unsafe-inline'"],
        connectSrc: ["'self'"],
        imgSrc: ["'self'", "data:", "blob:"],
        baseUri: ["'none'"],
        formAction: ["'none'"],
        frameAncestors: ["'none'"],
      },
      xFrameOptions: "DENY",
    }),
    (c) => c.html(SETTINGS_PAGE_HTML),
  );
  app.get("/api/health", (c) => c.json({ ok: true, version: VERSION }));
  // A server shutting down finishes what runs and takes nothing new (the database is about to close).
  const refuseWhileClosing = async (c: Context, next: Next) => {
    if (!ctx.shutdownSignal.aborted) return next();
    return c.json(
      {
        error: { code: "shutting_down", message: "The server is shutting down; send the request again once it runs." },
      },
      503,
      { "retry-after": "5", connection: "close" },
    );
  };
  app.use("/api/*", refuseWhileClosing);
  app.use("/mcp", refuseWhileClosing);
  app.get("/api/openapi.json", (c) => c.json(openApi));

  const auth = bearerAuth(ctx.tokens);
  const maxBodyBytes = ctx.config.maxBodyBytes;
  const tooLarge = (c: Context) =>
    c.json(
      {
        error: {
          code: "payload_too_large",
          message: `Request body exceeds ${maxBodyBytes} bytes (TOOLHOST_MAX_BODY_BYTES).`,
        },
      },
      413,
    );
  const counting = bodyLimit({ maxSize: maxBodyBytes, onError: tooLarge });
  // A body that declares its length (and is not chunked) is judged on the Content-Length header alone, as Hono's
  // bodyLimit judges it too, but without touching `c.req.raw.body`: that would make the Node adapter build a web
  // Request and a web stream of the body, and lose its direct read of the body (`c.req.text()`), which together
  // cost more than the rest of a settings PUT. A chunked body goes through bodyLimit's counting reader.
  const limit: MiddlewareHandler<AuthEnv> = async (c, next) => {
    const declared = c.req.header("content-length");
    if (declared === undefined || c.req.header("transfer-encoding") !== undefined) return counting(c, next);
    if (Number.parseInt(declared, 10) > maxBodyBytes) return tooLarge(c);
    await next();
  };
  app.use("/api/*", async (c, next) => {
    if (c.req.path === "/api/health" || c.req.path === "/api/openapi.json") return next();
    return auth(c, next);
  });
  // A NUL character is in no id, name or filter, and PostgreSQL's text refuses it: refused before any route reads it.
  app.use("/api/*", async (c, next) => {
    if (!/%00/i.test(c.req.url)) return next();
    throw new HttpError(
      400,
      "bad_request",
      "The request URL contains a NUL character (%00), which no id, name or filter holds; remove it.",
    );
  });
  // Only requests that carry a body are limited: checking a GET would build the full web Request object for nothing,
  // which costs more than answering a cheap read.
  app.use("/api/*", (c, next) => (c.req.method === "GET" || c.req.method === "HEAD" ? next() : limit(c, next)));
  app.get("/api/me", (c) => {
    const userId = c.get("userId");
    return c.json({ userId, admin: ctx.admins.isAdmin(userId) });
  });
  // Counts cover every user's calls: admins (or a scraper holding an admin token) only.
  app.use("/metrics", auth, adminOnly(ctx.admins, "Metrics are for admins"));
  app.get("/metrics", async (c) =>
    c.text(await metricsRegistry.metrics(), 200, { "Content-Type": metricsRegistry.contentType }),
  );

  app.route("/api/settings", settingsRoutes(ctx.settings, ctx.admins));
  app.route("/api/tools", toolRoutes(ctx));
  // External MCP servers: their tools are imported into the registry; connecting happens in the background.
  let mcpClients = options.mcpClients;
  if (!mcpClients) {
    const made = createMcpClientManager(ctx);
    ctx.onClose(() => made.close());
    mcpClients = made;
  }
  app.route("/api/admin/mcp-servers", mcpServerRoutes(new McpServersService(ctx, mcpClients), ctx.admins));
  app.route(
    "/api/admin/data-sources",
    dataSourceRoutes(new DataSourcesService(ctx.dataSources, new DataSourceRepository(ctx.database.db)), ctx.admins),
  );
  app.route("/api/admin", adminRoutes(ctx));
  app.route("/api/chats", chatRoutes(ctx));
  app.route("/api/approvals", approvalRoutes(ctx));
  app.route("/api/agents", agentRoutes(ctx));
  app.route("/api/images", imageRoutes({ db: ctx.database.db, dataDir: ctx.dataDir }));

  // MCP Streamable HTTP (stateless, both protocol eras), with the same bearer token and the user's own tool
  // settings. A client binds a working directory per connection through a header, checked exactly like a chat's.
  const mcp = new McpHttpEndpoint(ctx.runtime, ctx.logger, ctx.approvals, ctx.signals, ctx.config.maxBodyBytes);
  ctx.onClose(() => mcp.close());
  // URLs handed to clients never come from an unchecked Host header: the configured public URL, else the request's
  // origin once the Host check of /mcp accepted it (a forged Host gets that check's 403, not a URL naming it).
  const publicUrl = options.publicUrl !== undefined ? parsePublicUrl(options.publicUrl) : ctx.config.publicUrl;
  const origin = (requestUrl: string) => publicUrl ?? new URL(requestUrl).origin;
  const metadataUrl = (requestUrl: string) => `${origin(requestUrl)}/.well-known/oauth-protected-resource/mcp`;
  const hostPolicy = options.mcpHosts ?? mcpHostPolicy(options.host ?? "127.0.0.1");
  const metadata = async (c: Context) =>
    (publicUrl
      ? undefined
      : await mcpHostRejection(c.req.raw, { allowedHosts: hostPolicy.allowedHosts, allowedOrigins: null })) ??
    c.json(protectedResourceMetadata(origin(c.req.url)));
  app.get("/.well-known/oauth-protected-resource", metadata);
  app.get("/.well-known/oauth-protected-resource/mcp", metadata);
  // DNS-rebinding protection first: a page that re-pointed its name at this server gets nothing, not even a 401.
  app.use("/mcp", async (c, next) => (await mcpHostRejection(c.req.raw, hostPolicy)) ?? next());
  app.use("/mcp", bearerAuth(ctx.tokens, { resourceMetadataUrl: metadataUrl }), limit);
  app.all("/mcp", async (c) => {
    const userId = c.get("userId");
    const requested = c.req.header(WORKING_DIRECTORY_HEADER);
    let workingDirectory: string | null = null;
    try {
      if (requested) workingDirectory = ctx.binder.bind(requested, { userId, admin: ctx.admins.isAdmin(userId) });
    } catch (error) {
      if (!(error instanceof ToolError)) throw error;
      // An MCP client reads JSON-RPC errors, not the REST error shape: name the header, like the Host check does,
      // and answer the request's own id (a POST of one request; the body is already capped by the limit above), so
      // the client can match the refusal to what it sent.
      let id: string | number | null = null;
      if (c.req.method === "POST") {
        const body = (await c.req.json().catch(() => undefined)) as { id?: unknown } | undefined;
        if (typeof body?.id === "string" || typeof body?.id === "number") id = body.id;
      }
      return c.json(
        {
          jsonrpc: "2.0",
          error: {
            code: -32000,
            message: `${WORKING_DIRECTORY_HEADER} refused (${error.code}): ${error.message}`,
            data: { header: WORKING_DIRECTORY_HEADER, code: error.code },
          },
          id,
        },
        error.code === "access_denied" ? 403 : 400,
      );
    }
    // A token revoked (or expiring) while a call runs stops it, as it stops a chat turn streaming under it.
    const token = c.get("token");
    return mcp.handle(c.req.raw, {
      userId,
      token,
      workingDirectory,
      watchToken: (onInvalid) => ctx.tokens.watch(token, onInvalid),
    });
  });
  return app;
}
