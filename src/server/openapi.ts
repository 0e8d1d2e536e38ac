/**
 * The OpenAPI 3.1 document of the HTTP API, built from the same TypeBox schemas that validate requests and
 * responses (served at GET /api/openapi.json). Schemas used in several places live once under
 * `components.schemas` and are referenced (`$ref`), so the document holds no repeated `$id`; every secured
 * operation documents its 401, and admin-only ones their 403, through shared `components.responses`.
 */
import { TIME_BOUND_RULE } from "../app/time-bound.js";
import { ChatMessageSchema, ChatSchema } from "./routes/chats.js";
import { AddMcpServerBody } from "./routes/mcp-servers.js";
import {
  AdminUpdateToolSettingsBodySchema,
  AuditListResponse,
  CreateTokenBody,
  ErrorBody,
  ExecuteToolBody,
  ExecuteToolResponse,
  IssuedTokenResponse,
  MeResponse,
  TokenInfoSchema,
  TokenListResponse,
  ToolDefinitionSchema,
  ToolListResponse,
  ToolParameterDescriptorSchema,
  ToolSettingsDescriptorSchema,
  ToolSettingsListResponse,
  UnlockResponse,
  UpdateToolSettingsBodySchema,
} from "./schemas.js";

const json = (schema: unknown) => ({ "application/json": { schema } });
const error = (description: string) => ({ description, content: json(ErrorBody) });
const secured = { security: [{ bearerAuth: [] }] };
const ERROR_REF = { $ref: "#/components/schemas/ErrorBody" };

/** What the admin API shows of an external MCP server (McpServerStatus; header and env values never appear). */
const McpServerStatusSchema = {
  type: "object",
  required: ["name", "source", "transport", "target", "trusted", "state", "lastError", "tools"],
  properties: {
    name: { type: "string" },
    source: { type: "string", description: "config-file or database" },
    transport: { type: "string", enum: ["stdio", "http"] },
    target: { type: "string", description: "The command line or URL" },
    trusted: { type: "boolean" },
    state: { type: "string", enum: ["connecting", "connected", "failed", "disabled"] },
    lastError: { type: ["string", "null"] },
    stderrTail: { type: "string" },
    warnings: { type: "array", items: { type: "string" } },
    tools: { type: "array", items: { type: "object" } },
    serverInfo: { type: ["object", "null"] },
    protocolVersion: { type: ["string", "null"] },
    connectedAt: { type: ["string", "null"] },
  },
};

/** Schemas given a component name (by identity); any other schema with an `$id` is hoisted under that id. */
const NAMED_SCHEMAS = new Map<object, string>([
  [ErrorBody, "ErrorBody"],
  [ToolSettingsDescriptorSchema, "ToolSettingsDescriptor"],
  [ToolParameterDescriptorSchema, "ToolParameterDescriptor"],
  [ToolDefinitionSchema, "ToolDefinition"],
  [ChatSchema, "Chat"],
  [ChatMessageSchema, "ChatMessage"],
  [TokenInfoSchema, "TokenInfo"],
]);

const HTTP_METHODS = ["get", "put", "post", "delete", "patch", "head", "options"] as const;

