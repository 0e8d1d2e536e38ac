/**
 * The OpenAPI 3.1 document of the HTTP API, built from the same TypeBox schemas that validate requests and
 * responses (served at GET /api/openapi.json).
 */
import {
  AuditListResponse,
  ErrorBody,
  ExecuteToolBody,
  ExecuteToolResponse,
  ToolSettingsDescriptorSchema,
  ToolSettingsListResponse,
  UpdateToolSettingsBodySchema,
} from "./schemas.js";

const json = (schema: unknown) => ({ "application/json": { schema } });
const error = (description: string) => ({ description, content: json(ErrorBody) });
const secured = { security: [{ bearerAuth: [] }] };

/** Builds the OpenAPI document; `extraPaths` merges path items contributed by other route modules. */
export function buildOpenApiDocument(
  version: string,
  extraPaths: Record<string, unknown> = {},
): Record<string, unknown> {
  const toolName = { name: "toolName", in: "path", required: true, schema: { type: "string" } };
  return {
    openapi: "3.1.0",
    info: {
      title: "Toolhost API",
      version,
      description: "Per-user tool settings, tool execution, chats that run the tool loop, metrics.",
    },
    components: { securitySchemes: { bearerAuth: { type: "http", scheme: "bearer" } } },
    paths: {
      "/api/health": { get: { summary: "Liveness check (no auth).", responses: { 200: { description: "OK" } } } },
      "/api/settings/tools": {
        get: {
          ...secured,
          summary: "All registered tools with the current user's effective settings.",
          responses: {
            200: { description: "Tools", content: json(ToolSettingsListResponse) },
            401: error("Missing or invalid token"),
          },
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
                'Apply only if the stored settings still have this version (the ETag of a GET or PUT, e.g. "3"); 412 otherwise. Without it, each key is last-write-wins.',
              schema: { type: "string" },
            },
          ],
          summary:
            "Update a tool's enabled state and parameters (null resets a parameter to its default). Atomic: the row is read, checked and written in one transaction; the response's ETag is the new version.",
          requestBody: { required: true, content: json(UpdateToolSettingsBodySchema) },
          responses: {
            200: { description: "The new settings", content: json(ToolSettingsDescriptorSchema) },
            400: error("Malformed body or If-Match"),
            412: error("If-Match named an older version: GET again and retry"),
            404: error("Unknown tool"),
            422: error("ToolSettingsError: invalid parameters, or disabling a tool that cannot be disabled"),
          },
        },
      },
      "/api/tools": {
        get: {
          ...secured,
          summary: "Definitions of the user's enabled tools.",
          responses: { 200: { description: "Definitions" } },
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
            404: error("Unknown tool or chat"),
          },
        },
      },
      "/api/admin/audit": {
        get: {
          ...secured,
          summary:
            "Audit log of every tool call (who, tool, redacted arguments, working directory, outcome, approval) and every settings change (who changed what for whom, old and new values), newest first (admins only).",
          parameters: [
            { name: "user", in: "query", schema: { type: "string" } },
            { name: "tool", in: "query", schema: { type: "string" } },
            { name: "kind", in: "query", schema: { type: "string", enum: ["tool_call", "settings_change"] } },
            { name: "since", in: "query", schema: { type: "string", format: "date-time" } },
            { name: "until", in: "query", schema: { type: "string", format: "date-time" } },
            { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 1000 } },
          ],
          responses: { 200: { description: "Entries", content: json(AuditListResponse) }, 403: error("Not an admin") },
        },
      },
      "/api/images/{id}": {
        get: {
          ...secured,
          parameters: [{ name: "id", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
          summary: "The bytes of a generated image (owner only; 404 for anyone else).",
          responses: {
            200: { description: "image/png, image/jpeg or image/webp" },
            404: error("No such image for this user"),
          },
        },
      },
      "/mcp": {
        post: {
          ...secured,
          summary:
            "MCP Streamable HTTP endpoint (stateless, JSON responses): tools/list and tools/call over the user's enabled tools.",
          responses: { 200: { description: "JSON-RPC response" } },
        },
      },
      "/metrics": {
        get: {
          ...secured,
          summary: "Prometheus metrics.",
          responses: { 200: { description: "text/plain exposition" } },
        },
      },
      ...extraPaths,
    },
  };
}
