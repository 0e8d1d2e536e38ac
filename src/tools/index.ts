/**
 * The built-in tools, and the one call that registers them: {@link registerBuiltinTools}. The entry points make it
 * (the `toolhost` root module when imported, the application context when it opens); importing a tool's module
 * registers nothing. A new built-in is one import and one entry of {@link BUILTIN_TOOLS}.
 */
import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";
import type { RegisteredTool } from "../core/types.js";
import { agentCloseTool } from "./builtin/agent-close.js";
import { agentSendTool } from "./builtin/agent-send.js";
import { agentSpawnTool } from "./builtin/agent-spawn.js";
import { agentWaitTool } from "./builtin/agent-wait.js";
import { applyPatchTool } from "./builtin/apply-patch.js";
import { fileListTool, fileReadTool, fileWriteTool } from "./builtin/file-ops.js";
import { generateImageTool } from "./builtin/generate-image.js";
import { getCurrentDatetimeTool } from "./builtin/get-current-datetime.js";
import { globTool } from "./builtin/glob.js";
import { grepTool } from "./builtin/grep.js";
import { listDirectoryTool } from "./builtin/list-directory.js";
import { readFileTool } from "./builtin/read-file.js";
import { sqlQueryTool } from "./builtin/sql-query.js";
import { sqlSchemaTool } from "./builtin/sql-schema.js";
import { webFetchTool } from "./builtin/web-fetch.js";
import { webSearchTool } from "./builtin/web-search.js";
import { writeFileTool } from "./builtin/write-file.js";
import { registerBuiltinTool } from "./register-builtin.js";
import { shellExecTool } from "./shell/shell-exec.js";
import { registerShellToolsOnce } from "./shell/shell-tool.js";

/**
 * The built-ins every process has. The interpreter shells (bash, zsh, powershell) are added beside them by
 * {@link registerBuiltinTools} for each interpreter found on PATH.
 */
export const BUILTIN_TOOLS: readonly RegisteredTool[] = [
  generateImageTool,
  getCurrentDatetimeTool,
  listDirectoryTool,
  shellExecTool,
  readFileTool,
  writeFileTool,
  fileReadTool,
  fileWriteTool,
  fileListTool,
  globTool,
  grepTool,
  applyPatchTool,
  webFetchTool,
  webSearchTool,
  agentSpawnTool,
  agentSendTool,
  agentWaitTool,
  agentCloseTool,
  sqlSchemaTool,
  sqlQueryTool,
];

/**
 * Registers every built-in tool in `registry` (default: the process-wide registry), and bash, zsh and powershell
 * for each interpreter found on PATH. Idempotent: a built-in already there (an earlier call, or a one-tool process's
 * {@link registerBuiltinTool}) is kept. Throws Error, registering nothing, when another tool holds a built-in's name.
 */
export function registerBuiltinTools(registry: ToolRegistryStore = defaultRegistry): void {
  const taken = BUILTIN_TOOLS.filter((tool) => {
    const held = registry.get(tool.definition.name);
    return held !== undefined && held.execute !== tool.execute;
  }).map((tool) => tool.definition.name);
  if (taken.length > 0) {
    throw new Error(`Cannot register the built-in tools: ${taken.join(", ")} already registered by another tool.`);
  }
  for (const tool of BUILTIN_TOOLS) registerBuiltinTool(tool, registry);
  registerShellToolsOnce(registry);
}
