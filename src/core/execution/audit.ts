/**
 * Stage 5 of a call, audit: one event per call (who, tool, redacted arguments, working directory, outcome and error
 * code, duration, the approval decision and who made it), with the entry the tool recorded itself (shell command,
 * exit code, sandboxed) folded in. The runtime starts the write and does not wait for it before answering; it tracks
 * the write, so a shutdown waits for it (a sink may batch: see SqlAuditLog).
 */
import type { ArgumentDecoding } from "../arg-parsing.js";
import { checkValueLimits, scanJsonText, TOOL_ARGUMENT_LIMITS } from "../json-limits.js";
import { redactBounded } from "../redact.js";
import type { AuditEntry, AuditEvent, AuditSink, Logger } from "../types.js";
import { resolveDirectory } from "./call-context.js";
import type { ToolCallContext, ToolCallOutcome } from "./types.js";

/**
 * Raw model arguments as a value for the audit: a JSON string decoded when it parses, anything else as is. Input
 * beyond the argument limits (or not JSON data) is recorded as a short note instead, never parsed or copied whole.
 */
function decodeArguments(args: unknown): unknown {
  if (typeof args !== "string") {
    const problem = checkValueLimits(args, TOOL_ARGUMENT_LIMITS);
    return problem ? { notRecorded: problem } : args;
  }
  const violation = scanJsonText(args, TOOL_ARGUMENT_LIMITS);
  if (violation) return { notRecorded: `Arguments: ${violation.message}` };
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

/**
 * The audit event of one call; `toolEntry` is the tool's own last entry, folded in. `decoding` carries the decoded
 * arguments when argument parsing got them within the limits (recorded without decoding or checking again).
 */
export function callEvent(
  name: string,
  args: unknown,
  call: ToolCallContext,
  outcome: ToolCallOutcome,
  toolEntry: AuditEntry | undefined,
  decoding: ArgumentDecoding | undefined,
): AuditEvent {
  const denied = !outcome.ok && (outcome.error.code === "denied_by_user" || outcome.error.code === "denied_by_policy");
  const event: AuditEvent & { toolEntry?: AuditEntry } = {
    kind: "tool_call",
    userId: call.userId,
    chatId: call.chatId ?? null,
    tool: name,
    // A bounded, redacted copy: the audit line says what was asked without storing megabytes.
    arguments: redactBounded(decoding && "decoded" in decoding ? decoding.decoded : decodeArguments(args)),
    cwd: toolEntry?.cwd ?? (call.workingDirectory ? resolveDirectory(call.workingDirectory) : null),
    outcome: outcome.ok ? "ok" : denied ? "denied" : "error",
    errorCode: outcome.ok ? null : outcome.error.code,
    durationMs: outcome.durationMs,
    approval: call.approval?.decision ?? null,
    approvedBy: call.approval?.decidedBy ?? null,
  };
  // Present only when the tool recorded one (set, not spread from an empty object on every call).
  if (toolEntry) event.toolEntry = toolEntry;
  return event;
}

/** One call's audit record: the call, its outcome, the tool's own entries and what argument parsing decoded. */
export interface CallRecord {
  name: string;
  args: unknown;
  call: ToolCallContext;
  outcome: ToolCallOutcome;
  toolEntries?: AuditEntry[];
  decoding?: ArgumentDecoding;
}

/**
 * The never-rejecting form of the promise a sink's recordEvent returned last: consecutive lines of one batch share
 * it. One pair, not a WeakMap of every write: a WeakMap entry per call cost each young-generation GC an ephemeron
 * (lines of interleaved sinks each get a guard of their own, which is as correct).
 */
let lastWritten: Promise<void> | undefined;
let lastGuarded: Promise<void> = Promise.resolve();

/**
 * Records one call in `sink`. Sinks without recordEvent get only the tool's own entries. Never rejects: a failing
 * audit is logged. The sink is called synchronously (an in-memory sink holds the line when this returns).
 */
export function recordCall(sink: AuditSink, logger: Logger, record: CallRecord): Promise<void> {
  const entries = record.toolEntries ?? [];
  // The handler keeps only the tool's name: a batching sink holds it until its write is done (20 ms or more), and
  // holding the record would keep the call's whole result alive that long, long enough to survive into the old
  // generation (most of a read_file call's GC time went there).
  const tool = record.name;
  const failed = (error: unknown) => {
    // Logged once per failed write: the lines of a batch share it (`tool` names the first).
    logger.error({ tool, err: String(error) }, "recording tool calls in the audit log failed");
  };
  try {
    if (entries.length === 0 && sink.recordEvent) {
      // The common case: one event, no entry of the tool's own to fold in.
      const event = callEvent(record.name, record.args, record.call, record.outcome, undefined, record.decoding);
      // A batching sink returns one promise for a batch of lines: one guarded form serves them all.
      const written = sink.recordEvent(event);
      if (written !== lastWritten) {
        lastWritten = written;
        lastGuarded = written.then(undefined, failed);
      }
      return lastGuarded;
    }
    return recordInOrder(sink, record, entries).then(undefined, failed);
  } catch (error) {
    failed(error);
    return Promise.resolve();
  }
}

async function recordInOrder(sink: AuditSink, record: CallRecord, entries: AuditEntry[]): Promise<void> {
  if (!sink.recordEvent) {
    for (const entry of entries) await sink.record(entry);
    return;
  }
  for (let i = 0; i < entries.length - 1; i++) await sink.record(entries[i] as AuditEntry);
  await sink.recordEvent(
    callEvent(record.name, record.args, record.call, record.outcome, entries.at(-1), record.decoding),
  );
}
