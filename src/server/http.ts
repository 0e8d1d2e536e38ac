/**
 * HTTP helpers shared by the routes: JSON body parsing and validation against TypeBox schemas, response
 * validation, and the mapping of classified errors to status codes.
 */
import type { Context } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { Compile } from "typebox/compile";
import { readConfig } from "../core/config.js";
import { BrandedError, classifiedError, errorBrand, type ToolErrorCode } from "../core/errors.js";
import {
  DEFAULT_BODY_LIMITS,
  type JsonLimits,
  type JsonLimitViolation,
  scanJsonText,
  unstorableText,
} from "../core/json-limits.js";
import { isDatabaseUnavailable } from "../storage/unavailable.js";

/** Variables the auth middleware sets on every authenticated request. */
/** Request variables set by bearerAuth: the user id and the bearer token it authenticated. */
export type AuthEnv = { Variables: { userId: string; token: string } };

/** A request the route refuses, with its HTTP status and a classified body. */
export class HttpError extends BrandedError {
  static override readonly brand: symbol = errorBrand("HttpError");
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** The HTTP status of each tool error code (a tool's refusal answered by a route, e.g. a tool call over REST). */
export const TOOL_ERROR_STATUS = {
  validation_failed: 400,
  invalid_settings: 422,
  access_denied: 403,
  not_found: 404,
  timeout: 504,
  aborted: 499 as ContentfulStatusCode,
  execution_failed: 500,
  denied_by_user: 403,
  denied_by_policy: 403,
  limit_exceeded: 429,
} satisfies Record<ToolErrorCode, ContentfulStatusCode>;

/**
 * The one status table: the HTTP status of every classified error code a route may let through (see
 * {@link classifiedError}). Routes throw the application's errors as they are; this table answers them. A code not
 * listed here is an unexpected failure (500 `internal_error`), so a new error class adds its code here.
 */
export const HTTP_STATUS_BY_CODE: Readonly<Record<string, ContentfulStatusCode>> = {
  ...TOOL_ERROR_STATUS,
  bad_request: 400,
  ambiguous_id: 409,
  approval_conflict: 409,
  chat_busy: 409,
  lease_lost: 409,
  precondition_failed: 412,
  provider_not_configured: 503,
};

const compiled = new WeakMap<object, ReturnType<typeof Compile>>();
function checker(schema: object) {
  let c = compiled.get(schema);
  if (!c) {
    c = Compile(schema as never);
    compiled.set(schema, c);
  }
  return c;
}

/** Bodies longer than this (characters) are scanned, parsed and validated in separate event-loop turns. */
const LARGE_BODY_CHARS = 64 * 1024;

/** Lets pending I/O callbacks (other requests) run before continuing. */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Reads the JSON body and validates it; throws HttpError 413 (`payload_too_large`, naming the limit) when the body
 * breaks `limits` — checked on the Content-Length and a linear scan of the text before anything is parsed — and
 * 400 (malformed JSON, a number JSON cannot carry, text that cannot be stored, or a schema mismatch).
 * `options.toolArguments`: the body's `arguments` carry a tool's arguments, whose text is the runtime's to check (a
 * tool gets NUL characters as they are; half a character is its validation_failed outcome, answered 200 like any
 * other); the rest of the body is checked as any body is.
 */
export async function readJsonBody<T>(
  c: Context,
  schema: object,
  limits: JsonLimits = DEFAULT_BODY_LIMITS,
  options: { toolArguments?: boolean } = {},
): Promise<T> {
  const tooLarge = (v: JsonLimitViolation) =>
    new HttpError(413, "payload_too_large", `Request body: ${v.message}`, { limit: v.limit, max: v.max });
  const declared = Number(c.req.header("content-length"));
  if (Number.isFinite(declared) && declared > limits.maxBytes) {
    throw tooLarge({
      limit: "maxBytes",
      max: limits.maxBytes,
      message: `${declared} bytes exceed the limit of ${limits.maxBytes.toLocaleString("en-US")} bytes for this route (maxBytes); send less.`,
    });
  }
  let body: unknown;
  try {
    const text = await c.req.text();
    if (text.trim() === "") throw new HttpError(400, "bad_request", "Request body is empty; send a JSON object.");
    // A large body is checked and parsed in separate turns of the event loop, so that requests arriving meanwhile
    // (a health check) wait for one step of it, not for all of them.
    const large = text.length > LARGE_BODY_CHARS;
    if (large) await yieldToEventLoop();
    const violation = scanJsonText(text, limits);
    if (violation?.limit === "finiteNumber")
      throw new HttpError(400, "bad_request", `Request body: ${violation.message}`);
    if (violation) throw tooLarge(violation);
    if (large) await yieldToEventLoop();
    body = JSON.parse(text);
    // Text that cannot be stored as sent: half a character, or a NUL character, which PostgreSQL's text columns
    // refuse. Not in a tool's arguments: a tool gets them as they are (NUL included), and the runtime's argument
    // check refuses half a character as the tool's validation_failed outcome, as every other argument problem. The
    // ids beside them (a chat's, an approval's) are looked up in the database like any other.
    let checked = body;
    if (options.toolArguments && body !== null && typeof body === "object" && !Array.isArray(body)) {
      const { arguments: _arguments, ...rest } = body as Record<string, unknown>;
      checked = rest;
    }
    const unstorable = unstorableText(checked, "body", text, { nul: true });
    if (unstorable) {
      throw new HttpError(
        400,
        "bad_request",
        `Request ${unstorable.path} contains ${unstorable.problem}, which cannot be stored; send valid Unicode text without it.`,
      );
    }
    if (large) await yieldToEventLoop();
  } catch (error) {
    if (error instanceof HttpError) throw error;
    throw new HttpError(400, "bad_request", `Request body is not valid JSON: ${(error as Error).message}`);
  }
  const check = checker(schema);
  if (!check.Check(body)) {
    const first = [...check.Errors(body)][0];
    const where = first?.instancePath ? `at ${first.instancePath}` : "body";
    const allowed = first ? allowedValuesAt(schema, first.instancePath) : undefined;
    const rule = allowed
      ? `must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}`
      : first?.keyword === "boolean" && first.schemaPath.endsWith("/additionalProperties")
        ? "is not a property this request accepts (check its spelling against the API reference)"
        : (first?.message ?? "does not match the schema");
    throw new HttpError(400, "bad_request", `Invalid request ${where}: ${rule}.`);
  }
  return body as T;
}

/** The allowed values when the schema at `instancePath` is a union of constants (e.g. a provider name). */
function allowedValuesAt(schema: object, instancePath: string): unknown[] | undefined {
  let node = schema as { properties?: Record<string, object>; anyOf?: { const?: unknown }[] } | undefined;
  for (const part of instancePath.split("/").slice(1)) node = node?.properties?.[part] as typeof node;
  const options = node?.anyOf;
  return options?.length && options.every((o) => "const" in o) ? options.map((o) => o.const) : undefined;
}

/**
 * Whether responses are checked against their schemas before they are sent. The check costs about as much as
 * building the response, so it runs where a mismatch is worth finding (the test suite sets
 * TOOLHOST_VALIDATE_RESPONSES=1, and so may a developer), not on every production request.
 */
let validate: boolean | undefined;
const VALIDATE_RESPONSES = () => (validate ??= readConfig().validateResponses);

/**
 * Sends a JSON response. With TOOLHOST_VALIDATE_RESPONSES=1 it is first checked against its schema (a mismatch is
 * a server bug: 500 with the path that does not match).
 */
export function sendJson(c: Context, schema: object, body: unknown, status: ContentfulStatusCode = 200) {
  const check = VALIDATE_RESPONSES() ? checker(schema) : undefined;
  if (check && !check.Check(body)) {
    const first = [...check.Errors(body)][0];
    throw new Error(`Response does not match its schema at ${first?.instancePath ?? "/"}: ${first?.message}`);
  }
  return c.json(body as object, status);
}

/**
 * Sends JSON text that was serialized (and possibly cached) beforehand; checked against its schema like
 * {@link sendJson} when TOOLHOST_VALIDATE_RESPONSES=1.
 */
export function sendJsonText(c: Context, schema: object, text: string, status: ContentfulStatusCode = 200) {
  if (VALIDATE_RESPONSES()) {
    const body: unknown = JSON.parse(text);
    const check = checker(schema);
    if (!check.Check(body)) {
      const first = [...check.Errors(body)][0];
      throw new Error(`Response does not match its schema at ${first?.instancePath ?? "/"}: ${first?.message}`);
    }
  }
  return c.body(text, status, { "content-type": "application/json" });
}

/** The message of 503 `database_unavailable`. */
const DATABASE_UNAVAILABLE_MESSAGE =
  "The database could not be reached (it may be restarting); the server reconnects on its own. Retry the request in a few seconds.";

/**
 * A refusal the code made on purpose, with its status and body: an HttpError, or a classified error whose code the
 * status table knows. Undefined for anything else (an unexpected failure).
 */
export function refusal(
  error: unknown,
):
  | { status: ContentfulStatusCode; body: { code: string; message: string; details?: Record<string, unknown> } }
  | undefined {
  if (error instanceof HttpError) {
    const body = { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) };
    return { status: error.status, body };
  }
  const classified = classifiedError(error);
  if (!classified || !Object.hasOwn(HTTP_STATUS_BY_CODE, classified.code)) return undefined;
  return { status: HTTP_STATUS_BY_CODE[classified.code]!, body: classified };
}

