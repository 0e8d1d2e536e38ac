/**
 * Each built-in tool's loader, so that a process running one tool (`toolhost call get_current_datetime`) can load and
 * register that tool alone instead of every built-in (tools/index.ts imports them all). Keep it in step with
 * tools/index.ts: a test checks that both register the same tools.
 */

import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";
import type { RegisteredTool } from "../core/types.js";
import { registerBuiltinTool } from "../tools/register-builtin.js";

/** Loads a built-in tool's module and registers that tool in the registry given (once). */
type ToolModuleLoader = (registry: ToolRegistryStore) => Promise<unknown>;

/** The loader of one tool object exported by a module (registered as every built-in is: registerBuiltinTool). */
const one =
  (load: () => Promise<RegisteredTool>): ToolModuleLoader =>
  async (registry) =>
    registerBuiltinTool(await load(), registry);

/** The interpreter shells: registered together, for the interpreters on PATH. */
const shells: ToolModuleLoader = async (registry) => {
  const { registerShellToolsOnce } = await import("../tools/shell/shell-tool.js");
  registerShellToolsOnce(registry);
};

/**
 * Built-in tool name → the loader of that tool alone. generate_image also loads the provider table, which is the
 * process-wide source of provider keys the tool reads (see core/credentials.ts).
 */
export const BUILTIN_TOOL_MODULES: Readonly<Record<string, ToolModuleLoader>> = Object.freeze({
  generate_image: one(async () => {
    const [module] = await Promise.all([import("../tools/builtin/generate-image.js"), import("../providers/table.js")]);
    return module.generateImageTool;
  }),
  get_current_datetime: one(
    async () => (await import("../tools/builtin/get-current-datetime.js")).getCurrentDatetimeTool,
  ),
  list_directory: one(async () => (await import("../tools/builtin/list-directory.js")).listDirectoryTool),
  bash: shells,
  zsh: shells,
  powershell: shells,
  shell_exec: one(async () => (await import("../tools/shell/shell-exec.js")).shellExecTool),
  read_file: one(async () => (await import("../tools/builtin/read-file.js")).readFileTool),
  write_file: one(async () => (await import("../tools/builtin/write-file.js")).writeFileTool),
  file_list: one(async () => (await import("../tools/builtin/file-ops.js")).fileListTool),
  file_read: one(async () => (await import("../tools/builtin/file-ops.js")).fileReadTool),
  file_write: one(async () => (await import("../tools/builtin/file-ops.js")).fileWriteTool),
  glob: one(async () => (await import("../tools/builtin/glob.js")).globTool),
  grep: one(async () => (await import("../tools/builtin/grep.js")).grepTool),
  apply_patch: one(async () => (await import("../tools/builtin/apply-patch.js")).applyPatchTool),
  web_fetch: one(async () => (await import("../tools/builtin/web-fetch.js")).webFetchTool),
  web_search: one(async () => (await import("../tools/builtin/web-search.js")).webSearchTool),
  sql_schema: one(async () => (await import("../tools/builtin/sql-schema.js")).sqlSchemaTool),
  sql_query: one(async () => (await import("../tools/builtin/sql-query.js")).sqlQueryTool),
  agent_spawn: one(async () => (await import("../tools/builtin/agent-spawn.js")).agentSpawnTool),
  agent_send: one(async () => (await import("../tools/builtin/agent-send.js")).agentSendTool),
  agent_wait: one(async () => (await import("../tools/builtin/agent-wait.js")).agentWaitTool),
  agent_close: one(async () => (await import("../tools/builtin/agent-close.js")).agentCloseTool),
});

/**
 * Loads the module of the built-in tool `name` alone and registers that tool in `registry` (default: the
 * process-wide registry; once) and returns whether `registry` now holds `name`: false, loading nothing, when `name`
 * is not a built-in tool (then the caller loads every tool, so a mapping that went stale costs only speed, never the
 * call), or is an interpreter shell whose interpreter is not on PATH.
 */
export async function loadBuiltinTool(name: string, registry: ToolRegistryStore = defaultRegistry): Promise<boolean> {
  const load = Object.hasOwn(BUILTIN_TOOL_MODULES, name) ? BUILTIN_TOOL_MODULES[name] : undefined;
  if (!load) return false;
  await load(registry);
  return registry.get(name) !== undefined;
}

/**
 * The built-in tools that read spills (those declaring RegisteredTool.spillReader), by name; a test keeps it equal
 * to the built-ins' declarations.
 */
export const SPILL_READER_TOOLS: readonly string[] = Object.freeze(["read_file", "grep"]);

/**
 * Loads and registers in `registry` the built-in tools that read spills ({@link SPILL_READER_TOOLS}), each once:
 * the runtime of a one-tool process asks for them when a result is cut (ToolRuntimeOptions.loadSpillReaders), so
 * the cut result's reading hint names the reader enabled for the user.
 */
export async function loadSpillReaderTools(registry: ToolRegistryStore = defaultRegistry): Promise<void> {
  await Promise.all(SPILL_READER_TOOLS.map((name) => loadBuiltinTool(name, registry)));
}
