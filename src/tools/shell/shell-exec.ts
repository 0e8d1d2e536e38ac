/**
 * shell_exec (also `trigger("tool::shell_exec", …)`): runs one allowlisted executable with an argv array.
 * No shell interpretation: arguments reach the program verbatim, so `;`, `|`, `$(…)`, backticks, globs and
 * redirections are inert text.
 *
 * - argv[0] must be a bare name on the effective allowlist (settings `allowlistPreset` default | strict | custom and
 *   `allowedCommands`), resolved to a real executable outside the working directory (see allowlist.ts).
 * - cwd: relative to the chat working directory, contained by the path policy.
 * - Environment filtered through TAINT_ENV_ALLOWLIST (env.ts).
 * - timeout in milliseconds (default 120000); stdout capped at 100 KB, stderr at 50 KB (head + tail kept).
 * - Result {stdout, stderr, exitCode} plus signal, termination, truncated and durationMs. A timeout is a
 *   ToolTimeoutError, a caller's cancel a ToolAbortedError.
 * - Every execution (refusals included) is recorded in the security audit log.
 * - Disabled by default, like the interactive shells.
 */
import { ToolArgumentError } from "../../core/errors.js";
import { PATH_POLICY_DESCRIPTORS } from "../../core/path-policy.js";
import { defineTool } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolParameterDescriptor } from "../../core/types.js";
import {
  ALLOWED_COMMANDS_DESCRIPTOR,
  ALLOWLIST_PRESET_DESCRIPTOR,
  effectiveAllowlist,
  resolveAllowedExecutable,
} from "./allowlist.js";
import { refuseShellCall, resolveShellCwd, runAuditedShellCall } from "./audit.js";
import { filterEnvironment } from "./env.js";
import { runProcess, type Termination } from "./process-runner.js";
import {
  launchSpec,
  planSandbox,
  SANDBOX_DESCRIPTORS,
  type SandboxPlan,
  sandboxApprovalHint,
} from "./sandbox/index.js";

/** Default time budget of shell_exec, in milliseconds. */
export const SHELL_EXEC_DEFAULT_TIMEOUT_MS = 120_000;
/** Largest accepted `timeout` argument, in milliseconds (10 minutes, the shells' timeoutSeconds maximum). */
export const SHELL_EXEC_MAX_TIMEOUT_MS = 600_000;
/** stdout cap of shell_exec in UTF-8 bytes ("limited to 100KB"). */
export const SHELL_EXEC_MAX_STDOUT_BYTES = 100 * 1024;
/** stderr cap of shell_exec in UTF-8 bytes ("limited to 50KB"). */
export const SHELL_EXEC_MAX_STDERR_BYTES = 50 * 1024;

/** Result of shell_exec. */
export interface ShellExecResult {
  stdout: string;
  stderr: string;
  /** Exit code (0 = success); null when the program was killed by a signal. */
  exitCode: number | null;
  signal: string | null;
  termination: Termination;
  truncated: boolean;
  durationMs: number;
  /** True when the program ran inside the bubblewrap sandbox. */
  sandboxed: boolean;
  /** Bytes stdout and stderr carried in total (before capping). */
  stdoutBytes: number;
  stderrBytes: number;
}

const parameterDescriptors: ToolParameterDescriptor[] = [
  ALLOWLIST_PRESET_DESCRIPTOR,
  ALLOWED_COMMANDS_DESCRIPTOR,
  ...PATH_POLICY_DESCRIPTORS,
  ...SANDBOX_DESCRIPTORS,
];

