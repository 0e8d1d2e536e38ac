/**
 * Which module registers which built-in tool, so that a process running one tool (`toolhost call get_current_datetime`)
 * can load that tool's module alone instead of every built-in (tools/index.ts imports them all). Keep it in step with
 * tools/index.ts: a test checks that both register the same tools.
 */

import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";

/** Loads a built-in tool's module; importing it registers its tools in the default registry. */
type ToolModuleLoader = () => Promise<unknown>;

const shell: ToolModuleLoader = () => import("../tools/builtin/shell.js");
const fileOps: ToolModuleLoader = () => import("../tools/builtin/file-ops.js");

/**
 * Built-in tool name → the loader of the module that registers it. generate_image also loads the provider table,
 * which is the process-wide source of provider keys the tool reads (see core/credentials.ts).
 */
export const BUILTIN_TOOL_MODULES: Readonly<Record<string, ToolModuleLoader>> = Object.freeze({
  generate_image: () => Promise.all([import("../tools/builtin/generate-image.js"), import("../providers/table.js")]),
  get_current_datetime: () => import("../tools/builtin/get-current-datetime.js"),
  list_directory: () => import("../tools/builtin/list-directory.js"),
  bash: shell,
  shell_exec: shell,
  read_file: () => import("../tools/builtin/read-file.js"),
  write_file: () => import("../tools/builtin/write-file.js"),
  file_list: fileOps,
  file_read: fileOps,
  file_write: fileOps,
  glob: () => import("../tools/builtin/glob.js"),
  grep: () => import("../tools/builtin/grep.js"),
  apply_patch: () => import("../tools/builtin/apply-patch.js"),
  web_fetch: () => import("../tools/builtin/web-fetch.js"),
  web_search: () => import("../tools/builtin/web-search.js"),
  sql_schema: () => import("../tools/builtin/sql-schema.js"),
  sql_query: () => import("../tools/builtin/sql-query.js"),
  agent_spawn: () => import("../tools/builtin/agent-spawn.js"),
  agent_send: () => import("../tools/builtin/agent-send.js"),
  agent_wait: () => import("../tools/builtin/agent-wait.js"),
  agent_close: () => import("../tools/builtin/agent-close.js"),
});

/**
 * Loads the module of the built-in tool `name` (registering its tools in the default registry, once per process) and
 * returns whether `registry` now holds `name`: false, loading nothing, when `name` is not a built-in tool (then the
 * caller loads every tool, so a mapping that went stale costs only speed, never the call).
 */
export async function loadBuiltinTool(name: string, registry: ToolRegistryStore = defaultRegistry): Promise<boolean> {
  const load = Object.hasOwn(BUILTIN_TOOL_MODULES, name) ? BUILTIN_TOOL_MODULES[name] : undefined;
  if (!load) return false;
  await load();
  return registry.get(name) !== undefined;
}
