/**
 * bash / zsh / powershell ("bash / zsh / powershell"): one implementation
 * (buildShellTool) that differs only by interpreter, on the shared process runner.
 *
 * - Registered only when the interpreter exists: bash and zsh looked up on PATH; powershell only on Windows
 *   (pwsh, then powershell). An unavailable shell is never offered to a model.
 * - Disabled by default (enabledByDefault false); a user opts in through the tool settings.
 * - Parameters: command (required), cwd (absolute, ~-prefixed or relative to the chat working directory, checked by
 *   the path policy; default the chat working directory).
 * - Settings: timeoutSeconds (5–600, default 30), maxOutputBytes (1 KB–1 MB per stream, default 100 KB), and the
 *   path policy's allowedPaths / deniedPaths / restrictPaths for cwd.
 * - The environment is filtered like shell_exec's (TAINT_ENV_ALLOWLIST): server secrets never reach the shell.
 * - A genuine timeout is a ToolTimeoutError (code `timeout`); a caller's abort a ToolAbortedError; any exit,
 *   including a non-zero one or death by a signal the command sent itself, is a result.
 */
import { NotFoundError, ToolArgumentError } from "../../core/errors.js";
import { PATH_POLICY_DESCRIPTORS } from "../../core/path-policy.js";
import { defaultRegistry, type ToolRegistryStore } from "../../core/registry.js";
import { defineTool, integerSetting } from "../../core/settings-declaration.js";
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type { EffectiveToolSettings, RegisteredTool, ToolParameterDescriptor } from "../../core/types.js";
import { findExecutable } from "./allowlist.js";
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

/** The shells this module can offer. */
/** The interpreter shells, each registered as a tool of that name where its interpreter is found. */
export const SHELL_KINDS = ["bash", "zsh", "powershell"] as const;
export type ShellKind = (typeof SHELL_KINDS)[number];

/** Result of runShellCommand and of the bash / zsh / powershell tools (ShellCommandResult). */
export interface ShellCommandResult {
  /** Captured stdout (head + elision marker + tail when over the cap). */
  stdout: string;
  /** Captured stderr (same rules). */
  stderr: string;
  /** The shell's exit code; null when it was killed by a signal. */
  exitCode: number | null;
  /** The signal that ended the shell (e.g. "SIGKILL"), or null. */
  signal: string | null;
  /** Wall time in milliseconds. */
  durationMs: number;
  /** True when stdout or stderr lost bytes to maxOutputBytes. */
  truncated: boolean;
  /** exited (normal exit, any code), timed_out (owned timer), aborted (caller cancel), signalled (other signal). */
  termination: Termination;
  /** True when the command ran inside the bubblewrap sandbox. */
  sandboxed: boolean;
  /** Bytes stdout and stderr carried in total (before capping), so a cut output still tells its true size. */
  stdoutBytes: number;
  stderrBytes: number;
}

/** Options of runShellCommand. */
export interface RunShellCommandOptions {
  shell: ShellKind;
  /** Absolute path of the interpreter (default: looked up on PATH; powershell: pwsh, then powershell). */
  executable?: string;
  /** The command text, run with `-c` (bash, zsh) or `-NoProfile -NonInteractive -Command` (powershell). */
  command: string;
  /** Working directory, absolute and already validated. */
  cwd: string;
  /** Child environment (default: filterEnvironment(process.env)). */
  env?: Record<string, string>;
  /**
   * Time budget in milliseconds. The tools take it from timeoutSeconds (5–600 s); callers of this function (and
   * tests) may pass any positive value, e.g. 1000.
   */
  timeoutMs: number;
  /** Per-stream cap in UTF-8 bytes (>= 256). */
  maxOutputBytes: number;
  /** Caller's cancel signal: aborting kills the whole call (termination `aborted`). */
  signal?: AbortSignal;
  /** Bounded pipe drain after the shell exits, in ms (default 250). */
  drainMs?: number;
  /** Receives the shell's pid once spawned (bwrap's when sandboxed). */
  onSpawn?: (pid: number) => void;
  /** How to confine the command (see sandbox/index.ts planSandbox); default: not sandboxed. */
  sandbox?: SandboxPlan;
  /** Receives every output chunk before capping (e.g. to spill the full output). */
  onOutput?: (stream: "stdout" | "stderr", chunk: Buffer) => void;
}

