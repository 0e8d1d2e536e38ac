/**
 * One executor per turn, across every instance sharing the database. A chat turn runs only while its instance holds
 * the chat's lease (storage/turn-leases.ts): taken atomically when the message is posted (a second post gets
 * `chat_busy`, whichever instance it lands on), renewed every third of the lease, and checked (its fencing epoch) by
 * every write the turn makes — its events, its journal, its messages. This coordinator is the instance's side of
 * that: it renews the leases of the turns running here, stops a turn whose lease was lost or that was cancelled
 * (by signal within a second, or by the cancel flag at the next renewal), takes over turns whose owner died (their
 * lease expired), and hands its turns over on a graceful shutdown.
 */

import { newInstanceId } from "../core/instance.js";
import type { Logger } from "../core/types.js";
import type { Lease } from "../storage/turn-lease-records.js";
import type { TurnLeaseRepository } from "../storage/turn-leases.js";
import type { SignalBus } from "./signals.js";

/** Default lease length, in ms (TOOLHOST_TURN_LEASE_MS overrides): a dead owner's turn moves within ~1.4x this. */
export const DEFAULT_TURN_LEASE_MS = 15_000;

/** Why a turn running here was stopped from outside its loop. */
export type TurnStopReason = "cancelled" | "lease_lost" | "handed_over";

/** A turn running in this instance. */
interface LocalTurn {
  lease: Lease;
  stop(reason: TurnStopReason): void;
}

/** Options of a TurnCoordinator. */
export interface TurnCoordinatorOptions {
  repository: TurnLeaseRepository;
  signals: SignalBus;
  logger?: Logger;
  /** This instance's id (lease owner); default `host:pid:nonce`. */
  instanceId?: string;
  /** Lease length in ms; default {@link DEFAULT_TURN_LEASE_MS}. */
  leaseMs?: number;
}

/** Leases, cancel, takeover and handover of the chat turns of one instance. */
export class TurnCoordinator {
  readonly instanceId: string;
  readonly leaseMs: number;
  readonly repository: TurnLeaseRepository;
  readonly signals: SignalBus;
  readonly #logger: Logger | undefined;
  readonly #local = new Map<string, LocalTurn>();
  readonly #eventWaiters = new Map<string, Set<() => void>>();
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;
  #closed = false;
  #takeover: ((lease: Lease) => Promise<void>) | undefined;
  readonly #unsubscribe: () => void;

