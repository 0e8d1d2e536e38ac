/**
 * `toolhost/mcp`: the MCP pieces. The server side exposes a user's enabled tools to MCP clients, honouring their
 * settings and the approval policy; the client side imports other MCP servers' tools into a registry.
 *
 * - `createMcpServer(options)`: the official SDK's low-level `Server` for one user, to connect to any transport;
 * - `serveMcpStdio(options)`: serve on stdin/stdout until stdin ends (what `toolhost mcp` runs);
 * - `McpHttpEndpoint`: MCP Streamable HTTP (stateless) as `handle(request, caller) => Promise<Response>`, for a
 *   route of your own behind your own authentication;
 * - `McpClientManager`: connects to configured servers and registers their tools as `mcp__<server>__<tool>`.
 */
export {
  type McpServerConfig,
  type NamedMcpServerConfig,
  parseMcpServerConfig,
} from "./client/config.js";
export { createMcpClientManager } from "./client/index.js";
export { McpClientManager, type McpClientManagerOptions, type McpServerStatus } from "./client/manager.js";
export { type ElicitFunction, elicitationResponder } from "./server/elicitation.js";
export {
  type McpHttpCaller,
  McpHttpEndpoint,
  protectedResourceMetadata,
  WORKING_DIRECTORY_HEADER,
} from "./server/http.js";
export { type StdioServeOptions, serveMcpStdio } from "./server/stdio.js";
export { createMcpServer, MCP_DENY_RESPONDER, type McpSessionOptions } from "./server/tool-server.js";
