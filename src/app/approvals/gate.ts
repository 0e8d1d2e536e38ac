/**
 * The approval gate: runs before executeTool on every surface (the chat loop, sub-agents' loops, the one-off
 * tool-execute route, `toolhost call`, the MCP server). For each call it evaluates the policy; on `ask` it stores
 * the ask (and, in a chat turn, the loop state needed to resume), tells the surface, and waits for the answer or
 * the expiry. Before an approved call runs, its HMAC binding, its arguments against the schema and the policy are
 * checked again; an allowed approval runs its call once. A refusal reaches the model as `denied_by_user` or
 * `denied_by_policy` (a tampered approval as `access_denied`), never as a crash or a hang.
 */
import type { ApprovalVerdict } from "../../core/approval/policy.js";
import {
  AccessDeniedError,
  DeniedByPolicyError,
  DeniedByUserError,
  LimitExceededError,
  ToolAbortedError,
  type ToolError,
} from "../../core/errors.js";
import { redactedPreview } from "../../core/redact.js";
import type { InspectedCall, ToolCallContext, ToolCallOutcome, ToolRuntime } from "../../core/runtime.js";
import type { ApprovalHint } from "../../core/types.js";
import type { GateStep, GateVerdict, LoopStepSnapshot, ToolCallGate } from "../../loop/gate.js";
import type { ConversationToolCall, ConversationToolResult } from "../../providers/types.js";
import type { ApprovalRecord } from "../../storage/approvals.js";
import { alwaysRefusal, evaluateCall, pathRefusal, remedyFor } from "./call-policy.js";
import { type ApprovalResponder, type ApprovalService, isSuspension } from "./service.js";

/** Keeps a chat turn's loop state in the database while it waits for approvals (see ChatService). */
export interface TurnKeeper {
  /** The turn's id once stored (approvals of the turn carry it). */
  readonly turnId: string;
  /** Stores the step's state (called when a call of the step first asks). */
  persist(snapshot: LoopStepSnapshot): Promise<void>;
  /** Records a result of the stored step. */
  recordResult(iterations: number, index: number, result: ConversationToolResult): Promise<void>;
  /** Shows the turn's process is alive (while it waits). */
  heartbeat(): Promise<void>;
}

/** Options of an ApprovalGate. */
export interface ApprovalGateOptions {
  service: ApprovalService;
  runtime: ToolRuntime;
  userId: string;
  chatId: string | null;
  workingDirectory: string | null;
  /** How this surface answers asks; absent: asks wait for an answer through the API until they expire. */
  responder?: ApprovalResponder;
  /** A chat turn's keeper (persistence for resume after a restart). */
  turn?: TurnKeeper;
  /** Sub-agent path (root chat first); tags asks and events. */
  agentPath?: string;
  /** Host services (ToolContext.services), as the loop passes them to executeTool. */
  services?: Record<string, unknown>;
  /** False: the process's directory does not stand in for a missing working directory (ToolCallContext). */
  processCwdFallback?: false;
  /**
   * What an ask does when the responder leaves it pending (or there is none): `wait` (default) until it is answered
   * through the API or expires; `return` at once with a `denied_by_policy` outcome naming the pending approval (the
   * caller has it answered, then re-sends the call with its id: see runGatedCall).
   */
  onAsk?: "wait" | "return";
}

const denied = (error: ToolError): ToolCallOutcome & { ok: false } => ({
  ok: false,
  error: error.toJSON(),
  durationMs: 0,
});

/** The ToolCallGate the application hands to runToolLoop (and to sub-agents' loops through {@link child}). */
export class ApprovalGate implements ToolCallGate {
  readonly #o: ApprovalGateOptions;
  /** Calls whose ask this gate left pending when its turn was suspended (their results are not recorded). */
  readonly #leftPending = new Set<string>();

  constructor(options: ApprovalGateOptions) {
    this.#o = options;
  }