/** The shell_exec tool (registered by src/tools/builtin/shell.ts). */
export const shellExecTool: RegisteredTool = defineTool({
  // Approval: a person is asked by default; rules match the argv.
  approval: {
    default: "ask",
    subject: { kind: "shell", argument: "argv", dialect: "argv" },
    checkedPaths: [{ argument: "cwd", default: "." }],
  },
  definition: {
    name: "shell_exec",
    description:
      'Runs one allowlisted program with an argument array, without a shell: ["git", "status", "--short"]. Pipes, redirections, globs, variables and ";" are not interpreted. Returns stdout (up to 100 KB), stderr (up to 50 KB) and the exit code.',
    parameters: {
      type: "object",
      properties: {
        argv: {
          type: "array",
          items: { type: "string" },
          minItems: 1,
          description:
            'The program and its arguments, e.g. ["git", "log", "-n", "5"]. argv[0] must be an allowlisted command name.',
        },
        cwd: {
          type: "string",
          description:
            "Working directory, relative to the chat working directory (or absolute inside the allowed paths).",
        },
        timeout: {
          type: "integer",
          minimum: 1,
          maximum: SHELL_EXEC_MAX_TIMEOUT_MS,
          description: "Timeout in milliseconds (default 120000).",
        },
      },
      required: ["argv"],
    },
  },
  settings: {
    title: "Run allowlisted commands",
    description:
      "Lets the model run allowlisted programs (git, ls, …) with argument arrays, without a shell. Off by default.",
    category: "system",
    annotations: { destructiveHint: true, openWorldHint: true },
    enabledByDefault: false,
    enablingRequiresAdmin: true,
    canDisable: true,
    parameterDescriptors,
  },
  managesOwnTimeout: true,
  outputCapStyle: "head_tail",
  approvalHint: (_args, context) => sandboxApprovalHint(context, "shell_exec"),
  timeoutMs: (args) => (typeof args.timeout === "number" ? args.timeout : SHELL_EXEC_DEFAULT_TIMEOUT_MS),
  async execute(rawArgs, context) {
    const args = rawArgs as { argv: string[]; cwd?: string; timeout?: number };
    const argv = args.argv;
    const name = argv[0] ?? "";
    const timeoutMs = args.timeout ?? SHELL_EXEC_DEFAULT_TIMEOUT_MS;
    const refuse = (error: unknown, cwd: string | null) =>
      refuseShellCall(context, "shell_exec", [...argv], cwd, error);

    const nul = argv.findIndex((a) => a.includes("\0"));
    if (name.trim() === "" || nul >= 0) {
      return refuse(
        new ToolArgumentError(
          nul >= 0
            ? `Invalid argument "argv": element ${nul} contains a NUL byte, which no program can receive.`
            : 'Invalid argument "argv": argv[0] must be a command name, e.g. "git".',
          { argument: "argv" },
        ),
        args.cwd ?? null,
      );
    }

    const cwd = await resolveShellCwd(context, "shell_exec", [...argv], args.cwd);

    const env = filterEnvironment();
    let file: string;
    try {
      const untrustedRoots = [cwd.real, cwd.absolute];
      if (context.workingDirectory) untrustedRoots.push(context.workingDirectory);
      file = resolveAllowedExecutable(name, {
        allowlist: effectiveAllowlist(context.settings.values),
        pathValue: env.PATH ?? env.Path,
        untrustedRoots,
      });
    } catch (error) {
      return refuse(error, cwd.absolute);
    }

    let plan: SandboxPlan;
    try {
      plan = await planSandbox(context, cwd.real, "shell_exec");
    } catch (error) {
      return refuse(error, cwd.absolute);
    }
    const run = await runAuditedShellCall(
      context,
      {
        tool: "shell_exec",
        command: [...argv],
        cwd: cwd.absolute,
        sandboxed: plan.sandboxed,
        timeoutMs,
        messages: {
          timedOut: `"${name}" did not finish within ${timeoutMs} ms and was killed with every process it started. Pass a larger "timeout" (milliseconds, up to ${SHELL_EXEC_MAX_TIMEOUT_MS}) or a narrower command.`,
          aborted: `"${name}" was cancelled by the caller and killed with every process it started.`,
        },
      },
      (onOutput) =>
        runProcess({
          ...launchSpec(plan, { file, args: argv.slice(1), argv0: name, env }),
          cwd: cwd.real,
          timeoutMs,
          onOutput,
          signal: context.signal,
          maxStdoutBytes: SHELL_EXEC_MAX_STDOUT_BYTES,
          maxStderrBytes: SHELL_EXEC_MAX_STDERR_BYTES,
        }),
    );
    return {
      stdout: run.stdout,
      stderr: run.stderr,
      exitCode: run.exitCode,
      signal: run.signal,
      termination: run.termination,
      truncated: run.truncated,
      durationMs: run.durationMs,
      sandboxed: plan.sandboxed,
      stdoutBytes: run.stdoutBytes,
      stderrBytes: run.stderrBytes,
    } satisfies ShellExecResult;
  },
});
