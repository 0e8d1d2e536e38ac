/**
 * The seam between the tool loop and the approval policy: before a call runs, the loop asks its gate whether the
 * call may run. The loop knows nothing of rules, storage or surfaces; the application's approval gate
 * (src/app/approvals/) implements this interface, and a sub-agent's loop receives the same gate (tagged with the
 * agent's path) so a child's ask reaches the root chat's surface.
 */
import type { ToolCallOutcome } from "../core/runtime.js";
import type { ConversationMessage, ConversationToolCall, ConversationToolResult } from "../providers/types.js";
import type { LoopEvent } from "./events.js";

/**
 * The state of one model step whose calls are running: enough to resume the turn without asking the provider
 * again (the assistant message with its calls and the results known so far).
 */
export interface LoopStepSnapshot {
  /** The iteration (model turn, from 1) of this step. */
  iterations: number;
  /** Complete messages of earlier steps of this run (assistant + tool pairs). */
  added: ConversationMessage[];
  /** The assistant message whose tool calls are running. */
  assistant: ConversationMessage;
  /** One entry per call of `assistant.toolCalls`, in order: the result, or null while it has none. */
  results: (ConversationToolResult | null)[];
}

/** What a gate may do while it decides a call of a step. */
export interface GateStep {
  /** Adds an event to the loop's stream (e.g. `approval_requested`). */
  emit(event: LoopEvent): void;
  /** A copy of the step's state right now. */
  snapshot(): LoopStepSnapshot;
  /** The run's cancel signal. */
  signal?: AbortSignal;
}

/** The gate's answer: run the call (with the decision to record), or do not and feed back this failure. */
export type GateVerdict =
  | { run: true; approval: { decision: string; decidedBy: string; approvalId?: string } }
  | { run: false; outcome: ToolCallOutcome & { ok: false } };

/** Decides each call before it runs. Implementations must not throw (a thrown error becomes execution_failed). */
export interface ToolCallGate {
  check(call: ConversationToolCall, step: GateStep): Promise<GateVerdict>;
  /** Told each result of a step as it arrives (a gate that persisted the step keeps it current). */
  onResult?(index: number, result: ConversationToolResult, step: GateStep): void | Promise<void>;
}

/**
 * A gate that also makes the gate of a sub-agent's loop: the same policy, surface and turn, its asks tagged with
 * `agentPath` (the root chat's id first, then each agent) so the root chat's surface shows whose call it is.
 */
export interface AgentAwareGate extends ToolCallGate {
  child(agentPath: string[], overrides?: { services?: Record<string, unknown>; turn?: undefined }): AgentAwareGate;
}
