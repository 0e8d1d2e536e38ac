/**
 * Bearer-token authentication. Tokens are stored hashed (sha256) and map to a user id. A request without a valid
 * token gets 401 and learns nothing about the tools.
 */
import type { MiddlewareHandler } from "hono";
import type { AdminRule } from "../app/admin.js";
import type { TokenRepository } from "../storage/repositories.js";
import { type AuthEnv, HttpError } from "./http.js";

/**
 * Middleware that authenticates `Authorization: Bearer <token>` and sets `userId` (and `token`); 401 otherwise.
 * `resourceMetadataUrl`, when given, is announced in the 401's WWW-Authenticate challenge (RFC 9728), so OAuth-aware
 * clients (MCP) find the protected-resource metadata document.
 */
export function bearerAuth(
  tokens: TokenRepository,
  options: { resourceMetadataUrl?: (requestUrl: string) => string } = {},
): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const userId = match?.[1] ? await tokens.authenticate(match[1]) : undefined;
    if (!userId) {
      const metadata = options.resourceMetadataUrl?.(c.req.url);
      c.header("WWW-Authenticate", `Bearer realm="toolhost"${metadata ? `, resource_metadata="${metadata}"` : ""}`);
      return c.json(
        {
          error: {
            code: "unauthorized",
            message: "Missing or invalid bearer token. Create one with `toolhost token create --user NAME`.",
          },
        },
        401,
      );
    }
    c.set("userId", userId);
    c.set("token", match?.[1] ?? "");
    await next();
  };
}

/**
 * Lets only admins through (the context's rule, TOOLHOST_ADMIN_USERS); anyone else gets 403 `access_denied` naming
 * the variable. Mount after {@link bearerAuth}. `what` names the resource in the message (default "Admin only").
 */
export function adminOnly(admins: AdminRule, what = "Admin only"): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    if (!admins.isAdmin(c.get("userId")))
      throw new HttpError(403, "access_denied", `${what}: set TOOLHOST_ADMIN_USERS to grant access.`);
    await next();
  };
}