/**
 * Maps anything thrown by a route to a JSON error response `{ error: { code, message, details? } }`: an HttpError
 * with its own status, a classified error by {@link HTTP_STATUS_BY_CODE}, 503
 * `database_unavailable` (with `Retry-After: 1`) when the database could not be reached, 500 `internal_error` for
 * anything else unexpected.
 */
export function errorResponse(c: Context, error: unknown) {
  const refused = refusal(error);
  if (refused) return c.json({ error: refused.body }, refused.status);
  if (isDatabaseUnavailable(error)) {
    c.header("Retry-After", "1");
    return c.json({ error: { code: "database_unavailable", message: DATABASE_UNAVAILABLE_MESSAGE } }, 503);
  }
  return c.json({ error: { code: "internal_error", message: "Internal server error; see the server log." } }, 500);
}

/** The methods a 405 may name, in the order its Allow header lists them. */
const ROUTE_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/**
 * From an app's routes (`app.routes`), a function giving the methods a request path has routes for (empty: no route
 * at all). Middleware (method ALL) does not count: it answers nothing by itself.
 */
export function methodsOfPaths(routes: readonly { method: string; path: string }[]): (path: string) => string[] {
  const router = new TrieRouter<true>();
  for (const route of routes) if (route.method !== "ALL") router.add(route.method, route.path, true);
  return (path) => ROUTE_METHODS.filter((method) => router.match(method, path)[0].length > 0);
}
