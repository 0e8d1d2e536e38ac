/**
 * One JSON access line per HTTP request, at level info: method, route (the matched pattern, e.g.
 * `/api/chats/:id`), path, status, duration in milliseconds, user (when authenticated) and request id. The request
 * id is the client's `X-Request-Id` when it is a sane token (1–128 of `A-Za-z0-9._:-`), else a new UUID; it is
 * echoed in the response's `X-Request-Id` header so a client can quote it.
 */
import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { Logger } from "../core/types.js";
import type { AuthEnv } from "./http.js";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The access-log middleware; mount it first so it sees every request (401s and 404s included). */
export function accessLog(logger: Logger): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const started = performance.now();
    const offered = c.req.header("x-request-id");
    const requestId = offered && REQUEST_ID.test(offered) ? offered : randomUUID();
    c.header("X-Request-Id", requestId);
    try {
      await next();
    } finally {
      const handler = matchedRoutes(c)
        .filter((r) => r.method !== "ALL")
        .at(-1);
      logger.info(
        {
          type: "access",
          method: c.req.method,
          route: handler?.path ?? null,
          path: c.req.path,
          status: c.res.status,
          durationMs: Math.round((performance.now() - started) * 10) / 10,
          user: c.get("userId") ?? null,
          requestId,
        },
        "request",
      );
    }
  };
}
