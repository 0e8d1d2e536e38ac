/**
 * The part both framework adapters share: one user's Toolhost tools for one request, every call through the
 * approval gate. The adapters map it onto their framework's shapes (ai-sdk.ts, openai-agents.ts).
 *
 * The seam to the approval gate (src/app/approvals/) is this file alone, and it uses four entry points:
 * - `new ApprovalGate({ …, onAsk: "return" }).check(call, step)` to classify a new call: allow (nothing stored),
 *   deny (the gate audits the refusal) or ask (the gate stores a pending approval bound to the call's id, its exact
 *   arguments, the user, the working directory and the chat, audits it as pending, and returns its id);
 * - `approvals.repository.findForCall(toolCallId, { chatId, userId, tool, argsHash })` to find that approval again (in
 *   another request or process), which keeps the decision for the same call stable;
 * - `approvals.decide(userId, approvalId, answer)` to record the framework's approval response in Toolhost, with
 *   who answered through which surface (`ai-sdk:<user>`, `openai-agents:<user>`);
 * - `runGatedCall(name, args, { approvalId? })` to run a call: with the approval's id it is checked against its
 *   binding and the current policy and used once; without one it goes through the gate as a new call.
 * A framework's approval decides only asks Toolhost made: a call the policy denies never runs, whatever the
 * framework was told, and a call the policy allows runs without a framework round trip.
 */
import { ApprovalGate } from "../app/approvals/gate.js";
import { runGatedCall } from "../app/approvals/one-off.js";
import { type ApprovalService, argumentsHash } from "../app/approvals/service.js";
import type { CoreContext } from "../app/core-context.js";
import { withoutChatTurnTools } from "../core/agents.js";
import { withCallSurface } from "../core/call-surface.js";
import { DeniedByPolicyError } from "../core/errors.js";
import type { ToolCallOutcome, ToolRuntime } from "../core/runtime.js";
import type { RegisteredTool, ToolDefinition, ToolProgressEvent } from "../core/types.js";
import type { ApprovalRecord } from "../storage/approvals.js";

/** Who the tools act for and where: the options both adapters' `toolhostTools` take. */
export interface ToolhostToolsOptions {
  /** The user whose settings, approvals, spill area and audit the calls use (e.g. from the request's session). */
  userId: string;
  /**
   * The directory relative paths resolve against and file tools are confined to, or null for none (then they reach
   * no directory but an admin's allowedPaths: the host process's own never stands in for it). Checked like
   * the CLI's `--cwd` (the host application is the operator): it must exist, and lie inside TOOLHOST_CHAT_ROOTS when
   * those are configured. The bound directory is part of every approval's binding.
   */
  workingDirectory: string | null;
  /**
   * The chat the calls belong to: its freshness ledger (write_file needs a fresh read in the same chat) and the
   * approvals' binding. Null or absent: one-off scope.
   */
  chatId?: string | null;
}

/** What an adapter needs of the application context (what `createAppContext()` returns has all of it). */
export type AdapterContext = Pick<CoreContext, "runtime" | "approvals" | "binder" | "logger">;

/** How the policy classified one call. */
export type CallDecision =
  | { decision: "allow" }
  | {
      decision: "ask";
      approvalId: string;
      reason: string;
      /** The ask was made by this classification (not found from an earlier one). */
      fresh?: true;
    }
  | { decision: "deny"; outcome: ToolCallOutcome & { ok: false } };

/** One framework's answer to an ask. */
export interface FrameworkAnswer {
  toolCallId: string;
  /**
   * The tool and arguments of the call that was answered, when the framework says: the answer then decides only
   * an ask of exactly that call (a provider may reuse a call id for different calls).
   */
  tool?: string;
  args?: unknown;
  approved: boolean;
  /** The words the approver gave (a denial's reason reaches the model through the framework). */
  reason?: string;
}

/** One enabled tool as the adapters list it. */
export interface ListedTool {
  tool: RegisteredTool;
  definition: ToolDefinition;
}