  /**
   * The gate for a sub-agent's loop: the same policy, surface and turn, its asks tagged with `agentPath` (the
   * root chat's id first, then each agent) so the root chat's surface shows whose call it is.
   */
  child(
    agentPath: string,
    overrides: Partial<Pick<ApprovalGateOptions, "workingDirectory" | "services" | "turn">> = {},
  ): ApprovalGate {
    return new ApprovalGate({ ...this.#o, ...overrides, agentPath });
  }

  #callContext(signal?: AbortSignal): ToolCallContext {
    return {
      userId: this.#o.userId,
      chatId: this.#o.chatId,
      workingDirectory: this.#o.workingDirectory,
      ...(signal ? { signal } : {}),
      ...(this.#o.services ? { services: this.#o.services } : {}),
      ...(this.#o.processCwdFallback === false ? { processCwdFallback: false as const } : {}),
    };
  }

  async check(call: ConversationToolCall, step: GateStep): Promise<GateVerdict> {
    return this.#guarded(call, step, () => this.#check(call, step));
  }

  /**
   * The verdict on a call executeTool has already checked (its approval stage, ToolCallContext.approve): the same
   * as {@link check} without inspecting the call a second time.
   */
  decide(inspected: InspectedCall, call: ConversationToolCall, step: GateStep): Promise<GateVerdict> {
    return this.#guarded(call, step, () => this.#check(call, step, inspected));
  }

  async #guarded(call: ConversationToolCall, step: GateStep, decide: () => Promise<GateVerdict>): Promise<GateVerdict> {
    try {
      return await decide();
    } catch (error) {
      // The gate never fails open: an unexpected error refuses the call, with the reason for the model.
      this.#o.runtime.logger.error(
        { err: (error as Error)?.stack ?? String(error), tool: call.name },
        "approval gate failed",
      );
      return this.#refuse(
        call,
        new DeniedByPolicyError(
          `The approval check failed (${(error as Error)?.message ?? String(error)}); the call was not run.`,
        ),
        "deny",
        "policy",
        step.signal,
      );
    }
  }

