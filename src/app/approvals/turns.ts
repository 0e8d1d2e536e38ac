/**
 * Persistence of a chat turn that waits for approvals: the state the tool loop needs to resume it after a restart
 * (the user message, the completed steps, the step whose calls wait, and the results known so far), kept in
 * `approval_turns` from the first ask of a step until the turn ends.
 */
import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { LoopStepSnapshot } from "../../loop/gate.js";
import type { ConversationMessage, ConversationToolResult } from "../../providers/types.js";
import type { ApprovalRepository } from "../../storage/approvals.js";
import type { TurnKeeper } from "./gate.js";

/** What `approval_turns.state` holds (version 1). */
export interface SuspendedTurnState {
  version: 1;
  /** The user message that started the turn (stored with the turn's messages when it ends). */
  userMessage: ConversationMessage;
  step: LoopStepSnapshot;
  /** The turn was cancelled while it waited (POST /api/chats/:id/cancel): resumed, it ends at once. */
  cancelled?: true;
}

/** Keeps one chat turn's state in the database; every write is queued, so they land in order. */
export class ChatTurnKeeper implements TurnKeeper {
  readonly turnId: string;
  #persisted: boolean;
  #iterations: number;
  #chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly repository: ApprovalRepository,
    private readonly owner: string,
    private readonly turn: { chatId: string; userId: string; userMessage: ConversationMessage },
    resumed?: { turnId: string; iterations: number },
  ) {
    this.turnId = resumed?.turnId ?? randomUUID();
    this.#persisted = resumed !== undefined;
    this.#iterations = resumed?.iterations ?? -1;
  }

  #enqueue(work: () => Promise<void>): Promise<void> {
    const next = this.#chain.then(work);
    this.#chain = next.catch(() => {});
    return next;
  }

  persist(snapshot: LoopStepSnapshot): Promise<void> {
    return this.#enqueue(async () => {
      if (this.#persisted && snapshot.iterations === this.#iterations) return;
      const state: SuspendedTurnState = { version: 1, userMessage: this.turn.userMessage, step: snapshot };
      await this.repository.saveTurn(
        { id: this.turnId, chatId: this.turn.chatId, userId: this.turn.userId, state, owner: this.owner },
        new Date(),
      );
      this.#persisted = true;
      this.#iterations = snapshot.iterations;
    });
  }

  recordResult(iterations: number, index: number, result: ConversationToolResult): Promise<void> {
    return this.#enqueue(async () => {
      if (!this.#persisted || iterations !== this.#iterations) return;
      await this.repository.updateTurnState(
        this.turnId,
        (state: SuspendedTurnState) => {
          if (state?.step?.iterations === iterations && Array.isArray(state.step.results))
            state.step.results[index] = result;
          return state;
        },
        new Date(),
      );
    });
  }

  heartbeat(): Promise<void> {
    return this.#enqueue(async () => {
      if (this.#persisted) await this.repository.heartbeat(this.turnId, this.owner);
    });
  }

  /** Whether the turn's state is stored (a call of it asked). */
  get persisted(): boolean {
    return this.#persisted;
  }

  /**
   * Lets go of the stored turn while its asks stay pending (its client left, or the server stops): whoever sees an
   * answer first claims it at once (ApprovalService.wakeTurn) and resumes it.
   */
  release(): Promise<void> {
    return this.#enqueue(async () => {
      if (this.#persisted) await this.repository.releaseTurn(this.turnId, this.owner);
    });
  }

  /**
   * Removes the stored state inside `trx`, the transaction that stores the turn's end (its messages, the end of its
   * lease): a process killed after that commit leaves no state that a sweep would resume, and store, a second
   * time. Await {@link settled} before that transaction begins: queued writes use connections of their own.
   */
  async finishWithin(trx: Kysely<any>): Promise<void> {
    if (this.#persisted) await this.repository.deleteTurn(this.turnId, trx);
  }

  /** Resolves once every write queued so far has landed (or failed). */
  settled(): Promise<void> {
    return this.#chain;
  }

  /** Removes the stored state once the turn has ended (its messages are stored by then). */
  finish(): Promise<void> {
    return this.#enqueue(async () => {
      if (this.#persisted) await this.repository.deleteTurn(this.turnId);
      this.#persisted = false;
    });
  }
}