/** The interpreter arguments that run `command`. */
export function shellArguments(shell: ShellKind, command: string): string[] {
  return shell === "powershell" ? ["-NoProfile", "-NonInteractive", "-Command", command] : ["-c", command];
}

/**
 * Locates a shell's interpreter: bash and zsh on PATH; powershell only on Windows (pwsh, then powershell).
 * Returns the absolute path or null.
 */
export function findInterpreter(
  shell: ShellKind,
  pathValue: string | undefined = process.env.PATH,
  platform: NodeJS.Platform = process.platform,
): string | null {
  if (shell === "powershell") {
    if (platform !== "win32") return null;
    return findExecutable("pwsh", pathValue, { platform }) ?? findExecutable("powershell", pathValue, { platform });
  }
  return findExecutable(shell, pathValue, { platform });
}

/**
 * Runs a command through a shell interpreter in its own process group, with stdin closed, both streams capped,
 * and the whole call (children, grandchildren, background jobs, nohup, setsid daemons) SIGKILLed at the timeout
 * or on abort. A non-zero exit, a timeout and an abort are results (see `termination`).
 * Throws NotFoundError when the interpreter is missing, ToolArgumentError when the command is longer than the
 * operating system takes in one argument, ToolExecutionError when it cannot be spawned otherwise.
 */
export async function runShellCommand(options: RunShellCommandOptions): Promise<ShellCommandResult> {
  const executable = options.executable ?? findInterpreter(options.shell);
  if (!executable) {
    throw new NotFoundError(`The ${options.shell} interpreter is not installed on this server.`, {
      shell: options.shell,
    });
  }
  const launch = launchSpec(options.sandbox ?? { sandboxed: false, reason: "not requested" }, {
    file: executable,
    args: shellArguments(options.shell, options.command),
    argv0: options.shell,
    env: options.env ?? filterEnvironment(),
  });
  const run = await runProcess({
    ...launch,
    cwd: options.cwd,
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    maxStdoutBytes: options.maxOutputBytes,
    maxStderrBytes: options.maxOutputBytes,
    drainMs: options.drainMs,
    onSpawn: options.onSpawn,
    onOutput: options.onOutput,
  });
  return {
    stdout: run.stdout,
    stderr: run.stderr,
    exitCode: run.exitCode,
    signal: run.signal,
    durationMs: run.durationMs,
    truncated: run.truncated,
    termination: run.termination,
    sandboxed: options.sandbox?.sandboxed === true,
    stdoutBytes: run.stdoutBytes,
    stderrBytes: run.stderrBytes,
  };
}

/** maxOutputBytes setting: most bytes kept per output stream. */
export const MAX_OUTPUT_BYTES_DESCRIPTOR: ToolParameterDescriptor = {
  name: "maxOutputBytes",
  type: "integer",
  description: "Most bytes kept per output stream (stdout, stderr); longer output keeps its head and tail.",
  min: 1024,
  max: 1024 * 1024,
  default: 100 * 1024,
  unit: "bytes",
};

/**
 * Budget of one call in ms from the timeoutSeconds setting (a corrupt value falls back to the descriptor's default;
 * clamped to its range).
 */
export function shellTimeoutMs(settings: EffectiveToolSettings): number {
  return integerSetting(settings.values, TIMEOUT_SECONDS_DESCRIPTOR) * 1000;
}

const TITLES: Record<ShellKind, string> = { bash: "Bash", zsh: "Zsh", powershell: "PowerShell" };

/**
 * Builds the tool for one shell (buildShellTool). `executable` is the interpreter's absolute path.
 * The tool is disabled by default and manages its own timeout (the runtime only adds a backstop).
 */
