/**
 * Bearer-token authentication. Tokens are stored hashed (sha256) and map to a user id. A request without a valid
 * token gets 401 and learns nothing about the tools.
 */
import type { MiddlewareHandler } from "hono";
import type { TokenRepository } from "../storage/repositories.js";
import type { AuthEnv } from "./http.js";

/** Middleware that authenticates `Authorization: Bearer <token>` and sets `userId`; 401 otherwise. */
export function bearerAuth(tokens: TokenRepository): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const userId = match?.[1] ? await tokens.authenticate(match[1]) : undefined;
    if (!userId) {
      c.header("WWW-Authenticate", 'Bearer realm="toolhost"');
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
    await next();
  };
}
