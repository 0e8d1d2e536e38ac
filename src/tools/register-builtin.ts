/**
 * How one built-in tool joins a registry, for every process alike: the full registration
 * (`registerBuiltinTools` in tools/index.ts) and a one-tool process's loader (app/builtin-tools.ts). This module
 * loads no tool, so the loader can import it without importing every built-in.
 */
import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";
import type { RegisteredTool } from "../core/types.js";

/**
 * Registers the built-in `tool` in `registry` (default: the process-wide registry) unless a tool of its name is
 * there already (an earlier registration of the built-ins, or of this one tool), which is kept.
 */
export function registerBuiltinTool(tool: RegisteredTool, registry: ToolRegistryStore = defaultRegistry): void {
  if (!registry.get(tool.definition.name)) registry.register(tool);
}
