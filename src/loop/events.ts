/**
 * Events of the tool loop. The loop re-yields every normalized provider event and adds its own: iteration markers, tool
 * results, tool progress, errors and exactly one final `done`.
 */
import type { SerializedToolError } from "../core/errors.js";
import type { ToolProgressEvent } from "../core/types.js";
import type { ConversationMessage, ProviderStreamEvent } from "../providers/types.js";

/** Why a run of the loop ended. */
export type LoopDoneReason = "text" | "max_iterations" | "aborted" | "error";

/** Stable codes of loop-level `error` events (tool failures are `tool_result` events with ok false instead). */
export type LoopErrorCode =
  | "provider_error"
  | "max_iterations"
  | "aborted"
  | "internal_error"
  /** The server is shutting down and handed the chat turn to another instance (it continues there). */
  | "handed_over"
  /** Another instance took the chat turn over (this one lost its lease); it continues there. */
  | "lease_lost";

/** A tool call finished: the result or the classified error, with the time it took in milliseconds. */
export type ToolResultEvent =
  | { type: "tool_result"; id: string; name: string; ok: true; result: unknown; durationMs: number }
  | { type: "tool_result"; id: string; name: string; ok: false; error: SerializedToolError; durationMs: number };

/**
 * A call needs a person's decision before it runs. Answer with `POST /api/approvals/{approvalId}` (or the CLI
 * prompt, or MCP elicitation); it is denied at `expiresAt` when nobody answers.
 */
export interface ApprovalRequestedEvent {
  type: "approval_requested";
  approvalId: string;
  /** The tool call id the model gave. */
  toolCallId: string;
  tool: string;
  /** The call's arguments as JSON, secrets redacted, at most a few KB. */
  preview: string;
  /** What the policy matched: the commands, paths or host. */
  subjects: string[];
  /** The rule that asked (`{decision, match}`), or null when the tool's approval setting did. */
  rule: { decision: string; match: string } | null;
  reason: string;
  /**
   * Whether allow_always is offered: only when the rule it stores would make the same call run without asking
   * next time (not when an ask rule asked, the tool itself asks, an admin locked the setting, …).
   */
  allowAlways: boolean;
  /** ISO-8601 time after which the ask counts as denied. */
  expiresAt: string;
  /** The resolved working directory the call would run in (null: the server's own). */
  workingDirectory: string | null;
  /** The sub-agent's `path` (its ids from the chat's root agent down, joined with `/`); absent for the chat's own calls. */
  agentPath?: string;
}

/** An ask was answered (or expired): the call runs or is fed back as denied. */
export interface ApprovalResolvedEvent {
  type: "approval_resolved";
  approvalId: string;
  toolCallId: string;
  tool: string;
  /** allow_once, allow_always, deny or expired. */
  decision: string;
  decidedBy: string | null;
  /** As in {@link ApprovalRequestedEvent}. */
  agentPath?: string;
}

/**
 * Everything runToolLoop yields, in order per iteration: `iteration {n}` (n counts from 1), the provider's
 * normalized events of that model turn (text_delta, tool_call_*, usage, finish), then for each tool call any
 * `tool_progress` events and one `tool_result` (in completion order; calls of one turn run concurrently).
 * A resumed step (`resume`) yields no `iteration` (its model turn was reported when it first ran): only the results
 * it has to report and those of the calls it runs. A run ends with an optional `error` (provider failure, iteration limit, cancel) and always exactly one `done`,
 * whose `messages` are the complete new messages to append to the conversation (never a half-streamed turn,
 * never a tool call without its result).
 */
export type LoopEvent =
  | ProviderStreamEvent
  | { type: "iteration"; n: number }
  | ToolResultEvent
  | { type: "tool_progress"; id: string; name: string; progress: ToolProgressEvent }
  | ApprovalRequestedEvent
  | ApprovalResolvedEvent
  | { type: "error"; code: LoopErrorCode; message: string }
  /**
   * The provider refused the chat's stored history (HTTP 400/422 before answering); the earlier turns were sent
   * again as plain text (tool calls and results summarized, provider data dropped) and the turn went on. The stored
   * history is unchanged.
   */
  | { type: "history_rewritten"; message: string }
  | { type: "done"; reason: LoopDoneReason; iterations: number; messages: ConversationMessage[] };
