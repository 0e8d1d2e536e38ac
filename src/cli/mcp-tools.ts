/** Imports the tools of the configured external MCP servers into a CLI command's context. */
import type { AppContext } from "../app/context.js";

/**
 * Connects the configured external MCP servers so their tools (mcp__<server>__<tool>) are in the registry, waiting
 * (with `wait`) until each is connected or failed (within its connect timeout). With `forTool`, a command about that
 * one imported tool, only the servers whose name it can carry connect (each server is a process or a connection of
 * its own). With none configured this costs one read.
 */
export async function importMcpTools(ctx: AppContext, wait: boolean, forTool?: string): Promise<void> {
  const { createMcpClientManager, serverMayOwnTool } = await import("../mcp/client/index.js");
  const manager = createMcpClientManager(ctx);
  ctx.onClose(() => manager.close());
  await manager.start(forTool === undefined ? {} : { only: (server) => serverMayOwnTool(server, forTool) });
  if (wait) await manager.settled();
}
