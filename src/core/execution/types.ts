/** The shapes of one tool call through the runtime: what the caller gives, what it gets back. */
import type { SerializedToolError } from "../errors.js";
import type {
  EffectiveToolSettings,
  RegisteredTool,
  ToolContext,
  ToolDefinition,
  ToolProgressEvent,
} from "../types.js";

/** The approval decision that let a call run, as the audit records it. */
export interface CallApproval {
  /** allow (the policy allowed it), allow_once, allow_always. */
  decision: string;
  /** "policy" or who answered the ask. */
  decidedBy: string;
  approvalId?: string;
}

/**
 * What an approval stage decides about a checked call: run it (with the decision the audit records), or end it with
 * `outcome` (the approver has recorded that refusal in the audit itself).
 */
export type ApprovalVerdict = { run: true; approval: CallApproval } | { run: false; outcome: ToolCallOutcome };

/**
 * The approval stage of a call (ToolCallContext.approve): receives the call once it passed the checks (tool
 * enabled, arguments parsed), before it runs. Never called for a call that fails the checks.
 */
export type ApproveStage = (call: InspectedCall) => Promise<ApprovalVerdict>;

/** What the caller of executeTool provides about the call. */
export interface ToolCallContext {
  userId: string;
  /** The chat the call belongs to (freshness ledger scope); null or absent for one-off calls. */
  chatId?: string | null;
  /** The chat's bound working directory (absolute, or resolved against process.cwd()); null when none. */
  workingDirectory?: string | null;
  /** Caller's cancel signal (user cancel, stream teardown). */
  signal?: AbortSignal;
  /** The provider's id for this call when a model made it (recorded as `gen_ai.tool.call.id` on the trace span). */
  toolCallId?: string;
  /** Receives progress events the tool emits. */
  onProgress?: (event: ToolProgressEvent) => void;
  /** Host services for tools that need them (e.g. a model runner for sub-agents). */
  services?: Record<string, unknown>;
  /**
   * When true, a tool that is off only by default (the user never saved a choice) may run: used by the
   * function-id API (`trigger`), where the host application itself, not a model, chooses the tool.
   * A tool the user explicitly disabled stays refused.
   */
  allowDefaultDisabled?: boolean;
  /**
   * False: without a bound working directory the call reaches no directory — the process's own directory does not
   * stand in for it (a surface serving several users, whose host chose none). Absent: the runtime's rule
   * (ToolRuntime.processCwdFallback). It can only take the fallback away, never grant it.
   */
  processCwdFallback?: false;
  /**
   * The approval decision that let this call run, recorded in the audit: `decision` allow (the policy allowed it),
   * allow_once, allow_always; `decidedBy` "policy" or who answered the ask. Absent: no gate ran (library use).
   */
  approval?: CallApproval;
  /**
   * The approval stage: decides the checked call before it runs (an approval gate), its verdict's approval then
   * recorded as `approval`. Absent: the call runs with `approval` as given.
   */
  approve?: ApproveStage;
}

/** A call looked up and checked (tool enabled, arguments parsed) before it runs: what the approval gate needs. */
export interface InspectedCall {
  tool: RegisteredTool;
  settings: EffectiveToolSettings;
  /** Parsed arguments (nulls removed, defaults applied). */
  args: Record<string, unknown>;
  /** The context the tool would run with (its signal is the caller's). */
  context: ToolContext;
}

/** The outcome of one tool call: a result or a classified error, with its duration in milliseconds. */
export type ToolCallOutcome =
  | { ok: true; result: unknown; durationMs: number }
  | { ok: false; error: SerializedToolError; durationMs: number };

/** The enabled tools of a user with their effective settings and model-facing definitions. */
export interface EnabledToolRuntime {
  tools: RegisteredTool[];
  settings: Map<string, EffectiveToolSettings>;
  definitions: ToolDefinition[];
}
