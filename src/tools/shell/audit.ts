/**
 * Security audit of shell executions: every bash / zsh / powershell / shell_exec call is recorded, refusals included (termination
 * `refused`), through the runtime's AuditSink (the `audit_log` table in the server and CLI).
 */
import { resolveAndValidatePath } from "../../core/path-policy.js";
import type { AuditEntry, ToolContext } from "../../core/types.js";

/** Terminations recorded in the audit log: the runner's, plus `refused` (allowlist / path policy) and `failed`. */
export type AuditTermination = "exited" | "timed_out" | "aborted" | "signalled" | "refused" | "failed";

/**
 * Records one execution for the calling user and chat. An audit sink failure is logged at error level and does
 * not fail the call (the command already ran); never throws.
 */
export async function recordShellAudit(
  context: ToolContext,
  entry: Omit<AuditEntry, "userId" | "chatId" | "termination"> & { termination: AuditTermination },
): Promise<void> {
  const full: AuditEntry = { userId: context.userId, chatId: context.chatId, ...entry };
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

/** The last `max` characters of a text (for error details), prefixed with "…" when cut. */
export function lastChars(text: string, max = 2000): string {
  if (text.length <= max) return text;
  let tail = text.slice(text.length - max);
  const first = tail.charCodeAt(0);
  if (first >= 0xdc00 && first <= 0xdfff) tail = tail.slice(1); // never start with half a surrogate pair
  return `…${tail}`;
}
