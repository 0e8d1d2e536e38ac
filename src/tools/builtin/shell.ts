/**
 * Registers the shell tools at import time: bash and zsh when their interpreter is on PATH, powershell only on
 * Windows (pwsh, then powershell), and shell_exec (an argv, no shell) everywhere. All are disabled by default. The
 * implementation is in src/tools/shell/.
 */
import { registerTool } from "../../core/registry.js";
import { shellExecTool } from "../shell/shell-exec.js";
import { registerShellTools } from "../shell/shell-tool.js";

registerShellTools();
registerTool(shellExecTool);
