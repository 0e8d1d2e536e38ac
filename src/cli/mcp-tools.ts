/** Imports the tools of the configured external MCP servers into a CLI command's context. */
import type { AppContext } from "../app/context.js";

/**
 * Connects the configured external MCP servers so their tools (mcp__<server>__<tool>) are in the registry, waiting
 * (with `wait`) until each is connected or failed (within its connect timeout). With `forTool`, a command about that
 * one imported tool, only the servers whose name it can carry connect (each server is a process or a connection of
 * its own). When no server is configured (or none the tool name can name), this reads the configuration and
 * returns: the MCP client is not even loaded.
 */
export async function importMcpTools(ctx: AppContext, wait: boolean, forTool?: string): Promise<void> {
  const { loadAllServers } = await import("../mcp/client/servers.js");
  const { McpServerRepository } = await import("../storage/mcp-server-repository.js");
  const { serverMayOwnTool } = await import("../mcp/client/naming.js");
  const only = forTool === undefined ? undefined : (server: string) => serverMayOwnTool(server, forTool);
  // A configuration that cannot be read goes on to the manager, which records the error for status and doctor.
  const servers = await loadAllServers(new McpServerRepository(ctx.database.db)).then(
    (loaded) => loaded.servers,
    () => undefined,
  );
  if (servers && !servers.some((s) => !s.config.disabled && (only === undefined || only(s.name)))) return;
  const { createMcpClientManager } = await import("../mcp/client/index.js");
  const manager = createMcpClientManager(ctx);
  ctx.onClose(() => manager.close());
  await manager.start(only === undefined ? {} : { only });
  if (wait) await manager.settled();
}
