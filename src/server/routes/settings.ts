/**
 * Tool settings routes: GET /api/settings/tools, GET and PUT /api/settings/tools/:toolName.
 */
import { type Context, Hono } from "hono";
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

/** A parsed `If-Match` list: the settings versions its strong tags name, and whether it held a weak tag. */
export interface IfMatchCondition {
  /** Versions named by strong tags of this server's form (`"3"`); other strong tags name no version. */
  versions: number[];
  /** A weak tag (`W/"3"`) was listed: it never matches under If-Match's strong comparison (RFC 9110 §13.1.1). */
  weak: boolean;
}

/** One list element of If-Match: an entity-tag (RFC 9110 §8.8.3), or an empty element, then a comma or the end. */
const ENTITY_TAG_ELEMENT = /[ \t]*(?:(W\/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(?:,|$)/y;

/**
 * What a settings write that lost its `If-Match` race adds to its 412 (the status table answers the
 * SettingsVersionConflictError): the current ETag on `c`, and for a list of only weak tags, why it never matches.
 * Returns the error to throw.
 */
export function preconditionFailed(c: Context, error: unknown, ifMatch: IfMatchCondition | undefined): unknown {
  if (!(error instanceof SettingsVersionConflictError)) return error;
  c.header("ETag", etag(error.actual));
  if (ifMatch?.weak !== true || ifMatch.versions.length > 0) return error;
  return new HttpError(
    412,
    error.code,
    `If-Match held only weak entity-tags (W/"…"), which never match under If-Match's strong comparison (RFC 9110 §13.1.1); send the strong ETag of a GET, now If-Match: "${error.actual}".`,
    error.details,
  );
}

/**
 * The condition an `If-Match` header states, or undefined when absent or `*` (no precondition). A list of
 * entity-tags is accepted (RFC 9110 §13.1.1); the update applies when one strong tag names the stored version, so a
 * valid strong tag this server never issued (`"x"`), a weak tag or an old version each answer 412. Throws HttpError
 * 400 `bad_request` only for a header that is not an entity-tag list (e.g. `3`, `W/3`, `"3"junk`).
 */
export function parseIfMatch(header: string | undefined): IfMatchCondition | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === "*") return undefined;
  const condition: IfMatchCondition = { versions: [], weak: false };
  let tags = 0;
  ENTITY_TAG_ELEMENT.lastIndex = 0;
  while (ENTITY_TAG_ELEMENT.lastIndex < value.length) {
    const at = ENTITY_TAG_ELEMENT.lastIndex;
    const match = ENTITY_TAG_ELEMENT.exec(value);
    if (!match || match.index !== at || ENTITY_TAG_ELEMENT.lastIndex === at) {
      throw new HttpError(
        400,
        "bad_request",
        'If-Match must be "*" or a list of entity-tags as returned in ETag by GET /api/settings/tools/:toolName, e.g. If-Match: "3".',
      );
    }
    if (match[2] === undefined) continue;
    tags++;
    if (match[1]) condition.weak = true;
    else if (/^\d{1,15}$/.test(match[2])) condition.versions.push(Number(match[2]));
  }
  if (tags === 0) throw new HttpError(400, "bad_request", 'If-Match holds no entity-tag; send e.g. If-Match: "3".');
  return condition;
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
        ...(ifMatch === undefined ? {} : { ifMatch: ifMatch.versions }),
      });
      c.header("ETag", etag(descriptor.version));
      return sendJson(c, ToolSettingsDescriptorSchema, descriptor);
    } catch (error) {
      throw preconditionFailed(c, error, ifMatch);
    }
  });
  return app;
}
