/**
 * What a chat turn leaves in the database so that any instance can follow it or take it over: its events, numbered
 * per chat and stored in order ({@link TurnEventLog}), and the journal of its tool calls — recorded before a call
 * runs and when it ends, with the step the calls belong to ({@link JournalGate}). Every write is fenced by the
 * turn's lease epoch. {@link resumeStepFromJournal} turns a dead owner's step and journal into the step the new
 * owner resumes.
 */
import type { Kysely } from "kysely";
import type { AgentRunState, TreeJournal } from "../agents/service.js";
import type { GateStep, GateVerdict, LoopStepSnapshot, ToolCallGate } from "../loop/gate.js";
import type { ConversationMessage, ConversationToolCall, ConversationToolResult } from "../providers/types.js";
import {
  JOURNAL_STATE_ROW,
  type JournalEntry,
  type Lease,
  type StoredTurnEvent,
} from "../storage/turn-lease-records.js";
import type { TurnLeaseRepository } from "../storage/turn-leases.js";
import { retryWhileUnavailable } from "../storage/unavailable.js";
import type { TurnCoordinator } from "./turn-coordinator.js";

/** The takeover state of a turn (`chat_leases.state`, version 1). */
export interface TakeoverState {
  version: 1;
  /** The user message that started the turn. */
  userMessage: ConversationMessage;
  /** The step whose calls were running (with the complete steps before it), once a call started. */
  step?: LoopStepSnapshot;
  /** The root agent of the turn's agent tree (its running sub-agents move with the turn). */
  agentRootId?: string;
}

/** The error code of a result fed back for a side-effecting call that was running when its owner died. */
export const INTERRUPTED_CODE = "interrupted";

/**
 * The step to resume after a takeover: a call with a result already known keeps it; a call the journal saw end
 * gets its recorded result (it never runs again); a call the journal saw start but not end runs again only when
 * `readOnly(name)` — otherwise the model gets an `interrupted` result saying it may or may not have taken effect;
 * a call that never started runs. `report` lists the calls whose result the resumed step must report: the
 * interrupted ones, and, when `reported` (the ids whose `tool_result` event was stored) is given, every known result
 * missing from it (the dead owner may have known a result without having stored its event).
 */
export function resumeStepFromJournal(
  step: LoopStepSnapshot,
  journal: Map<string, JournalEntry>,
  readOnly: (tool: string) => boolean,
  reported?: ReadonlySet<string>,
): LoopStepSnapshot & { report: number[] } {
  const calls: ConversationToolCall[] = step.assistant.role === "assistant" ? (step.assistant.toolCalls ?? []) : [];
  const report: number[] = [];
  const results = calls.map((call, index): ConversationToolResult | null => {
    const entry = journal.get(call.id);
    const known =
      step.results[index] ?? (entry?.status === "ended" ? (entry.result as ConversationToolResult | null) : null);
    if (known) {
      if (reported && !reported.has(call.id)) report.push(index);
      return known;
    }
    if (!entry) return null;
    if (readOnly(call.name)) return null;
    // Never reported: the call did not end. Its result is reported when the step resumes.
    report.push(index);
    return {
      id: call.id,
      name: call.name,
      ok: false,
      content: JSON.stringify({
        error: {
          code: INTERRUPTED_CODE,
          message: `The call of "${call.name}" was interrupted: the server running it stopped while it ran. It may or may not have taken effect; check before running it again.`,
        },
      }),
    };
  });
  return { ...step, results, report };
}

/**
 * The gate of a durable loop — a chat turn's root loop, or a sub-agent's run in the turn's tree: the approval gate's
 * verdict, then the journal entry, then the call. Every write is fenced by the chat's lease.
 */
export class JournalGate implements ToolCallGate {
  readonly #inner: ToolCallGate | undefined;
  readonly #repo: TurnLeaseRepository;
  readonly #lease: Lease;
  readonly #journalId: string;
  readonly #stateOf: (step: LoopStepSnapshot) => unknown;
  readonly #stateIn: "lease" | "journal";
  #persistedStep = -1;
  readonly #calls = new Map<string, Promise<void>>();

