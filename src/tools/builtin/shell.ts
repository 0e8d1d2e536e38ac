/**
 * Registers the shell tools at import time (000_6d817c25d4590fa9.txt, "bash / zsh / powershell"; 002_b22707b29eca2f2a.txt,
 * "tool::shell_exec"): bash and zsh when their interpreter is on PATH, powershell only on Windows (pwsh, then
 * powershell), and shell_exec everywhere. All are disabled by default. The implementation is in src/tools/shell/.
 */
import { registerTool } from "../../core/registry.js";
import { shellExecTool } from "../shell/shell-exec.js";
import { registerShellTools } from "../shell/shell-tool.js";

registerShellTools();
registerTool(shellExecTool);