/**
 * One user's Toolhost tools for one request of a framework adapter. `surface` names the framework in the audit
 * (`details.surface`) and in recorded approval answers (`<surface>:<userId>`).
 */
export class AdapterSession {
  readonly runtime: ToolRuntime;
  readonly approvals: ApprovalService;
  readonly userId: string;
  readonly chatId: string | null;
  readonly workingDirectory: string | null;
  readonly surface: string;
  /** Decisions by {@link callKey}: a provider may reuse a call id for different calls, even in one run. */
  readonly #decisions = new Map<string, Promise<CallDecision>>();
  /** Calls (by {@link callKey}) whose framework approval is known not to be for the ask Toolhost has. */
  readonly #unapprovable = new Set<string>();
  /** Answers already recorded by this session (a conversation's messages carry them on every request). */
  readonly #answered = new Set<string>();
  /** Per run context: the tools asked about in its current turn's listing, and the enabled names read for it. */
  readonly #enabled = new WeakMap<object, { asked: Set<string>; names: Promise<Set<string>> }>();

  private constructor(
    ctx: AdapterContext,
    options: ToolhostToolsOptions,
    workingDirectory: string | null,
    surface: string,
  ) {
    this.runtime = ctx.runtime;
    this.approvals = ctx.approvals;
    this.userId = options.userId;
    this.chatId = options.chatId ?? null;
    this.workingDirectory = workingDirectory;
    this.surface = surface;
  }

  /**
   * Opens a session. Throws AccessDeniedError / ToolArgumentError when the working directory cannot be bound (see
   * {@link ToolhostToolsOptions.workingDirectory}), TypeError for an empty user id.
   */
  static open(ctx: AdapterContext, options: ToolhostToolsOptions, surface: string): AdapterSession {
    if (typeof options?.userId !== "string" || options.userId === "") {
      throw new TypeError("toolhostTools needs the user the tools act for: { userId, workingDirectory }.");
    }
    const workingDirectory = ctx.binder.bind(options.workingDirectory, {
      userId: options.userId,
      admin: true,
      base: process.cwd(),
    });
    return new AdapterSession(ctx, options, workingDirectory, surface);
  }

  /** Who answered an ask through this surface, as recorded in Toolhost (`ai-sdk:alice`). */
  get answeredBy(): string {
    return `${this.surface}:${this.userId}`;
  }

  /**
   * The user's enabled tools that can work on this host, with their definitions (the user's settings applied); not
   * the sub-agent tools, which work only inside a chat turn ({@link withoutChatTurnTools}).
   */
  async list(): Promise<ListedTool[]> {
    const { tools, definitions } = withoutChatTurnTools(await this.runtime.getEnabledToolRuntime(this.userId));
    return definitions.map((definition, i) => ({ tool: tools[i] as RegisteredTool, definition }));
  }

  /**
   * Whether `name` is enabled for the user now. With `scope` (a run's context object), the settings are read once
   * per turn of that run rather than once per tool: the framework asks about every tool once when it lists them for
   * a model request, so a tool asked about again starts the next turn's listing (this needs no usage accounting,
   * which a model server may not report).
   */
  async isEnabled(name: string, scope?: object): Promise<boolean> {
    const read = () => this.list().then((listed) => new Set(listed.map((l) => l.definition.name)));
    if (!scope) return (await read()).has(name);
    let turn = this.#enabled.get(scope);
    if (!turn || turn.asked.has(name)) {
      turn = { asked: new Set(), names: read() };
      this.#enabled.set(scope, turn);
    }
    turn.asked.add(name);
    return (await turn.names).has(name);
  }

  /**
   * Who and where every call of the session runs: the user, the chat, the bound working directory — and without
   * one, no directory at all: the host process's own directory never stands in for it (several users share the
   * host, which chose none for this user).
   */
  get scope(): { userId: string; chatId: string | null; workingDirectory: string | null; processCwdFallback: false } {
    return {
      userId: this.userId,
      chatId: this.chatId,
      workingDirectory: this.workingDirectory,
      processCwdFallback: false,
    };
  }

