/**
 * Admin routes: the audit log of every tool call and settings change, and API tokens. Who is an admin is the
 * context's rule (app/admin.ts, TOOLHOST_ADMIN_USERS read once).
 */

import { Hono } from "hono";
import { isUserId, USER_ID_RULE } from "../../app/admin.js";
import type { AppContext } from "../../app/context.js";
import { parseTimeBound, TIME_BOUND_RULE } from "../../app/time-bound.js";
import type { UpdateToolSettingsBody } from "../../app/tool-settings-service.js";
import { SETTINGS_BODY_LIMITS } from "../../core/json-limits.js";
import { parseTokenLifetime } from "../../storage/token-repository.js";
import { adminOnly } from "../auth.js";
import { type AuthEnv, HttpError, readJsonBody, sendJson } from "../http.js";
import {
  AdminUpdateToolSettingsBodySchema,
  AuditListResponse,
  CreateTokenBody,
  IssuedTokenResponse,
  TokenInfoSchema,
  TokenListResponse,
  ToolSettingsDescriptorSchema,
  ToolSettingsListResponse,
  UnlockResponse,
} from "../schemas.js";
import { etag, parseIfMatch, preconditionFailed } from "./settings.js";

/**
 * Admin routes (admins only; 403 otherwise): GET /api/admin/audit?user=&limit=, and the API tokens:
 * GET /api/admin/tokens?user=, POST /api/admin/tokens, DELETE /api/admin/tokens/:id,
 * POST /api/admin/tokens/:id/rotate.
 */
/** Reads a time bound query parameter (ISO-8601 or a duration ago); throws HttpError 400 when it is neither. */
function timeParam(value: string | undefined, name: string): string | undefined {
  if (value === undefined || value === "") return undefined;
  const time = parseTimeBound(value);
  if (time === undefined) throw new HttpError(400, "bad_request", `${name} must be ${TIME_BOUND_RULE}.`);
  return time;
}

/** A user id named in a path or query: the CLI's rule, HttpError 400 `bad_request` otherwise. */
function userParam(value: string | undefined, where: string): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (!isUserId(value)) throw new HttpError(400, "bad_request", `${where} is not a user id: ${USER_ID_RULE}.`);
  return value;
}

/** GET /api/admin/audit?user=&tool=&kind=&since=&until=&limit= (admins only; 403 otherwise). */
export function adminRoutes(ctx: AppContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.use("*", adminOnly(ctx.admins));
  // Every route about one user names a valid user id, whatever it does with it.
  app.use("/users/:user/*", async (c, next) => {
    userParam(c.req.param("user"), "The :user of the path");
    await next();
  });
  app.get("/audit", async (c) => {
    const limitText = c.req.query("limit");
    const limit = limitText === undefined ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new HttpError(400, "bad_request", "limit must be an integer from 1 to 1000.");
    const kind = c.req.query("kind");
    if (kind !== undefined && kind !== "tool_call" && kind !== "settings_change")
      throw new HttpError(400, "bad_request", "kind must be tool_call or settings_change.");
    const entries = await ctx.audit.list({
      userId: userParam(c.req.query("user"), "user"),
      tool: c.req.query("tool") || undefined,
      kind,
      since: timeParam(c.req.query("since"), "since"),
      until: timeParam(c.req.query("until"), "until"),
      limit,
    });
    return sendJson(c, AuditListResponse, { entries });
  });
  // Another user's settings as an admin sees them (lockedKeys: what admins set for that user), and removing locks.
  app.get("/users/:user/settings/tools", async (c) =>
    sendJson(c, ToolSettingsListResponse, { tools: await ctx.settings.list(c.req.param("user")) }),
  );
  app.get("/users/:user/settings/tools/:toolName", async (c) => {
    const descriptor = await ctx.settings.get(c.req.param("user"), c.req.param("toolName"));
    // The version the PUT's If-Match names, as on the user's own route.
    c.header("ETag", etag(descriptor.version));
    return sendJson(c, ToolSettingsDescriptorSchema, descriptor);
  });
  // Setting another user's values, with the user's own validation; what is set for a user who is not an admin is
  // locked for them unless lock: false (for an admin, as for oneself, only when lock: true), as the CLI does.
  app.put("/users/:user/settings/tools/:toolName", async (c) => {
    const ifMatch = parseIfMatch(c.req.header("If-Match"));
    const { lock, ...body } = await readJsonBody<UpdateToolSettingsBody & { lock?: boolean }>(
      c,
      AdminUpdateToolSettingsBodySchema,
      SETTINGS_BODY_LIMITS,
    );
    try {
      const user = c.req.param("user");
      const descriptor = await ctx.settings.update(user, c.req.param("toolName"), body, {
        admin: true,
        lock: lock ?? !ctx.admins.isAdmin(user),
        actor: c.get("userId"),
        ...(ifMatch === undefined ? {} : { ifMatch: ifMatch.versions }),
      });
      c.header("ETag", etag(descriptor.version));
      return sendJson(c, ToolSettingsDescriptorSchema, descriptor);
    } catch (error) {
      throw preconditionFailed(c, error, ifMatch);
    }
  });
  app.delete("/users/:user/settings/tools/:toolName/locks", async (c) => {
    const keys = c.req.queries("key") ?? [];
    const { descriptor, unlocked } = await ctx.settings.unlock(c.req.param("user"), c.req.param("toolName"), keys, {
      actor: c.get("userId"),
    });
    return sendJson(c, UnlockResponse, { unlocked, tool: descriptor });
  });
  app.get("/tokens", async (c) =>
    sendJson(c, TokenListResponse, { tokens: await ctx.tokens.list(userParam(c.req.query("user"), "user")) }),
  );
  app.post("/tokens", async (c) => {
    const body = await readJsonBody<{ userId: string; label?: string; expiresIn?: string }>(c, CreateTokenBody);
    userParam(body.userId, "userId");
    const label = body.label ?? null;
    let expiresInMs: number | undefined;
    try {
      expiresInMs = body.expiresIn === undefined ? undefined : parseTokenLifetime(body.expiresIn);
    } catch (error) {
      throw new HttpError(400, "bad_request", (error as Error).message);
    }
    const issued = await ctx.tokens.create(body.userId, { label, expiresInMs });
    const { expiresAt } = await ctx.tokens.find(issued.id);
    return sendJson(
      c,
      IssuedTokenResponse,
      { id: issued.id, userId: body.userId, label, expiresAt, token: issued.token },
      201,
    );
  });
  app.delete("/tokens/:id", async (c) => {
    const revoked = await ctx.tokens.revoke(c.req.param("id"));
    return sendJson(c, TokenInfoSchema, revoked);
  });
  app.post("/tokens/:id/rotate", async (c) => {
    const rotated = await ctx.tokens.rotate(c.req.param("id"));
    const { userId, label, expiresAt } = rotated.replaced;
    return sendJson(c, IssuedTokenResponse, { id: rotated.id, userId, label, expiresAt, token: rotated.token });
  });
  return app;
}
