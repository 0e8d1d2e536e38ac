/**
 * The settings reference of the built-in tools (docs/settings-reference.md), generated from their parameter
 * descriptors so the documented ranges and defaults are the ones the code enforces. `npm run docs:settings`
 * rewrites the file; a test fails when it is stale.
 */
import "./index.js";
import { listTools, ToolRegistryStore } from "../core/registry.js";
import { settingsReferenceMarkdown } from "../core/settings-declaration.js";
import { buildShellTool, SHELL_KINDS } from "./shell/shell-tool.js";

const SHELLS = new Set<string>(SHELL_KINDS);

/**
 * The Markdown text of docs/settings-reference.md: every built-in tool's settings (the shells once, as bash: zsh
 * and PowerShell share its settings), with the common settings each tool receives at registration.
 */
export function builtinSettingsReference(): string {
  const shells = new ToolRegistryStore();
  const bash = shells.register(buildShellTool("bash", "/bin/bash"));
  const tools = [...listTools().filter((t) => !SHELLS.has(t.definition.name)), bash].sort((a, b) =>
    a.definition.name.localeCompare(b.definition.name),
  );
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
