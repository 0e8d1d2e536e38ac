/**
 * Admin routes for external MCP servers (admins only; 403 otherwise), mounted at /api/admin/mcp-servers:
 * GET / (every server with its status: connecting | connected | failed | disabled, last error, stderr tail,
 * imported tools and warnings), GET /:name, POST / `{name, command|url, …}` (stored, connected in the background;
 * 201), DELETE /:name (a stored server; 204), POST /:name/reconnect (reconnects now, answers with the status).
 */

import { Hono } from "hono";
import Type from "typebox";
import type { AdminRule } from "../../app/admin.js";
import type { McpServersService } from "../../mcp/client/index.js";
import { adminOnly } from "../auth.js";
import { type AuthEnv, HttpError, readJsonBody } from "../http.js";

/** Body of POST /api/admin/mcp-servers: a name plus the server's configuration (as under `mcpServers`). */
export const AddMcpServerBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64 }),
    command: Type.Optional(Type.String({ minLength: 1 })),
    args: Type.Optional(Type.Array(Type.String())),
    env: Type.Optional(Type.Record(Type.String(), Type.String())),
    cwd: Type.Optional(Type.String()),
    url: Type.Optional(Type.String()),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
    trusted: Type.Optional(Type.Boolean()),
    disabled: Type.Optional(Type.Boolean()),
    connectTimeoutMs: Type.Optional(Type.Integer()),
    callTimeoutMs: Type.Optional(Type.Integer()),
  },
  { additionalProperties: false },
);

/** The routes over an McpServersService. */
export function mcpServerRoutes(service: McpServersService, admins: AdminRule): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.use("*", adminOnly(admins));
  app.get("/", (c) => c.json({ servers: service.list() }));
  app.get("/:name", (c) => c.json(service.get(c.req.param("name"))));
  app.post("/", async (c) => {
    const { name, ...config } = await readJsonBody<{ name: string } & Record<string, unknown>>(c, AddMcpServerBody);
    return c.json(await service.add(name, config), 201);
  });
  app.delete("/:name", async (c) => {
    await service.remove(c.req.param("name"));
    return c.body(null, 204);
  });
  app.post("/:name/reconnect", async (c) => {
    const status = await service.manager.reconnect(c.req.param("name"));
    if (!status) throw new HttpError(404, "not_found", `No MCP server named "${c.req.param("name")}".`);
    return c.json(status);
  });
  return app;
}
