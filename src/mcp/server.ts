/**
 * MCP server adapter (DESIGN.md, "Surfaces"): exposes the registry to any MCP client (desktop assistants, IDEs,
 * agent frameworks) through the official SDK's low-level Server with ListTools/CallTool handlers. The same
 * per-user settings apply: only the user's enabled tools are listed, and calls go through executeTool
 * (argument validation, time budget, path policy, metrics), so a disabled tool stays refused.
 *
 * Transports: stdio (`toolhost mcp`) and Streamable HTTP at `/mcp` on the HTTP service (stateless: a fresh
 * server and transport per request, authenticated by the same bearer token as the API).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { ToolRuntime } from "../core/runtime.js";
import { VERSION } from "../version.js";

/** Who the MCP session acts for and where. */
export interface McpSessionOptions {
  runtime: ToolRuntime;
  userId: string;
  /** Working directory bound for path-taking tools (null: tools fall back to the process working directory). */
  workingDirectory?: string | null;
  /** Chat whose freshness ledger the session uses (null: one-off scope). */
  chatId?: string | null;
}

/**
 * Creates an MCP Server whose tools are the user's enabled Toolhost tools. A tool failure is returned as a
 * CallToolResult with `isError: true` and the classified error JSON as text, so the client's model can retry.
 */
export function createMcpServer(options: McpSessionOptions): Server {
  const { runtime, userId } = options;
  const server = new Server(
    { name: "toolhost", version: VERSION },
    { capabilities: { tools: { listChanged: false } } },
  );

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const { definitions } = await runtime.getEnabledToolRuntime(userId);
    return {
      tools: definitions.map((d) => ({
        name: d.name,
        description: d.description,
        inputSchema: { ...d.parameters, type: "object" as const },
      })),
    };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const progressToken = request.params._meta?.progressToken;
    let progress = 0;
    const outcome = await runtime.executeTool(request.params.name, request.params.arguments ?? {}, {
      userId,
      chatId: options.chatId ?? null,
      workingDirectory: options.workingDirectory ?? null,
      signal: extra.signal,
      onProgress: (event) => {
        if (progressToken === undefined) return;
        progress += 1;
        void extra
          .sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress, message: event.message ?? event.kind },
          })
          .catch(() => {});
      },
    });
    if (!outcome.ok) {
      return { isError: true, content: [{ type: "text", text: JSON.stringify({ error: outcome.error }) }] };
    }
    const result = outcome.result;
    const structured = result !== null && typeof result === "object" && !Array.isArray(result);
    return {
      content: [{ type: "text", text: typeof result === "string" ? result : JSON.stringify(result) }],
      ...(structured ? { structuredContent: result as Record<string, unknown> } : {}),
    };
  });
  return server;
}

/** Handles one Streamable HTTP request statelessly (a fresh server and transport), returning the response. */
export async function handleMcpHttpRequest(request: Request, options: McpSessionOptions): Promise<Response> {
  const server = createMcpServer(options);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request);
  } finally {
    // With JSON responses the body is complete when handleRequest resolves.
    void server.close().catch(() => {});
  }
}
