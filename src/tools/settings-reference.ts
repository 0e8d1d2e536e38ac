/**
 * The settings reference of the built-in tools (docs/settings-reference.md), generated from their parameter
 * descriptors so the documented ranges and defaults are the ones the code enforces. `npm run docs:settings`
 * rewrites the file; a test fails when it is stale.
 */
import { ToolRegistryStore } from "../core/registry.js";
import { settingsReferenceMarkdown } from "../core/settings-declaration.js";
import { BUILTIN_TOOLS } from "./index.js";
import { buildShellTool } from "./shell/shell-tool.js";

/**
 * The Markdown text of docs/settings-reference.md: every built-in tool's settings (the shells once, as bash: zsh
 * and PowerShell share its settings), with the common settings each tool receives at registration.
 */
export function builtinSettingsReference(): string {
  // A registry of its own (registration completes each tool's settings with the common ones), whatever the
  // process registered: every built-in, and the shells once, as bash.
  const registry = new ToolRegistryStore();
  for (const tool of BUILTIN_TOOLS) registry.register(tool);
  registry.register(buildShellTool("bash", "/bin/bash"));
  const tools = registry.list();
  const header = [
    "# Settings reference",
    "",
    "Generated from the tools' parameter descriptors by `npm run docs:settings`; do not edit by hand (a test fails",
    "when this file and the code disagree). Ranges are inclusive; for lists the range bounds the number of entries.",
    "A user changes a setting with `toolhost settings set <tool> name=value` or `PUT /api/settings/tools/<tool>`;",
    'settings marked "admin only" can be changed only by an admin. zsh and powershell have the same settings as bash.',
    "",
  ];
  return `${header.join("\n")}\n${settingsReferenceMarkdown(tools)}`;
}