  constructor(options: TurnCoordinatorOptions) {
    this.repository = options.repository;
    this.signals = options.signals;
    this.#logger = options.logger;
    this.instanceId = options.instanceId ?? newInstanceId();
    this.leaseMs = Math.max(300, options.leaseMs ?? DEFAULT_TURN_LEASE_MS);
    this.#unsubscribe = this.signals.subscribe((signal) => {
      if (signal.kind === "chat_cancel") this.#local.get(signal.target)?.stop("cancelled");
    });
  }

  /**
   * Registers who resumes a turn taken over from a dead (or departed) owner: the chat service. Called with the
   * claimed lease (this instance then holds it); it must run the turn to its end and release the lease.
   */
  setTakeover(takeover: (lease: Lease) => Promise<void>): void {
    this.#takeover = takeover;
  }

  /** Starts renewing leases and sweeping for expired ones, every third of the lease. */
  start(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setInterval(() => void this.tick(), Math.max(100, Math.floor(this.leaseMs / 3)));
    this.#timer.unref?.();
  }

  /** Takes the chat's lease for a new turn. Throws LeaseBusyError when another turn holds it. */
  acquire(chatId: string, userId: string, state: unknown): Promise<Lease> {
    return this.repository.acquire({ chatId, userId, owner: this.instanceId, leaseMs: this.leaseMs, state });
  }

  /**
   * Tracks a turn that runs here under `lease` (renewal, cancel, handover); resolves with its remover once a cancel
   * requested before it was tracked (its signal found no turn here to stop: the lease was taken a moment before) has
   * been looked for in the lease and, when there was one, the turn stopped.
   */
  async track(lease: Lease, stop: (reason: TurnStopReason) => void): Promise<() => void> {
    const turn: LocalTurn = { lease, stop };
    this.#local.set(lease.chatId, turn);
    const untrack = () => {
      if (this.#local.get(lease.chatId) === turn) this.#local.delete(lease.chatId);
    };
    try {
      if (await this.repository.cancelRequested(lease.chatId, lease.epoch)) stop("cancelled");
    } catch (error) {
      // The flag is read again at the next renewal.
      this.#logger?.warn({ err: String(error), chatId: lease.chatId }, "reading a turn's cancel flag failed");
    }
    return untrack;
  }

  /** Tells local followers of the chat's event stream that events were stored (the turn's log calls it). */
  eventsStored(chatId: string): void {
    const waiters = this.#eventWaiters.get(chatId);
    if (!waiters) return;
    this.#eventWaiters.delete(chatId);
    for (const wake of waiters) wake();
  }

  /**
   * Resolves when events of the chat were stored by a turn of this instance, or after `ms` (a turn of another
   * instance is followed by polling), or when `signal` aborts.
   */
  waitForEvents(chatId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.#eventWaiters.get(chatId) ?? new Set<() => void>();
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      this.#eventWaiters.set(chatId, set);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Whether a turn of the chat runs in this instance. */
  runsHere(chatId: string): boolean {
    return this.#local.has(chatId);
  }

  /**
   * Cancels the chat's running turn wherever it runs: sets the cancel flag (read at the owner's next renewal) and
   * signals the owner (which stops it within a second). False when no turn was running.
   */
  async cancel(chatId: string): Promise<{ cancelled: boolean; turnId: string | null }> {
    const current = await this.repository.requestCancel(chatId);
    if (!current) return { cancelled: false, turnId: null };
    this.#local.get(chatId)?.stop("cancelled");
    await this.signals.publish("chat_cancel", chatId);
    return { cancelled: true, turnId: current.turnId };
  }

  /** One renewal and takeover sweep (the timer runs it; tests may call it). */
  async tick(): Promise<void> {
    if (this.#ticking || this.#closed) return;
    this.#ticking = true;
    try {
      const held = [...this.#local.values()].map((t) => ({ chatId: t.lease.chatId, epoch: t.lease.epoch }));
      if (held.length > 0) {
        const renewed = await this.repository.renew(this.instanceId, held, this.leaseMs);
        for (const { chatId } of held) {
          const turn = this.#local.get(chatId);
          if (!turn) continue;
          const flag = renewed.get(chatId);
          if (flag === undefined) turn.stop("lease_lost");
          else if (flag) turn.stop("cancelled");
        }
      }
      if (this.#takeover) {
        const claimed = await this.repository.claimExpired(this.instanceId, this.leaseMs);
        for (const lease of claimed) {
          this.#logger?.info({ chatId: lease.chatId, turnId: lease.turnId }, "taking over a turn");
          void this.#takeover(lease).catch((error) =>
            this.#logger?.error({ err: String(error), chatId: lease.chatId }, "taking over a turn failed"),
          );
        }
      }
    } catch (error) {
      this.#logger?.warn({ err: String(error) }, "renewing turn leases failed");
    } finally {
      this.#ticking = false;
    }
  }

  /**
   * Graceful shutdown: hands every turn running here over (its lease expires now and its epoch moves on, so this
   * instance can no longer write for it), then stops it; another instance takes it over at its next sweep.
   */
  async handOver(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unsubscribe();
    for (const turn of [...this.#local.values()]) {
      try {
        await this.repository.handOver(turn.lease.chatId, turn.lease.epoch);
      } catch (error) {
        this.#logger?.warn({ err: String(error), chatId: turn.lease.chatId }, "handing a turn over failed");
      }
      turn.stop("handed_over");
    }
  }
}
