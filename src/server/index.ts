/**
 * `toolhost/server`: the HTTP service for embedding in your own server. Given an application context
 * (`createAppContext()` from "toolhost"):
 *
 * - `createServerApp(ctx)` returns the Hono app: mount it in a Hono host (`host.route("/", app)`), or serve its
 *   `fetch` from any server that speaks web `Request`/`Response`;
 * - `createRequestListener(ctx)` returns a Node `(req, res)` listener for a `node:http` server;
 * - `startServer(ctx, { port, host })` listens on a socket of its own, as `toolhost serve` does.
 *
 * Every route but `/api/health`, `/api/openapi.json` and the settings page `/` needs a bearer token of the
 * context's token repository (`ctx.tokens.create(userId)`).
 */
export type { McpHostPolicy } from "../mcp/server/host-check.js";
export { createServerApp, type ServerAppOptions } from "./app.js";
export { type AuthEnv, HttpError } from "./http.js";
export { type ImageRoutesDeps, imageRoutes } from "./routes/images.js";
export { createRequestListener, type RunningServer, type StartServerOptions, startServer } from "./serve.js";
