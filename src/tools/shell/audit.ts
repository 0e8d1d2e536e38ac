/**
 * Security audit of shell executions: every bash / zsh / powershell / shell_exec call is recorded, refusals included (termination
 * `refused`), through the runtime's AuditSink (the `audit_log` table in the server and CLI). Also the part of a
 * shell call around its process that every shell tool shares ({@link runAuditedShellCall}).
 */
import { ToolAbortedError, ToolTimeoutError } from "../../core/errors.js";
import { resolveAndValidatePath } from "../../core/path-policy.js";
import { redactBounded } from "../../core/redact.js";
import type { AuditEntry, ToolContext } from "../../core/types.js";
import type { Termination } from "./process-runner.js";

/** Terminations recorded in the audit log: the runner's, plus `refused` (allowlist / path policy) and `failed`. */
export type AuditTermination = "exited" | "timed_out" | "aborted" | "signalled" | "refused" | "failed";

/**
 * Records one execution for the calling user and chat. The command is recorded as the call's arguments are: a
 * redacted, bounded copy (redactBounded), so a secret on a command line or a megabyte command never lands whole in
 * the audit log. An audit sink failure is logged at error level and does not fail the call (the command already
 * ran); never throws.
 */
export async function recordShellAudit(
  context: ToolContext,
  entry: Omit<AuditEntry, "userId" | "chatId" | "termination"> & { termination: AuditTermination },
): Promise<void> {
  const command = redactBounded(entry.command) as AuditEntry["command"];
  const full: AuditEntry = { userId: context.userId, chatId: context.chatId, ...entry, command };
  try {
    await context.audit.record(full);
  } catch (error) {
    context.logger.error(
      { tool: entry.tool, userId: context.userId, err: (error as Error)?.message ?? String(error) },
      "could not record a shell execution in the audit log",
    );
  }
}

/** Records a call refused before anything ran (termination `refused`), then rethrows `error`. */
export async function refuseShellCall(
  context: ToolContext,
  tool: string,
  command: string | string[],
  cwd: string | null,
  error: unknown,
): Promise<never> {
  await recordShellAudit(context, { tool, command, cwd, exitCode: null, termination: "refused", durationMs: 0 });
  throw error;
}

/**
 * Resolves a shell call's `cwd` argument (default: the working directory) through the path policy; a refusal is
 * audited as `refused` and rethrown.
 */
export async function resolveShellCwd(
  context: ToolContext,
  tool: string,
  command: string | string[],
  cwdArgument: string | undefined,
): Promise<{ absolute: string; real: string }> {
  try {
    return await resolveAndValidatePath(cwdArgument ?? ".", context, {
      mustExist: true,
      kind: "directory",
      argument: "cwd",
    });
  } catch (error) {
    return refuseShellCall(context, tool, command, cwdArgument ?? null, error);
  }
}

/** What a shell call's run reports, as far as its audit and its end need it. */
export interface ShellRunOutcome {
  stdout: string;
  stderr: string;
  /** Exit code, or null when the process was killed by a signal. */
  exitCode: number | null;
  termination: Termination;
  /** Wall time in milliseconds. */
  durationMs: number;
}

/**
 * Runs a shell call's process and ends the call as every shell tool does. `run` receives the `onOutput` that passes
 * each stdout / stderr chunk to the runtime's full-output capture (when it has one). The run is audited (for `tool`,
 * `command`, `cwd`, `sandboxed`): with its exit code, termination and duration, or as `failed` when `run` throws,
 * which is rethrown. A run that timed out then throws ToolTimeoutError (`messages.timedOut`; details: tool,
 * termination, timeoutMs, and the last 2,000 characters of stdout and stderr), one the caller cancelled
 * ToolAbortedError (`messages.aborted`); any other run is returned.
 */
export async function runAuditedShellCall<R extends ShellRunOutcome>(
  context: ToolContext,
  call: {
    tool: string;
    command: string | string[];
    cwd: string;
    sandboxed: boolean;
    timeoutMs: number;
    messages: { timedOut: string; aborted: string };
  },
  run: (onOutput: (stream: "stdout" | "stderr", chunk: Buffer) => void) => Promise<R>,
): Promise<R> {
  const { tool, command, cwd, sandboxed, timeoutMs } = call;
  const stdoutSink = context.captureFullOutput?.("stdout");
  const stderrSink = context.captureFullOutput?.("stderr");
  let result: R;
  try {
    result = await run((stream, chunk) => (stream === "stdout" ? stdoutSink : stderrSink)?.write(chunk));
  } catch (error) {
    await recordShellAudit(context, {
      tool,
      command,
      cwd,
      exitCode: null,
      termination: "failed",
      durationMs: 0,
      sandboxed,
    });
    throw error;
  }
  await recordShellAudit(context, {
    tool,
    command,
    cwd,
    exitCode: result.exitCode,
    termination: result.termination,
    durationMs: result.durationMs,
    sandboxed,
  });
  if (result.termination === "timed_out") {
    throw new ToolTimeoutError(call.messages.timedOut, {
      tool,
      termination: "timed_out",
      timeoutMs,
      stdoutTail: lastChars(result.stdout),
      stderrTail: lastChars(result.stderr),
    });
  }
  if (result.termination === "aborted") {
    throw new ToolAbortedError(call.messages.aborted, { tool, termination: "aborted" });
  }
  return result;
}

/** The last `max` characters of a text (for error details), prefixed with "…" when cut. */
export function lastChars(text: string, max = 2000): string {
  if (text.length <= max) return text;
  let tail = text.slice(text.length - max);
  const first = tail.charCodeAt(0);
  if (first >= 0xdc00 && first <= 0xdfff) tail = tail.slice(1); // never start with half a surrogate pair
  return `…${tail}`;
}