  #gate(): ApprovalGate {
    return new ApprovalGate({ service: this.approvals, runtime: this.runtime, ...this.scope, onAsk: "return" });
  }

  /**
   * This user's approval of the call `toolCallId` (in this chat; of tool `name` with exactly `args` when given), if
   * Toolhost asked about it. Matching the arguments too keeps a provider that reuses call ids (`call_0` in every
   * response) from meeting an old approval for a new call.
   */
  async approvalFor(toolCallId: string, name?: string, args?: unknown): Promise<ApprovalRecord | undefined> {
    const record = await this.approvals.repository.findForCall(toolCallId, {
      chatId: this.chatId,
      userId: this.userId,
      ...(name !== undefined ? { tool: name } : {}),
      ...(args !== undefined ? { argsHash: argumentsHash(args) } : {}),
    });
    if (!record || record.userId !== this.userId || record.chatId !== this.chatId) return undefined;
    if (name !== undefined && record.tool !== name) return undefined;
    if (args !== undefined && record.argsHash !== argumentsHash(args)) return undefined;
    return record;
  }

  /**
   * Classifies a call: `allow`, `ask` (a pending approval now exists in Toolhost) or `deny` (audited, with the
   * outcome the model gets). The same call (id, tool, arguments) always gets the same answer: an ask made earlier
   * (in this process or another) is found again and stays an ask whatever its status, so a framework that
   * re-evaluates its approval predicate when the answer comes back sees the same decision. `newCall` says the
   * framework asks about a call the model has just made (not one it is answering): a provider that reuses call ids
   * may repeat an earlier call exactly, and an ask of that id already finished (run, denied, expired, cancelled)
   * then gives way to a new one.
   */
  classify(
    name: string,
    args: unknown,
    toolCallId: string,
    options: { newCall?: boolean } = {},
  ): Promise<CallDecision> {
    const key = callKey(toolCallId, name, args);
    const known = this.#decisions.get(key);
    if (known && !options.newCall) return known;
    const newCall = options.newCall === true;
    const decided = withCallSurface(this.surface, () => this.#classify(name, args, toolCallId, newCall, known));
    this.#decisions.set(key, decided);
    decided.catch(() => this.#decisions.delete(key));
    return decided;
  }

  /** See {@link classify}; `known`: this session's earlier decision on the same call (asked about anew). */
  async #classify(
    name: string,
    args: unknown,
    toolCallId: string,
    newCall: boolean,
    known?: Promise<CallDecision>,
  ): Promise<CallDecision> {
    const earlier = await known?.catch(() => undefined);
    if (earlier && earlier.decision !== "ask") return earlier;
    const existing = await this.approvalFor(toolCallId, name, args);
    if (existing && !(newCall && FINISHED_ASKS.has(existing.status))) {
      return { decision: "ask", approvalId: existing.id, reason: existing.reason };
    }
    const verdict = await this.#gate().check(
      { id: toolCallId, name, arguments: args as string },
      { emit: () => {}, snapshot: emptySnapshot },
    );
    if (verdict.run) return { decision: "allow" };
    const details = verdict.outcome.error.details as { approvalId?: unknown } | undefined;
    if (verdict.outcome.error.code === "denied_by_policy" && typeof details?.approvalId === "string") {
      const record = await this.approvals.repository.get(details.approvalId);
      return { decision: "ask", approvalId: details.approvalId, reason: record?.reason ?? "", fresh: true };
    }
    return { decision: "deny", outcome: verdict.outcome as ToolCallOutcome & { ok: false } };
  }

  /**
   * Marks the call `toolCallId` of `name` with `args` as one whose framework approval does not cover Toolhost's
   * ask `approvalId`: the framework says it was approved, but that ask for exactly these arguments was made only
   * now (the arguments were changed after the approval request went out). The ask, which nobody was shown, is
   * cancelled at once (so no answer in the conversation can decide it later), and executing the call is refused.
   */
  async refuseApproval(toolCallId: string, name: string, args: unknown, approvalId: string): Promise<void> {
    this.#unapprovable.add(callKey(toolCallId, name, args));
    await this.#cancelUnshown(approvalId);
  }

  /**
   * Records framework answers to Toolhost's asks (an approval response, a rejection): each pending ask of this user
   * for one of the calls (of the answer's tool and arguments, when it names them) is decided `allow_once` or `deny`
   * by `<surface>:<userId>`; a denial is audited as the call's refusal. Answers to calls Toolhost never asked about,
   * or already decided, change nothing. Never throws (a failure is logged).
   */
  async recordAnswers(answers: readonly FrameworkAnswer[]): Promise<void> {
    for (const answer of answers) {
      const key = answer.tool === undefined ? answer.toolCallId : callKey(answer.toolCallId, answer.tool, answer.args);
      if (this.#answered.has(key)) continue;
      try {
        const record = await this.approvalFor(answer.toolCallId, answer.tool, answer.args);
        if (!record) continue;
        this.#answered.add(key);
        if (record.status !== "pending") continue;
        const decided = await this.approvals.decide(this.userId, record.id, {
          decision: answer.approved ? "allow_once" : "deny",
          ...(answer.reason ? { message: answer.reason } : {}),
          decidedBy: this.answeredBy,
        });
        // The framework runs nothing for a denied call: the gate's refusal of it is its audit line (denied_by_user,
        // by `<surface>:<user>`), as for a denial in a Toolhost chat. Its arguments: the call's when the framework
        // named them, else the ask's redacted preview.
        if (decided.status === "denied") {
          const call = {
            id: record.toolCallId,
            name: record.tool,
            arguments: (answer.args ?? record.preview) as string,
          };
          await withCallSurface(this.surface, () => this.#gate().settle(decided, call));
        }
      } catch (error) {
        // Decided or expired meanwhile: the gate reads the final status when the call runs.
        this.runtime.logger.debug?.(
          { err: String(error), toolCallId: answer.toolCallId },
          "recording a framework's approval answer failed",
        );
      }
    }
  }

  async #cancelUnshown(approvalId: string): Promise<void> {
    try {
      await this.approvals.repository.cancel(approvalId, new Date());
    } catch (error) {
      this.runtime.logger.warn({ err: String(error), approvalId }, "cancelling an ask nobody was shown failed");
    }
  }

  /**
   * Runs a call the framework decided to execute, through the approval gate. The framework executes a call only when
   * its approval predicate said no approval was needed or its user approved the call, so: a call the policy denies
   * returns its refusal (whatever the framework was told); a call Toolhost asks about runs only with its approval —
   * recorded first as this surface's allow_once while still pending — checked against its binding and the current
   * policy and used once (a second execution of the same call is refused); any other call goes through the gate as a
   * new one. `approvedAll`: the framework approved every call of the tool without asking (the Agents SDK's
   * alwaysApprove), so a call Toolhost asks about is refused with the advice not to call again in this run. Never
   * throws for a tool failure or refusal: it is the outcome.
   */
  run(
    name: string,
    args: unknown,
    call: {
      toolCallId: string;
      signal?: AbortSignal;
      onProgress?: (event: ToolProgressEvent) => void;
      approvedAll?: boolean;
    },
  ): Promise<ToolCallOutcome> {
    return withCallSurface(this.surface, async () => {
      // Classified before execution (the framework's approval predicate ran in this session)?
      const classifiedBefore = this.#decisions.has(callKey(call.toolCallId, name, args));
      const decided = await this.classify(name, args, call.toolCallId);
      if (decided.decision === "deny") return decided.outcome;
      const common = {
        runtime: this.runtime,
        approvals: this.approvals,
        ...this.scope,
        ...(call.signal ? { signal: call.signal } : {}),
        ...(call.onProgress ? { onProgress: call.onProgress } : {}),
      };
      if (decided.decision === "ask") {
        const record = await this.approvals.repository.get(decided.approvalId);
        // An ask nobody was shown: made only now, at execution, or for arguments other than the approved ones — or
        // one such ask, cancelled when it was refused before (the same history sent again).
        if (
          (decided.fresh && !classifiedBefore) ||
          this.#unapprovable.has(callKey(call.toolCallId, name, args)) ||
          record?.status === "cancelled"
        ) {
          // That ask was never put to anyone: it is cancelled, so no answer can decide it later (a framework answer
          // finds the newest ask of the call id, and a re-sent history would otherwise approve what nobody saw).
          await this.#cancelUnshown(decided.approvalId);
          const outcome: ToolCallOutcome = {
            ok: false,
            error: new DeniedByPolicyError(
              call.approvedAll
                ? "This call needs approval, and this run approves every call of the tool without asking (alwaysApprove), which is no approval of this call. It was not run; do not call the tool again in this run. The user can allow it in Toolhost's settings of the tool (its approval setting or a rule)."
                : "This call needs approval, and the approval given for it was not for these arguments (or was given without asking Toolhost). It was not run; call the tool again to ask.",
              { approvalId: decided.approvalId },
            ).toJSON(),
            durationMs: 0,
          };
          await this.runtime.auditCall(
            name,
            args,
            { ...this.scope, approval: { decision: "deny", decidedBy: "policy" } },
            outcome,
          );
          return outcome;
        }
        if (record?.status === "pending") {
          await this.recordAnswers([{ toolCallId: call.toolCallId, tool: name, args, approved: true }]);
        }
        return runGatedCall(name, args, { ...common, approvalId: decided.approvalId });
      }
      const outcome = await runGatedCall(name, args, { ...common, onAsk: "return" });
      if (outcome.ok) return outcome;
      const asked = pendingAskOf(outcome);
      if (asked === undefined) return outcome;
      // The ask the gate made now is never shown (the model is told to call again, so that the framework asks):
      // cancelled, so it neither waits in the user's pending list nor counts against their limit.
      await this.#cancelUnshown(asked);
      return withoutPendingHint(outcome, asked);
    });
  }
}

