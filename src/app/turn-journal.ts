/**
 * What a chat turn leaves in the database so that any instance can follow it or take it over: its events, numbered
 * per chat and stored in order ({@link TurnEventLog}), and the journal of its tool calls — recorded before a call
 * runs and when it ends, with the step the calls belong to ({@link JournalGate}). Every write is fenced by the
 * turn's lease epoch. {@link resumeStepFromJournal} turns a dead owner's step and journal into the step the new
 * owner resumes.
 */
import type { GateStep, GateVerdict, LoopStepSnapshot, ToolCallGate } from "../loop/gate.js";
import type { ConversationMessage, ConversationToolCall, ConversationToolResult } from "../providers/types.js";
import type { JournalEntry, Lease, StoredTurnEvent, TurnLeaseRepository } from "../storage/turn-leases.js";
import type { TurnCoordinator } from "./turn-coordinator.js";

/** The takeover state of a turn (`chat_leases.state`, version 1). */
export interface TakeoverState {
  version: 1;
  /** The user message that started the turn. */
  userMessage: ConversationMessage;
  /** The step whose calls were running (with the complete steps before it), once a call started. */
  step?: LoopStepSnapshot;
}

/** The error code of a result fed back for a side-effecting call that was running when its owner died. */
export const INTERRUPTED_CODE = "interrupted";

/**
 * The step to resume after a takeover: a call with a result already known keeps it; a call the journal saw end
 * gets its recorded result (it never runs again); a call the journal saw start but not end runs again only when
 * `readOnly(name)` — otherwise the model gets an `interrupted` result saying it may or may not have taken effect;
 * a call that never started runs.
 */
export function resumeStepFromJournal(
  step: LoopStepSnapshot,
  journal: Map<string, JournalEntry>,
  readOnly: (tool: string) => boolean,
): LoopStepSnapshot {
  const calls: ConversationToolCall[] = step.assistant.role === "assistant" ? (step.assistant.toolCalls ?? []) : [];
  const results = calls.map((call, index): ConversationToolResult | null => {
    const known = step.results[index];
    if (known) return known;
    const entry = journal.get(call.id);
    if (!entry) return null;
    if (entry.status === "ended" && entry.result) return entry.result as ConversationToolResult;
    if (readOnly(call.name)) return null;
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
  return { ...step, results };
}

/** The gate of a chat turn's root loop: the approval gate's verdict, then the journal entry, then the call. */
export class JournalGate implements ToolCallGate {
  readonly #inner: ToolCallGate | undefined;
  readonly #repo: TurnLeaseRepository;
  readonly #lease: Lease;
  readonly #userMessage: ConversationMessage;
  #persistedStep = -1;
  readonly #calls = new Map<string, Promise<void>>();

  constructor(options: {
    inner?: ToolCallGate;
    repository: TurnLeaseRepository;
    lease: Lease;
    userMessage: ConversationMessage;
  }) {
    this.#inner = options.inner;
    this.#repo = options.repository;
    this.#lease = options.lease;
    this.#userMessage = options.userMessage;
  }

  async check(call: ConversationToolCall, step: GateStep): Promise<GateVerdict> {
    const verdict: GateVerdict = this.#inner
      ? await this.#inner.check(call, step)
      : { run: true, approval: { decision: "allow", decidedBy: "no policy" } };
    if (!verdict.run) return verdict;
    const snapshot = step.snapshot();
    let state: TakeoverState | undefined;
    if (snapshot.iterations !== this.#persistedStep) {
      state = { version: 1, userMessage: this.#userMessage, step: snapshot };
    }
    const started = this.#repo.journalStart(
      this.#lease.chatId,
      this.#lease.epoch,
      { turnId: this.#lease.turnId, callId: call.id, tool: call.name },
      state,
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
      turnId: this.#lease.turnId,
      callId: result.id,
      result,
    });
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
    this.#last = event;
    const seq = this.#next++;
    this.#queue.push({ seq, turnId: this.#lease.turnId, type: event.type, data: JSON.stringify(event) });
    if (!this.#flushing) this.#flushing = this.#drain();
    return seq;
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
   * Stores the remaining events and ends the lease in one transaction (fenced: a stale owner stores nothing), and
   * drops the turn's journal.
   */
  async finish(): Promise<void> {
    while (this.#flushing) await this.#flushing;
    const rest = this.#queue.splice(0);
    const repo = this.#turns.repository;
    await repo.release(this.#lease.chatId, this.#lease.epoch, async (trx) => {
      await repo.insertEvents(trx, this.#lease.chatId, rest);
      await repo.dropJournal(trx, this.#lease.turnId);
    });
    this.#turns.eventsStored(this.#lease.chatId);
  }
}