/** Builds the OpenAPI document; `extraPaths` merges path items contributed by other route modules. */
export function buildOpenApiDocument(
  version: string,
  extraPaths: Record<string, unknown> = {},
): Record<string, unknown> {
  const toolName = { name: "toolName", in: "path", required: true, schema: { type: "string" } };
  const serverName = { name: "name", in: "path", required: true, schema: { type: "string" } };
  const tokenId = {
    name: "id",
    in: "path",
    required: true,
    schema: { type: "string" },
    description: "Token id (or its first 6+ characters)",
  };
  const document = {
    openapi: "3.1.0",
    info: {
      title: "Toolhost API",
      version,
      description: "Per-user tool settings, tool execution, chats that run the tool loop, metrics.",
      license: { name: "MIT", identifier: "MIT" },
    },
    servers: [{ url: "/" }],
    components: {
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer" } },
      responses: {
        Unauthorized: { description: "Missing or invalid bearer token (code unauthorized)", content: json(ERROR_REF) },
        Forbidden: {
          description: "Not allowed for this user, e.g. admins only (code access_denied)",
          content: json(ERROR_REF),
        },
      },
      schemas: {} as Record<string, unknown>,
    },
    paths: {
      "/api/health": {
        get: {
          summary: "Liveness check (no auth).",
          security: [],
          responses: {
            200: {
              description: "OK",
              content: json({
                type: "object",
                properties: { ok: { type: "boolean" }, version: { type: "string" } },
                required: ["ok", "version"],
              }),
            },
          },
        },
      },
      "/api/openapi.json": {
        get: {
          summary: "This document (no auth).",
          security: [],
          responses: { 200: { description: "OpenAPI 3.1 document", content: json({ type: "object" }) } },
        },
      },
      "/api/me": {
        get: {
          ...secured,
          summary: "Who the token belongs to, and whether that user is an admin.",
          responses: { 200: { description: "The user", content: json(MeResponse) } },
        },
      },
      "/api/settings/tools": {
        get: {
          ...secured,
          summary: "All registered tools with the current user's effective settings.",
          responses: { 200: { description: "Tools", content: json(ToolSettingsListResponse) } },
        },
      },
      "/api/settings/tools/{toolName}": {
        get: {
          ...secured,
          parameters: [toolName],
          summary: "One tool's effective settings.",
          responses: {
            200: { description: "Tool", content: json(ToolSettingsDescriptorSchema) },
            404: error("Unknown tool"),
          },
        },
        put: {
          ...secured,
          parameters: [
            toolName,
            {
              name: "If-Match",
              in: "header",
              required: false,
              description:
                'Apply only if the stored settings still have this version (the ETag of a GET or PUT, e.g. "3"; a list applies when one of them is current); 412 otherwise (weak tags never match). Without it, each key is last-write-wins.',
              schema: { type: "string" },
            },
          ],
          summary:
            "Update a tool's enabled state and parameters (null resets a parameter to its default). Atomic: the row is read, checked and written in one transaction; the response's ETag is the new version.",
          requestBody: { required: true, content: json(UpdateToolSettingsBodySchema) },
          responses: {
            200: { description: "The new settings", content: json(ToolSettingsDescriptorSchema) },
            400: error("Malformed body or If-Match"),
            403: { $ref: "#/components/responses/Forbidden" },
            412: error("If-Match named an older version: GET again and retry"),
            404: error("Unknown tool"),
            422: error("ToolSettingsError: invalid parameters, or disabling a tool that cannot be disabled"),
          },
        },
      },
      "/api/tools": {
        get: {
          ...secured,
          summary: "Definitions of the user's enabled tools that can work on this host (what models are offered).",
          responses: { 200: { description: "Definitions", content: json(ToolListResponse) } },
        },
      },
      "/api/tools/{toolName}/execute": {
        post: {
          ...secured,
          parameters: [toolName],
          summary: "Execute a tool; a classified tool error is returned as ok:false.",
          requestBody: { required: true, content: json(ExecuteToolBody) },
          responses: {
            200: { description: "Outcome", content: json(ExecuteToolResponse) },
            400: error("Malformed body, or a workingDirectory that does not exist"),
            403: { $ref: "#/components/responses/Forbidden" },
            404: error("Unknown tool or chat"),
          },
        },
      },
      "/api/admin/audit": {
        get: {
          ...secured,
          summary: "The audit log of tool calls and settings changes, newest first (admins only).",
          parameters: [
            { name: "user", in: "query", schema: { type: "string" } },
            { name: "tool", in: "query", schema: { type: "string" } },
            { name: "kind", in: "query", schema: { type: "string", enum: ["tool_call", "settings_change"] } },
            {
              name: "since",
              in: "query",
              description: `Entries at or after this time: ${TIME_BOUND_RULE}.`,
              schema: { type: "string" },
            },
            {
              name: "until",
              in: "query",
              description: `Entries before this time: ${TIME_BOUND_RULE}.`,
              schema: { type: "string" },
            },
            { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 1000, default: 100 } },
          ],
          responses: {
            200: { description: "Entries", content: json(AuditListResponse) },
            400: error("Invalid query: limit, kind, since, until or user"),
          },
        },
      },
      "/api/admin/users/{user}/settings/tools": {
        get: {
          ...secured,
          parameters: [{ name: "user", in: "path", required: true, schema: { type: "string" } }],
          summary: "A user's tool settings with the keys admins locked for them (lockedKeys) (admins only).",
          responses: {
            200: { description: "Tools", content: json(ToolSettingsListResponse) },
            403: error("Not an admin"),
          },
        },
      },
      "/api/admin/users/{user}/settings/tools/{toolName}": {
        get: {
          ...secured,
          parameters: [{ name: "user", in: "path", required: true, schema: { type: "string" } }, toolName],
          summary: "One tool's settings of a user, with the keys admins locked for them (admins only).",
          responses: {
            200: { description: "Tool", content: json(ToolSettingsDescriptorSchema) },
            404: error("Unknown tool"),
          },
        },
        put: {
          ...secured,
          parameters: [
            { name: "user", in: "path", required: true, schema: { type: "string" } },
            toolName,
            {
              name: "If-Match",
              in: "header",
              required: false,
              description:
                'Apply only if the user\'s stored settings still have this version (an ETag, e.g. "3"); 412 otherwise.',
              schema: { type: "string" },
            },
          ],
          summary:
            "Set a user's tool settings as an admin: the same body and validation as PUT /api/settings/tools/{toolName} (admin-only values allowed), plus lock (default true: the user cannot change what is set here back) (admins only).",
          requestBody: { required: true, content: json(AdminUpdateToolSettingsBodySchema) },
          responses: {
            200: { description: "The user's new settings", content: json(ToolSettingsDescriptorSchema) },
            400: error("Malformed body or If-Match"),
            403: error("Not an admin"),
            404: error("Unknown tool"),
            412: error("If-Match named an older version: GET again and retry"),
            422: error("Invalid parameters, or disabling a tool that cannot be disabled"),
          },
        },
      },
      "/api/admin/users/{user}/settings/tools/{toolName}/locks": {
        delete: {
          ...secured,
          parameters: [
            { name: "user", in: "path", required: true, schema: { type: "string" } },
            toolName,
            {
              name: "key",
              in: "query",
              required: false,
              description: 'A key to unlock ("enabled" or a parameter name); repeat it for several; none: every lock.',
              schema: { type: "array", items: { type: "string" } },
              style: "form",
              explode: true,
            },
          ],
          summary:
            "Remove admin locks from a user's settings of a tool; the values stay and the user may change them again (admins only).",
          responses: {
            200: { description: "The keys unlocked and the tool's settings", content: json(UnlockResponse) },
            403: error("Not an admin"),
            404: error("Unknown tool"),
            422: error("A key the tool does not have (invalid_settings); nothing was unlocked"),
          },
        },
      },
      "/api/admin/tokens": {
        get: {
          ...secured,
          summary: "API tokens (never the tokens themselves), oldest first (admins only).",
          parameters: [{ name: "user", in: "query", schema: { type: "string" } }],
          responses: { 200: { description: "Tokens", content: json(TokenListResponse) } },
        },
        post: {
          ...secured,
          summary: "Create a token for a user; the token is in this response only (admins only).",
          requestBody: { required: true, content: json(CreateTokenBody) },
          responses: {
            201: { description: "The new token", content: json(IssuedTokenResponse) },
            400: error("Malformed body"),
          },
        },
      },
      "/api/admin/tokens/{id}": {
        delete: {
          ...secured,
          parameters: [tokenId],
          summary: "Revoke a token (admins only).",
          responses: {
            200: { description: "The revoked token", content: json(TokenInfoSchema) },
            404: error("No such token"),
            409: error("The id prefix matches several tokens"),
          },
        },
      },
      "/api/admin/tokens/{id}/rotate": {
        post: {
          ...secured,
          parameters: [tokenId],
          summary: "Replace a token by a new one for the same user and label (admins only).",
          responses: {
            200: { description: "The new token", content: json(IssuedTokenResponse) },
            400: error("The token has expired (its replacement would keep the expiry): create a new one"),
            404: error("No such token"),
            409: error("The id prefix matches several tokens"),
          },
        },
      },
      "/api/admin/mcp-servers": {
        get: {
          ...secured,
          summary: "External MCP servers with their connection state and imported tools (admins only).",
          responses: {
            200: {
              description: "Servers",
              content: json({
                type: "object",
                required: ["servers"],
                properties: { servers: { type: "array", items: McpServerStatusSchema } },
              }),
            },
          },
        },
        post: {
          ...secured,
          summary: "Add an external MCP server (stored in the database; connects in the background) (admins only).",
          requestBody: { required: true, content: json(AddMcpServerBody) },
          responses: {
            201: { description: "Its status", content: json(McpServerStatusSchema) },
            400: error("Malformed body or configuration"),
            409: error("A server with that name exists"),
          },
        },
      },
      "/api/admin/mcp-servers/{name}": {
        get: {
          ...secured,
          parameters: [serverName],
          summary: "One external MCP server's status (admins only).",
          responses: {
            200: { description: "Its status", content: json(McpServerStatusSchema) },
            404: error("No such server"),
          },
        },
        delete: {
          ...secured,
          parameters: [serverName],
          summary: "Remove an external MCP server added through the API; its tools disappear (admins only).",
          responses: { 204: { description: "Removed" }, 404: error("No such server") },
        },
      },
      "/api/admin/mcp-servers/{name}/reconnect": {
        post: {
          ...secured,
          parameters: [serverName],
          summary: "Reconnect an external MCP server now; answers once it is connected or failed (admins only).",
          responses: {
            200: { description: "Its status", content: json(McpServerStatusSchema) },
            404: error("No such server"),
          },
        },
      },
      "/api/images/{id}": {
        get: {
          ...secured,
          parameters: [{ name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
          summary: "The bytes of a generated image (owner only; 404 for anyone else).",
          responses: {
            200: {
              description: "The image",
              content: {
                "image/png": { schema: { type: "string", contentMediaType: "image/png" } },
                "image/jpeg": { schema: { type: "string", contentMediaType: "image/jpeg" } },
                "image/webp": { schema: { type: "string", contentMediaType: "image/webp" } },
              },
            },
            400: error("Malformed id"),
            404: error("No such image for this user"),
          },
        },
      },
      "/mcp": {
        post: {
          ...secured,
          summary:
            "MCP Streamable HTTP endpoint (stateless, JSON responses): tools/list and tools/call over the user's enabled tools.",
          responses: { 200: { description: "JSON-RPC response", content: json({ type: "object" }) } },
        },
      },
      "/metrics": {
        get: {
          ...secured,
          summary: "Prometheus metrics (admins only).",
          responses: {
            200: { description: "text/plain exposition", content: { "text/plain": { schema: { type: "string" } } } },
          },
        },
      },
      ...extraPaths,
    } as Record<string, Record<string, unknown>>,
  };
  addAuthResponses(document.paths);
  document.components.schemas = hoistSchemas(document.paths);
  return document;
}

/** Every secured operation answers 401 without a valid token; admin-only ones (/api/admin, /metrics) 403. */
function addAuthResponses(paths: Record<string, Record<string, unknown>>): void {
  for (const [path, original] of Object.entries(paths)) {
    // Copies: the path items of other modules are shared module-level objects.
    const item = { ...original };
    paths[path] = item;
    for (const method of HTTP_METHODS) {
      const found = item[method] as { security?: unknown[]; responses?: Record<string, unknown> } | undefined;
      if (!found?.responses) continue;
      const operation = { ...found, responses: { ...found.responses } };
      item[method] = operation;
      const isSecured = Array.isArray(operation.security) && operation.security.length > 0;
      if (!isSecured) continue;
      operation.responses["401"] ??= { $ref: "#/components/responses/Unauthorized" };
      if (path.startsWith("/api/admin/") || path === "/metrics")
        operation.responses["403"] ??= { $ref: "#/components/responses/Forbidden" };
    }
  }
}

/**
 * Replaces every named schema (NAMED_SCHEMAS, or any object with an `$id`) inside `paths` by a `$ref` to one
 * entry of `components.schemas`, whose `$id` is dropped. Returns the components. The input is modified in place.
 */
function hoistSchemas(paths: Record<string, unknown>): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const nameOf = (node: Record<string, unknown>, original: object): string | undefined =>
    NAMED_SCHEMAS.get(original) ?? (typeof node.$id === "string" ? node.$id : undefined);
  // Path items share the TypeBox schema objects, so a schema is recognized by identity wherever it is used.
  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (!node || typeof node !== "object") return node;
    const object = node as Record<string, unknown>;
    const name = nameOf(object, node);
    if (name) {
      if (!(name in components)) {
        components[name] = {}; // placeholder against cycles
        const { $id: _id, ...rest } = object;
        components[name] = visitChildren(rest);
      }
      return { $ref: `#/components/schemas/${name}` };
    }
    return visitChildren(object);
  };
  const visitChildren = (object: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(Object.entries(object).map(([k, v]) => [k, visit(v)]));
  for (const [path, item] of Object.entries(paths)) paths[path] = visitChildren(item as Record<string, unknown>);
  return components;
}
