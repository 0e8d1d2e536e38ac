/**
 * One call outside a chat turn through the approval gate: the tool-execute route, `toolhost call` and the MCP
 * server. How an ask is answered depends on the surface: a responder (a terminal prompt, MCP elicitation, a
 * headless deny), waiting for an answer through the API, or returning at once with the pending approval's id so the
 * caller can have it answered and re-send the call with `approvalId` (the re-sent call must carry exactly the
 * approved arguments: the approval's HMAC binds them).
 */
import { randomUUID } from "node:crypto";
import { AccessDeniedError, NotFoundError, type ToolError } from "../../core/errors.js";
import type { ToolCallOutcome, ToolRuntime } from "../../core/runtime.js";
import type { ToolProgressEvent } from "../../core/types.js";
import type { GateStep, GateVerdict } from "../../loop/gate.js";
import { ApprovalGate } from "./gate.js";
import type { ApprovalResponder, ApprovalService } from "./service.js";

/** Options of runGatedCall. */
export interface GatedCallOptions {
  runtime: ToolRuntime;
  /** The approval service; absent: the call runs without a policy (library use). */
  approvals?: ApprovalService;
  userId: string;
  chatId?: string | null;
  workingDirectory?: string | null;
  signal?: AbortSignal;
  onProgress?: (event: ToolProgressEvent) => void;
  services?: Record<string, unknown>;
  /** How this surface answers an ask; absent: see `onAsk`. */
  responder?: ApprovalResponder;
  /** Without a responder: `return` (default) the pending approval's id at once, or `wait` for an answer via the API. */
  onAsk?: "return" | "wait";
  /** Runs a call approved earlier (its arguments must be exactly the approved ones). */
  approvalId?: string;
  /** Receives `approval_requested` / `approval_resolved` events (e.g. to print them). */
  onEvent?: GateStep["emit"];
  /** False: the process's directory does not stand in for a missing working directory (ToolCallContext). */
  processCwdFallback?: false;
}

const refused = (error: ToolError): ToolCallOutcome => ({ ok: false, error: error.toJSON(), durationMs: 0 });

/**
 * Runs one call through the approval gate and executeTool. Never throws for a refusal: it is the outcome
 * (`denied_by_policy`, `denied_by_user`, `access_denied` for an approval that does not match the call or was used).
 */
export async function runGatedCall(name: string, args: unknown, options: GatedCallOptions): Promise<ToolCallOutcome> {
  const { runtime, approvals } = options;
  const context = {
    userId: options.userId,
    chatId: options.chatId ?? null,
    workingDirectory: options.workingDirectory ?? null,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.services ? { services: options.services } : {}),
    ...(options.processCwdFallback === false ? { processCwdFallback: false as const } : {}),
  };
  if (!approvals) return runtime.executeTool(name, args, context);
  const gate = new ApprovalGate({
    service: approvals,
    runtime,
    userId: options.userId,
    chatId: options.chatId ?? null,
    workingDirectory: options.workingDirectory ?? null,
    ...(options.responder ? { responder: options.responder } : {}),
    ...(options.services ? { services: options.services } : {}),
    ...(options.processCwdFallback === false ? { processCwdFallback: false as const } : {}),
    onAsk: options.onAsk ?? "return",
  });
  let verdict: GateVerdict;
  if (options.approvalId) {
    const record = await approvals.repository.get(options.approvalId);
    if (!record || record.userId !== options.userId) {
      return refused(new NotFoundError(`No approval "${options.approvalId}" for this user.`));
    }
    if (record.tool !== name) {
      return refused(
        new AccessDeniedError(`Approval ${record.id} was given for "${record.tool}", not "${name}".`, {
          approvalId: record.id,
          rule: "approval_binding",
        }),
      );
    }
    verdict = await gate.settle(record, { id: record.toolCallId, name, arguments: args as string }, options.signal);
  } else {
    const step: GateStep = {
      emit: options.onEvent ?? (() => {}),
      snapshot: () => ({ iterations: 0, added: [], assistant: { role: "assistant", content: "" }, results: [] }),
      ...(options.signal ? { signal: options.signal } : {}),
    };
    // The gate is the call's approval stage: executeTool checks the call once, then asks the gate about it.
    const call = { id: `call_${randomUUID()}`, name, arguments: args as string };
    return runtime.executeTool(name, args, { ...context, approve: (inspected) => gate.decide(inspected, call, step) });
  }
  if (!verdict.run) return verdict.outcome;
  return runtime.executeTool(name, args, { ...context, approval: verdict.approval });
}