  constructor(options: {
    inner?: ToolCallGate;
    repository: TurnLeaseRepository;
    lease: Lease;
    /** The chat turn's user message (a chat turn's loop: its state is a {@link TakeoverState}). */
    userMessage?: ConversationMessage;
    /** The chat turn's agent tree root, kept in its state. */
    agentRootId?: string;
    /**
     * A sub-agent's run instead: its journal id (the agent's id) and its takeover state around a step (stored in
     * the journal's state row).
     */
    agent?: { journalId: string; stateOf: (step: LoopStepSnapshot) => unknown };
  }) {
    this.#inner = options.inner;
    this.#repo = options.repository;
    this.#lease = options.lease;
    const userMessage = options.userMessage;
    this.#journalId = options.agent?.journalId ?? options.lease.turnId;
    this.#stateIn = options.agent ? "journal" : "lease";
    this.#stateOf =
      options.agent?.stateOf ??
      ((step) =>
        ({
          version: 1,
          userMessage: userMessage as ConversationMessage,
          step,
          ...(options.agentRootId ? { agentRootId: options.agentRootId } : {}),
        }) satisfies TakeoverState);
  }

  async check(call: ConversationToolCall, step: GateStep): Promise<GateVerdict> {
    const verdict: GateVerdict = this.#inner
      ? await this.#inner.check(call, step)
      : { run: true, approval: { decision: "allow", decidedBy: "no policy" } };
    if (!verdict.run) return verdict;
    const snapshot = step.snapshot();
    let state: unknown;
    if (snapshot.iterations !== this.#persistedStep) state = this.#stateOf(snapshot);
    const started = this.#repo.journalStart(
      this.#lease.chatId,
      this.#lease.epoch,
      { turnId: this.#journalId, callId: call.id, tool: call.name },
      state,
      this.#stateIn,
    );
    this.#calls.set(
      call.id,
      started.catch(() => {}),
    );
    try {
      await started;
      if (state) this.#persistedStep = snapshot.iterations;
    } catch (error) {
      // Not journaled (the lease moved on, or the database is unreachable): the call must not run.
      return {
        run: false,
        outcome: {
          ok: false,
          error: {
            code: "aborted",
            message: `The call of "${call.name}" did not run: ${(error as Error)?.message ?? String(error)}`,
          },
          durationMs: 0,
        },
      };
    }
    return verdict;
  }

  async onResult(index: number, result: ConversationToolResult, step: GateStep): Promise<void> {
    await this.#inner?.onResult?.(index, result, step);
    const started = this.#calls.get(result.id);
    if (!started) return;
    this.#calls.delete(result.id);
    await started;
    await this.#repo.journalEnd(this.#lease.chatId, this.#lease.epoch, {
      turnId: this.#journalId,
      callId: result.id,
      result,
    });
  }
}

/**
 * The durability of a chat turn's agent tree, over the turn's lease: every write of the tree's runs is fenced by the
 * lease's epoch; each run journals its calls under its agent id, with its state (AgentRunState) in the journal's
 * state row; an agent_spawn call records the agent it spawned (`#spawn:<call id>` in the parent's journal), so the
 * same call run again after a takeover waits for that agent instead of spawning another.
 */
export class LeaseTreeJournal implements TreeJournal {
  readonly #repo: TurnLeaseRepository;
  readonly #lease: Lease;
  readonly #rerunnable: (tool: string) => boolean;

  /** `rerunnable(tool)`: whether an unfinished call of `tool` may run again after a takeover. */
  constructor(repository: TurnLeaseRepository, lease: Lease, rerunnable: (tool: string) => boolean) {
    this.#repo = repository;
    this.#lease = lease;
    this.#rerunnable = rerunnable;
  }

  readonly fence = (trx: Kysely<any>): Promise<void> =>
    this.#repo.assertEpoch(trx, this.#lease.chatId, this.#lease.epoch);

  gate(agentId: string, base: AgentRunState, inner: ToolCallGate | undefined): ToolCallGate {
    return new JournalGate({
      ...(inner ? { inner } : {}),
      repository: this.#repo,
      lease: this.#lease,
      agent: { journalId: agentId, stateOf: (step) => ({ ...base, step }) satisfies AgentRunState },
    });
  }

  begin(agentId: string, state: AgentRunState): Promise<void> {
    return this.#repo.saveJournalState(this.#lease.chatId, this.#lease.epoch, agentId, state);
  }

