/**
 * Tool settings routes: GET /api/settings/tools, GET and PUT /api/settings/tools/:toolName.
 */
import { Hono } from "hono";
import type { AdminRule } from "../../app/admin.js";
import {
  SettingsVersionConflictError,
  type ToolSettingsService,
  type UpdateToolSettingsBody,
} from "../../app/tool-settings-service.js";
import { SETTINGS_BODY_LIMITS } from "../../core/json-limits.js";
import { type AuthEnv, HttpError, readJsonBody, sendJson, sendJsonText } from "../http.js";
import { ToolSettingsDescriptorSchema, ToolSettingsListResponse, UpdateToolSettingsBodySchema } from "../schemas.js";

/** The strong ETag of a settings version: the version number in quotes. */
export function etag(version: number): string {
  return `"${version}"`;
}

/**
 * The version an `If-Match` header names, or undefined when absent or `*` (no precondition). Throws HttpError 400
 * for anything but one strong ETag this server issued (a quoted non-negative integer).
 */
export function parseIfMatch(header: string | undefined): number | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === "*") return undefined;
  const entries = value.split(",").map((e) => e.trim());
  const strong: number[] = [];
  for (const entry of entries) {
    const match = /^"(\d{1,15})"$/.exec(entry);
    if (match) strong.push(Number(match[1]));
    // A weak ETag never matches under If-Match's strong comparison (RFC 9110 §13.1.1): it only cannot succeed.
    else if (!/^W\/"[^"]*"$/.test(entry)) {
      throw new HttpError(
        400,
        "bad_request",
        'If-Match must hold ETags as returned by GET /api/settings/tools/:toolName, e.g. If-Match: "3".',
      );
    }
  }
  if (strong.length > 1) {
    throw new HttpError(400, "bad_request", 'If-Match may name one strong ETag here, e.g. If-Match: "3".');
  }
  // No strong ETag left: the precondition cannot hold, so the update answers 412 (version -1 never exists).
  return strong[0] ?? -1;
}

/** Routes for per-user tool settings; errors propagate to the app's error handler (404, 422, 400). */
export function settingsRoutes(settings: ToolSettingsService, admins: AdminRule): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get("/tools", async (c) => sendJsonText(c, ToolSettingsListResponse, await settings.listJson(c.get("userId"))));
  app.get("/tools/:toolName", async (c) => {
    const descriptor = await settings.get(c.get("userId"), c.req.param("toolName"));
    c.header("ETag", etag(descriptor.version));
    return sendJson(c, ToolSettingsDescriptorSchema, descriptor);
  });
  app.put("/tools/:toolName", async (c) => {
    const ifMatch = parseIfMatch(c.req.header("If-Match"));
    const body = await readJsonBody<UpdateToolSettingsBody>(c, UpdateToolSettingsBodySchema, SETTINGS_BODY_LIMITS);
    const userId = c.get("userId");
    try {
      const descriptor = await settings.update(userId, c.req.param("toolName"), body, {
        admin: admins.isAdmin(userId),
        // A user's own change is never a lock on themself, admin or not.
        lock: false,
        ...(ifMatch === undefined ? {} : { ifMatch }),
      });
      c.header("ETag", etag(descriptor.version));
      return sendJson(c, ToolSettingsDescriptorSchema, descriptor);
    } catch (error) {
      if (error instanceof SettingsVersionConflictError) {
        c.header("ETag", etag(error.actual));
        throw new HttpError(412, "precondition_failed", error.message, {
          tool: error.tool,
          expected: error.expected,
          actual: error.actual,
        });
      }
      throw error;
    }
  });
  return app;
}