/** The states of an ask that has nothing left to decide: a repeat of its call is a new call. */
const FINISHED_ASKS: ReadonlySet<ApprovalRecord["status"]> = new Set(["used", "denied", "expired", "cancelled"]);

/** One call's identity in a session: its id, tool and exact arguments (a provider may reuse ids). */
function callKey(toolCallId: string, name: string, args: unknown): string {
  return `${toolCallId}\n${name}\n${argumentsHash(args)}`;
}

const emptySnapshot = () => ({
  iterations: 0,
  added: [],
  assistant: { role: "assistant" as const, content: "" },
  results: [],
});

/** The approval id of the ask a gate's refusal left pending (onAsk "return"), if it is one. */
function pendingAskOf(outcome: ToolCallOutcome & { ok: false }): string | undefined {
  const details = outcome.error.details as { approvalId?: unknown } | undefined;
  return outcome.error.code === "denied_by_policy" && typeof details?.approvalId === "string"
    ? details.approvalId
    : undefined;
}

/**
 * A call that reached execution without the framework asking (the policy changed between the two): the gate's
 * message tells an HTTP client how to answer the pending approval; through a framework the model is told to call
 * again, so that the framework asks.
 */
function withoutPendingHint(outcome: ToolCallOutcome & { ok: false }, approvalId: string): ToolCallOutcome {
  return {
    ...outcome,
    error: new DeniedByPolicyError(
      "This call needs approval, which was not asked for when it was made (the user's approval settings changed). It was not run; call the tool again to ask.",
      { approvalId },
    ).toJSON(),
  };
}