  async resume(agentId: string): Promise<AgentRunState | undefined> {
    const state = (await this.#repo.journalRow(agentId, JOURNAL_STATE_ROW)) as AgentRunState | undefined;
    if (state?.version !== 1) return undefined;
    if (!state.step) return state;
    return {
      ...state,
      step: resumeStepFromJournal(state.step, await this.#repo.journal(agentId), this.#rerunnable),
    };
  }

  async spawned(parentId: string, callId: string): Promise<string | undefined> {
    const link = (await this.#repo.journalRow(parentId, `#spawn:${callId}`)) as { agentId?: unknown } | undefined;
    return typeof link?.agentId === "string" ? link.agentId : undefined;
  }

  async linkSpawn(trx: Kysely<any>, parentId: string, callId: string, childId: string): Promise<void> {
    await this.fence(trx);
    await this.#repo.putJournalRow(trx, parentId, `#spawn:${callId}`, this.#lease.epoch, { agentId: childId });
  }

  drop(agentIds: string[]): Promise<void> {
    return this.#repo.dropJournals(this.#lease.chatId, this.#lease.epoch, agentIds);
  }
}

/**
 * A turn's events on their way to the database: each gets the next per-chat seq at once (the SSE `id:`), and
 * writes are batched in order (one transaction per batch, fenced by the lease). A failed write is retried with the
 * next batch; a write refused because the lease moved on is reported to `onError` (the turn then stops).
 */
export class TurnEventLog {
  readonly #turns: TurnCoordinator;
  readonly #lease: Lease;
  readonly #onError: (error: unknown) => void;
  readonly #queue: StoredTurnEvent[] = [];
  #next: number;
  #flushing: Promise<void> | undefined;
  #last: object | undefined;

  constructor(turns: TurnCoordinator, lease: Lease, onError: (error: unknown) => void) {
    this.#turns = turns;
    this.#lease = lease;
    this.#onError = onError;
    this.#next = lease.nextSeq;
  }

  /** The seq of the last event pushed (0 before the first). */
  get lastId(): number {
    return this.#next - 1;
  }

  /** Whether `event` is the last one pushed (the turn numbers its own `done`). */
  isLast(event: object): boolean {
    return this.#last === event;
  }

  /** Numbers the event, queues it for storage and returns its seq. */
  push(event: { type: string }): number {
    const stored = this.#number(event);
    this.#queue.push(stored);
    if (!this.#flushing) this.#flushing = this.#drain();
    return stored.seq;
  }

  #number(event: { type: string }): StoredTurnEvent {
    this.#last = event;
    return { seq: this.#next++, turnId: this.#lease.turnId, type: event.type, data: JSON.stringify(event) };
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.slice(0, 200);
        try {
          await this.#turns.repository.appendEvents(this.#lease.chatId, this.#lease.epoch, batch);
          this.#queue.splice(0, batch.length);
          this.#turns.eventsStored(this.#lease.chatId);
        } catch (error) {
          this.#onError(error);
          return;
        }
      }
    } finally {
      this.#flushing = undefined;
    }
  }

  /** Waits until every queued event is stored (or a write failed). */
  async flush(): Promise<void> {
    while (this.#flushing) await this.#flushing;
    if (this.#queue.length > 0) {
      this.#flushing = this.#drain();
      await this.#flushing;
    }
  }

  /**
   * Stores the remaining events and `last` (the turn's `done`, numbered now but stored only here) and ends the lease
   * in one transaction, with `fenced` work (the turn's messages) in it, and drops the turn's journal: the turn is
   * stored and over at once, or not at all (an owner killed in between would leave stored messages under a live
   * lease, and the instance taking it over would run the turn again; a `done` stored ahead of its messages would
   * let a follower read the chat without them). Fenced: a stale owner stores nothing (false). Tried again for a
   * while when the database cannot be reached. When it throws, nothing was stored (`last` keeps its number unused).
   */
  async finish(last?: { type: string }, fenced?: (trx: Kysely<any>) => Promise<void>): Promise<boolean> {
    while (this.#flushing) await this.#flushing;
    const rest = this.#queue.slice();
    const events = last ? [...rest, this.#number(last)] : rest;
    const repo = this.#turns.repository;
    // A cut connection (a database restart, a failover) does not lose the finished turn: it is tried again.
    const ended = await retryWhileUnavailable(() =>
      repo.release(this.#lease.chatId, this.#lease.epoch, async (trx) => {
        await fenced?.(trx);
        await repo.insertEvents(trx, this.#lease.chatId, events);
        await repo.dropJournal(trx, this.#lease.turnId);
      }),
    );
    this.#queue.splice(0, rest.length);
    if (ended) this.#turns.eventsStored(this.#lease.chatId);
    return ended;
  }
}
