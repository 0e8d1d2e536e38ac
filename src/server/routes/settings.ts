/**
 * Tool settings routes (000_6d817c25d4590fa9.txt, "Tool Settings API"):
 * GET /api/settings/tools and PUT /api/settings/tools/:toolName.
 */
import { Hono } from "hono";
import type { ToolSettingsService, UpdateToolSettingsBody } from "../../app/tool-settings-service.js";
import { type AuthEnv, readJsonBody, sendJson } from "../http.js";
import { ToolSettingsDescriptorSchema, ToolSettingsListResponse, UpdateToolSettingsBodySchema } from "../schemas.js";
import { adminUsers } from "./admin.js";

/** Routes for per-user tool settings; errors propagate to the app's error handler (404, 422, 400). */
export function settingsRoutes(settings: ToolSettingsService): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get("/tools", async (c) =>
    sendJson(c, ToolSettingsListResponse, { tools: await settings.list(c.get("userId")) }),
  );
  app.get("/tools/:toolName", async (c) =>
    sendJson(c, ToolSettingsDescriptorSchema, await settings.get(c.get("userId"), c.req.param("toolName"))),
  );
  app.put("/tools/:toolName", async (c) => {
    const body = await readJsonBody<UpdateToolSettingsBody>(c, UpdateToolSettingsBodySchema);
    const userId = c.get("userId");
    const descriptor = await settings.update(userId, c.req.param("toolName"), body, {
      admin: adminUsers().has(userId),
    });
    return sendJson(c, ToolSettingsDescriptorSchema, descriptor);
  });
  return app;
}
