/** Imports the tools of the configured external MCP servers into a CLI command's context. */
import type { AppContext } from "../app/context.js";

/**
 * Connects the configured external MCP servers so their tools (mcp__<server>__<tool>) are in the registry, waiting
 * until each is connected or failed (within its connect timeout). With none configured this costs one read.
 */
export async function importMcpTools(ctx: AppContext, wait: boolean): Promise<void> {
  const { createMcpClientManager } = await import("../mcp/client/index.js");
  const manager = createMcpClientManager(ctx);
  ctx.onClose(() => manager.close());
  await manager.start();
  if (wait) await manager.settled();
}
