/**
 * Admin routes: the security audit log of shell executions. Admins are the users named in TOOLHOST_ADMIN_USERS
 * (comma-separated; default "local", the user the server creates on first start).
 */
import { Hono } from "hono";
import type { AppContext } from "../../app/context.js";
import { type AuthEnv, HttpError, sendJson } from "../http.js";
import { AuditListResponse } from "../schemas.js";

/** The admin user ids from the environment. */
export function adminUsers(env: NodeJS.ProcessEnv = process.env): Set<string> {
  return new Set(
    (env.TOOLHOST_ADMIN_USERS ?? "local")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
}

/** GET /api/admin/audit?user=&limit= (admins only; 403 otherwise). */
export function adminRoutes(ctx: AppContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.use("*", async (c, next) => {
    if (!adminUsers().has(c.get("userId")))
      throw new HttpError(403, "access_denied", "Admin only: set TOOLHOST_ADMIN_USERS to grant access.");
    await next();
  });
  app.get("/audit", async (c) => {
    const limitText = c.req.query("limit");
    const limit = limitText === undefined ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new HttpError(400, "bad_request", "limit must be an integer from 1 to 1000.");
    const entries = await ctx.audit.list({ userId: c.req.query("user") || undefined, limit });
    return sendJson(c, AuditListResponse, { entries });
  });
  return app;
}