export function buildShellTool(shell: ShellKind, executable: string): RegisteredTool {
  const title = TITLES[shell];
  return defineTool({
    // Approval: a person is asked by default; rules match the command line in its dialect.
    approval: {
      default: "ask",
      subject: { kind: "shell", argument: "command", dialect: shell },
      checkedPaths: [{ argument: "cwd", default: "." }],
    },
    definition: {
      name: shell,
      description: `Runs a ${title} command on the server and returns its stdout, stderr, exit code and timing. stdin is closed; long output keeps its head and tail; the command and everything it started are killed at the timeout.`,
      parameters: {
        type: "object",
        properties: {
          command: { type: "string", description: `The ${title} command to run.` },
          cwd: {
            type: "string",
            description:
              "Working directory: absolute, ~-prefixed, or relative to the chat working directory. Default: the chat working directory.",
          },
        },
        required: ["command"],
      },
    },
    settings: {
      title,
      description: `Lets the model run ${title} commands on the server. Off by default: enable only for users you trust with a shell.`,
      category: "system",
      annotations: { destructiveHint: true, openWorldHint: true },
      enabledByDefault: false,
      enablingRequiresAdmin: true,
      canDisable: true,
      parameterDescriptors: [
        TIMEOUT_SECONDS_DESCRIPTOR,
        MAX_OUTPUT_BYTES_DESCRIPTOR,
        ...PATH_POLICY_DESCRIPTORS,
        ...SANDBOX_DESCRIPTORS,
      ],
    },
    managesOwnTimeout: true,
    outputCapStyle: "head_tail",
    timeoutMs: (_args, settings) => shellTimeoutMs(settings),
    approvalHint: (_args, context) => sandboxApprovalHint(context, shell),
    async execute(rawArgs, context) {
      const args = rawArgs as { command: string; cwd?: string };
      if (args.command.trim() === "") {
        throw new ToolArgumentError('Invalid argument "command": must not be empty.', { argument: "command" });
      }
      if (args.command.includes("\0")) {
        throw new ToolArgumentError('Invalid argument "command": a command must not contain a NUL byte.', {
          argument: "command",
        });
      }
      const timeoutMs = shellTimeoutMs(context.settings);
      const maxOutputBytes = integerSetting(context.settings.values, MAX_OUTPUT_BYTES_DESCRIPTOR);
      const cwd = await resolveShellCwd(context, shell, args.command, args.cwd);
      let plan: SandboxPlan;
      try {
        plan = await planSandbox(context, cwd.real, shell);
      } catch (error) {
        return refuseShellCall(context, shell, args.command, cwd.absolute, error);
      }
      return runAuditedShellCall(
        context,
        {
          tool: shell,
          command: args.command,
          cwd: cwd.absolute,
          sandboxed: plan.sandboxed,
          timeoutMs,
          messages: {
            timedOut: `The ${shell} command did not finish within ${Math.round(timeoutMs / 1000)}s; it was killed with every process it started. Run a shorter or narrower command, run long jobs in smaller steps, or ask the user to raise timeoutSeconds.`,
            aborted: `The ${shell} command was cancelled by the caller; it was killed with every process it started.`,
          },
        },
        (onOutput) =>
          runShellCommand({
            shell,
            executable,
            command: args.command,
            cwd: cwd.real,
            timeoutMs,
            maxOutputBytes,
            signal: context.signal,
            sandbox: plan,
            onOutput,
          }),
      );
    },
  });
}

/** Options of registerShellTools (tests pass a fake PATH and platform). */
export interface RegisterShellToolsOptions {
  registry?: ToolRegistryStore;
  /** PATH to look the interpreters up on (default process.env.PATH). */
  pathValue?: string;
  platform?: NodeJS.Platform;
}

/**
 * Registers bash, zsh and powershell for each interpreter found (registerBuiltinTools calls it), in `registry`
 * (default: the process-wide one). Returns the names registered. Throws like registerTool on a duplicate name.
 */
export function registerShellTools(options: RegisterShellToolsOptions = {}): ShellKind[] {
  const registry = options.registry ?? defaultRegistry;
  const pathValue = ("pathValue" in options ? options.pathValue : process.env.PATH) ?? "";
  const platform = options.platform ?? process.platform;
  const registered: ShellKind[] = [];
  for (const shell of SHELL_KINDS) {
    const executable = findInterpreter(shell, pathValue, platform);
    if (!executable) continue;
    registry.register(buildShellTool(shell, executable));
    registered.push(shell);
  }
  return registered;
}

/**
 * Registers the interpreter shells in `registry` unless one of them is there already (an earlier call): what the
 * built-ins' registration and a one-tool process both use. Returns the names registered now.
 */
export function registerShellToolsOnce(registry: ToolRegistryStore = defaultRegistry): ShellKind[] {
  if (SHELL_KINDS.some((name) => registry.get(name))) return [];
  return registerShellTools({ registry });
}