  async onResult(_index: number, result: ConversationToolResult, step: GateStep): Promise<void> {
    if (!this.#o.turn || this.#leftPending.has(result.id)) return;
    const snapshot = step.snapshot();
    const index = (snapshot.assistant.role === "assistant" ? (snapshot.assistant.toolCalls ?? []) : []).findIndex(
      (c) => c.id === result.id,
    );
    if (index >= 0) await this.#o.turn.recordResult(snapshot.iterations, index, result);
  }

  async #check(call: ConversationToolCall, step: GateStep, checked?: InspectedCall): Promise<GateVerdict> {
    const { service } = this.#o;
    // A resumed step: the call may already have an answered ask.
    const existing = this.#o.turn
      ? await service.repository.findForCall(call.id, { turnId: this.#o.turn.turnId })
      : undefined;
    if (existing && existing.tool === call.name) return this.#settle(existing, call, step);

    let inspected = checked;
    if (!inspected) {
      const looked = await this.#o.runtime.inspectCall(call.name, call.arguments, this.#callContext(step.signal));
      // A call that cannot run (unknown tool, disabled, bad arguments) fails the same way in executeTool: no ask.
      if (!looked.ok) return { run: true, approval: { decision: "allow", decidedBy: "policy" } };
      inspected = looked.call;
    }
    const verdict = await evaluateCall(this.#o, inspected);
    if (verdict.decision === "allow") return { run: true, approval: { decision: "allow", decidedBy: "policy" } };
    if (verdict.decision === "deny") {
      const rule = verdict.rule ? ` (rule deny "${verdict.rule.match}")` : "";
      return this.#refuse(
        call,
        new DeniedByPolicyError(`${verdict.reason}${rule} The call was not run; do not retry it unchanged.`, {
          ...(verdict.rule ? { rule: { decision: verdict.rule.decision, match: verdict.rule.match } } : {}),
        }),
        "deny",
        "policy",
        step.signal,
      );
    }

    // A call the path policy refuses where it would run is refused now, not asked about.
    const refusal = await pathRefusal(inspected);
    if (refusal) return this.#refuse(call, refusal, "deny", "policy", step.signal);
    return this.#ask(call, step, inspected, verdict);
  }

  /** Stores an ask for the call, tells the surface, and waits for the answer (or refuses at once: see onAsk). */
  async #ask(
    call: ConversationToolCall,
    step: GateStep,
    inspected: InspectedCall,
    verdict: ApprovalVerdict & { hint?: ApprovalHint },
  ): Promise<GateVerdict> {
    const { service } = this.#o;
    const nobody = this.#o.responder?.unattended;
    if (nobody !== undefined) {
      // Nobody can answer here: refuse at once, saying why it asks and what could help; no ask is stored.
      const remedy = remedyFor(inspected, verdict);
      return this.#refuse(
        call,
        new DeniedByPolicyError(
          `Denied by policy: this call needs approval and nobody can be asked here. ${verdict.reason} ${nobody}${remedy ? ` ${remedy}` : ""}`,
          {
            reason: verdict.reason,
            source: verdict.source,
            ...(verdict.rule ? { rule: { decision: verdict.rule.decision, match: verdict.rule.match } } : {}),
          },
        ),
        "deny",
        "policy: nobody to ask",
        step.signal,
      );
    }
    // Ask: store the step first (so a restart can resume it), then the ask bound to this exact call.
    if (this.#o.turn) await this.#o.turn.persist(step.snapshot());
    let record: ApprovalRecord;
    try {
      record = await service.ask({
        userId: this.#o.userId,
        chatId: this.#o.chatId,
        turnId: this.#o.turn?.turnId ?? null,
        toolCallId: call.id,
        tool: call.name,
        args: call.arguments,
        preview: redactedPreview(call.arguments),
        subjects: verdict.subjects,
        candidates: verdict.candidates,
        rule: verdict.rule,
        reason: verdict.reason,
        alwaysRefusal: await alwaysRefusal(this.#o, inspected, verdict),
        ...(this.#o.agentPath ? { agentPath: this.#o.agentPath } : {}),
        workingDirectory: this.#o.workingDirectory,
      });
    } catch (error) {
      // Too many asks waiting: refused as what it is, saying what to do next; nothing was stored.
      if (error instanceof LimitExceededError) return this.#refuse(call, error, "deny", "policy", step.signal);
      throw error;
    }
    const view = service.view(record, verdict.subjects);
    const { chatId: _c, userId: _u, ...event } = view;
    step.emit({ type: "approval_requested", ...event });

    if (this.#o.onAsk === "return" && !this.#o.responder) {
      return this.#refuse(
        call,
        new DeniedByPolicyError(
          `This call needs approval (${verdict.reason}) and nobody is attached to answer here. Approval ${record.id} is pending until ${record.expiresAt}: answer it with POST /api/approvals/${record.id}, then send the same call again with "approvalId": "${record.id}".`,
          { approvalId: record.id, expiresAt: record.expiresAt, ...(record.rule ? { rule: record.rule } : {}) },
        ),
        "pending",
        "policy",
        step.signal,
      );
    }
    const surface = new AbortController();
    const onAbort = () => surface.abort();
    step.signal?.addEventListener("abort", onAbort, { once: true });
    let answered: ApprovalRecord | undefined;
    try {
      const waiting = service.waitForAnswer(record, step.signal, () => this.#o.turn?.heartbeat() ?? Promise.resolve());
      const fromSurface = this.#o.responder
        ? this.#o.responder.answer(view, surface.signal).then(
            async (answer) => {
              if (!answer) return undefined;
              try {
                return await service.decide(this.#o.userId, record.id, answer);
              } catch (error) {
                this.#o.runtime.logger.warn(
                  { err: String(error), approvalId: record.id },
                  "recording a surface's answer failed",
                );
                return undefined;
              }
            },
            () => undefined,
          )
        : undefined;
      answered = await waiting;
      void fromSurface;
    } finally {
      surface.abort();
      step.signal?.removeEventListener("abort", onAbort);
    }
    if (answered.status === "pending") {
      // A sub-agent's step is not what the turn resumes from: its ask is cancelled with its run, as before.
      if (this.#o.agentPath) {
        await service.repository.cancel(record.id, new Date()).catch(() => {});
        return this.#refuse(call, new ToolAbortedError(), "cancelled", "caller", step.signal);
      }
      return this.#suspended(call);
    }
    return this.#settle(answered, call, step);
  }

  /** Whether this gate left an ask pending because its turn was suspended (the turn then waits to be resumed). */
  get leftPending(): boolean {
    return this.#leftPending.size > 0;
  }

  /** The turn was suspended while the call's ask is pending: the ask stays, the call's result is not recorded. */
  #suspended(call: ConversationToolCall): GateVerdict {
    this.#leftPending.add(call.id);
    return {
      run: false,
      outcome: denied(
        new ToolAbortedError("The turn was suspended while this call waited for approval; the approval stays pending."),
      ),
    };
  }

  /** Turns an answered (or expired, cancelled) ask into the verdict, checking the binding before anything runs. */
  async #settle(record: ApprovalRecord, call: ConversationToolCall, step: GateStep): Promise<GateVerdict> {
    step.emit({
      type: "approval_resolved",
      approvalId: record.id,
      toolCallId: call.id,
      tool: call.name,
      decision:
        record.status === "expired"
          ? "expired"
          : record.status === "cancelled"
            ? "cancelled"
            : (record.decision ?? record.status),
      decidedBy: record.decidedBy,
      ...(this.#o.agentPath ? { agentPath: this.#o.agentPath } : {}),
    });
    return this.#verdictOf(record, call, step.signal, step);
  }

  /**
   * The one mapping of an approval's state to the call's verdict, for a turn (`step`: a pending ask is waited for)
   * and for a one-off call re-sent with its `approvalId` (no step: a pending ask is refused, saying how to answer
   * it): denied → `denied_by_user` (`denied_by_policy` when a surface answered for nobody), expired →
   * `denied_by_user`, cancelled → `aborted`, used → `access_denied`, allowed → {@link authorize}.
   */
  settle(record: ApprovalRecord, call: ConversationToolCall, signal?: AbortSignal): Promise<GateVerdict> {
    return this.#verdictOf(record, call, signal);
  }

  async #verdictOf(
    record: ApprovalRecord,
    call: ConversationToolCall,
    signal: AbortSignal | undefined,
    step?: GateStep,
  ): Promise<GateVerdict> {
    const by = record.decidedBy ?? "timeout";
    switch (record.status) {
      case "pending": {
        if (!step) {
          return this.#refuse(
            call,
            new DeniedByPolicyError(
              `Approval ${record.id} has not been answered yet: answer it with POST /api/approvals/${record.id} (or \`toolhost approvals\`), then send the same call again with "approvalId": "${record.id}".`,
              { approvalId: record.id },
            ),
            "ask",
            "policy",
            signal,
          );
        }
        // Resumed while still unanswered: wait for it like a live ask.
        const answered = await this.#o.service.waitForAnswer(
          record,
          signal,
          () => this.#o.turn?.heartbeat() ?? Promise.resolve(),
        );
        if (answered.status === "pending") {
          if (isSuspension(step.signal)) return this.#suspended(call);
          return this.#refuse(call, new ToolAbortedError(), "cancelled", "caller", step.signal);
        }
        return this.#settle(answered, call, step);
      }
      case "denied": {
        const words = record.message ? `: "${record.message}"` : ".";
        if (by.startsWith("policy:")) {
          // A surface answered for nobody (no terminal, an MCP client that cannot be asked).
          return this.#refuse(
            call,
            new DeniedByPolicyError(record.message ?? "This call needs approval and nobody could be asked.", {
              approvalId: record.id,
              ...(record.rule ? { rule: record.rule } : {}),
            }),
            "deny",
            by,
            signal,
          );
        }
        return this.#refuse(
          call,
          new DeniedByUserError(`${by} denied this call${words} It was not run; take their answer into account.`, {
            approvalId: record.id,
            decidedBy: by,
            ...(record.message ? { userMessage: record.message } : {}),
          }),
          "deny",
          by,
          signal,
        );
      }
      case "expired":
        return this.#refuse(
          call,
          new DeniedByUserError(
            `Nobody answered the approval request for this call before it expired at ${record.expiresAt}, so it was not run. Ask the user, or try something that needs no approval.`,
            { approvalId: record.id, reason: "expired" },
          ),
          "expired",
          "timeout",
          signal,
        );
      case "cancelled":
        return this.#refuse(
          call,
          new ToolAbortedError("The call was cancelled while it waited for approval."),
          "cancelled",
          "caller",
          signal,
        );
      case "used":
        return this.#refuse(
          call,
          new AccessDeniedError(`Approval ${record.id} has already been used; an approval runs its call once.`, {
            approvalId: record.id,
            rule: "approval_used",
          }),
          // Audited under the approval that was used up, as a replay refused by authorize() is.
          record.decision ?? "allow_once",
          record.decidedBy ?? "unknown",
          signal,
        );
      case "allowed":
        return this.authorize(record, call, signal, step);
    }
  }

  /**
   * Runs the checks an approved call passes before it runs: the HMAC binding to exactly these arguments, the
   * arguments against the tool's schema, the current policy again, completely (a rule since turned to deny denies
   * it; one that now asks for another reason than the one answered asks again: through `step` when given, else the
   * call is refused saying a new approval is needed), then marks the approval used (once) — unless `signal` has
   * already aborted: the call is refused as aborted and the approval stays for the same call sent again. Returns
   * the verdict; a refusal is audited.
   */
  async authorize(
    record: ApprovalRecord,
    call: ConversationToolCall,
    signal?: AbortSignal,
    step?: GateStep,
  ): Promise<GateVerdict> {
    const { service } = this.#o;
    const decision = record.decision ?? "allow_once";
    const by = record.decidedBy ?? "unknown";
    try {
      if (record.userId !== this.#o.userId)
        throw new AccessDeniedError(`Approval ${record.id} belongs to another user.`);
      service.verify(record, {
        toolCallId: call.id,
        tool: call.name,
        args: call.arguments,
        userId: this.#o.userId,
        workingDirectory: this.#o.workingDirectory,
        chatId: this.#o.chatId,
      });
    } catch (error) {
      return this.#refuse(call, error as ToolError, decision, by, signal);
    }
    const inspected = await this.#o.runtime.inspectCall(call.name, call.arguments, this.#callContext(signal));
    if (inspected.ok) {
      const verdict = await evaluateCall(this.#o, inspected.call);
      if (verdict.decision === "deny") {
        return this.#refuse(
          call,
          new DeniedByPolicyError(
            `${verdict.reason} The policy now denies this call, so the approval no longer applies.`,
          ),
          "deny",
          "policy",
          signal,
        );
      }
      if (verdict.decision === "ask" && verdict.reason !== record.reason) {
        // Approved for one reason; the policy now asks for another (a rule since turned to ask): ask again.
        if (step) return this.#ask(call, step, inspected.call, verdict);
        return this.#refuse(
          call,
          new DeniedByPolicyError(
            `The policy now asks about this call for another reason than the one approved (${verdict.reason}). Send the call again without "approvalId" to be asked.`,
            { approvalId: record.id, reason: verdict.reason, source: verdict.source },
          ),
          "deny",
          "policy",
          signal,
        );
      }
    }
    if (signal?.aborted) {
      // Cancelled before it ran: the approval is not used up, so the same call sent again runs (once).
      return this.#refuse(
        call,
        new ToolAbortedError("The call was cancelled before it ran; its approval stays valid for the same call."),
        decision,
        by,
        signal,
      );
    }
    if (!(await service.use(record.id))) {
      return this.#refuse(
        call,
        new AccessDeniedError(`Approval ${record.id} has already been used; an approval runs its call once.`, {
          approvalId: record.id,
          rule: "approval_used",
        }),
        decision,
        by,
        signal,
      );
    }
    return { run: true, approval: { decision, decidedBy: by, approvalId: record.id } };
  }

  async #refuse(
    call: ConversationToolCall,
    error: ToolError,
    decision: string,
    decidedBy: string,
    signal?: AbortSignal,
  ): Promise<GateVerdict> {
    const outcome = denied(error);
    await this.#o.runtime.auditCall(
      call.name,
      call.arguments,
      { ...this.#callContext(signal), approval: { decision, decidedBy } },
      outcome,
    );
    return { run: false, outcome };
  }
}
