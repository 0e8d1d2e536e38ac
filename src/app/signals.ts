/**
 * The signal bus between instances sharing one database: small messages carrying ids only (never user content)
 * that tell the instance concerned to act now rather than at its next poll — cancel a chat's turn, cancel an agent,
 * an approval was answered, an MCP request was cancelled, a user's tool list changed.
 *
 * Every signal is a row of `signals` (kept a minute). On PostgreSQL the same transaction NOTIFYs it on a channel
 * that each instance LISTENs to on a dedicated connection; while that connection is down (and reconnecting) the
 * instance polls the table instead, every {@link SIGNAL_POLL_MS}. On SQLite the instance's own signals are delivered
 * in-process at once and other processes' by the same poll. A signal may arrive twice (notify and poll): handlers
 * are idempotent and signals are de-duplicated by id.
 */
import type { Logger } from "../core/types.js";
import type { ToolhostDatabase } from "../storage/database.js";
import type { SignalRow } from "../storage/turn-lease-records.js";
import { SIGNAL_PAGE, type TurnLeaseRepository } from "../storage/turn-leases.js";

/** The kinds of signal, each naming what its `target` id is. */
export type SignalKind =
  /** target: a chat id — cancel its running turn. */
  | "chat_cancel"
  /** target: an agent id — stop its run. */
  | "agent_cancel"
  /** target: an approval id — it was answered. */
  | "approval"
  /** target: a hash of an MCP request key — cancel that call. */
  | "mcp_cancel"
  /** target: a user id, or "*" — that user's (everyone's) tool list changed. */
  | "tools_changed";

/** A received signal. */
export interface Signal {
  kind: SignalKind;
  target: string;
  /** True for a signal this instance published itself (delivered to its own handlers at once). */
  local?: boolean;
}

/** How often the poll fallback reads the signals table while the listener is down (and always on SQLite), in ms. */
export const SIGNAL_POLL_MS = 250;
/** The NOTIFY channel. */
export const SIGNAL_CHANNEL = "toolhost_signals";
const KEEP_MS = 60_000;

/** Publishes and delivers signals (one per application context). */
export class SignalBus {
  readonly #repo: TurnLeaseRepository;
  readonly #database: ToolhostDatabase;
  readonly #logger: Logger | undefined;
  readonly #handlers = new Set<(signal: Signal) => void>();
  readonly #seen = new Map<string, number>();
  #listener: ReturnType<NonNullable<ToolhostDatabase["listen"]>> | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #polling = false;
  #since = 0;
  #started = false;
  #stopped = false;

  constructor(options: { repository: TurnLeaseRepository; database: ToolhostDatabase; logger?: Logger }) {
    this.#repo = options.repository;
    this.#database = options.database;
    this.#logger = options.logger;
  }

  /** Whether signals arrive by NOTIFY now (false: by polling). */
  get listening(): boolean {
    return this.#listener?.up ?? false;
  }

  /** Starts listening (PostgreSQL) and the poll fallback. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    this.#since = await this.#repo.now();
    if (this.#database.listen) {
      this.#listener = this.#database.listen(SIGNAL_CHANNEL, {
        onNotify: (payload) => {
          try {
            this.#deliver(JSON.parse(payload) as SignalRow);
          } catch {
            // not ours
          }
        },
        onState: (up) => {
          this.#logger?.info({ up }, up ? "signal listener connected" : "signal listener down; polling");
          // Signals sent while it was down are read by one catch-up poll.
          if (up) void this.#poll();
        },
        onError: (error) => this.#logger?.debug({ err: String(error) }, "signal listener"),
      });
    }
    this.#pollTimer = setInterval(() => {
      if (!this.listening) void this.#poll();
      else this.#forgetOld();
    }, SIGNAL_POLL_MS);
    this.#pollTimer.unref?.();
  }

  /** Stops listening and polling. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#pollTimer);
    await this.#listener?.stop();
  }

  /** Adds a handler for every signal (local and remote); returns its remover. */
  subscribe(handler: (signal: Signal) => void): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  /**
   * Sends a signal to every instance (this one included, at once). Never throws: a failure is logged, and the
   * state the signal points at (a cancel flag, an answered approval) is in the database for the owner's own checks.
   */
  async publish(kind: SignalKind, target: string): Promise<void> {
    if (this.#stopped) return;
    try {
      const row = await this.#repo.publish(kind, target, SIGNAL_CHANNEL);
      if (this.#seen.has(row.id)) return;
      this.#seen.set(row.id, row.createdMs);
      this.#dispatch({ kind, target, local: true });
    } catch (error) {
      if (this.#stopped) return; // the database closed under it: nothing to tell any more
      this.#logger?.warn({ err: String(error), kind }, "publishing a signal failed");
      this.#dispatch({ kind, target, local: true });
    }
  }

  #deliver(row: SignalRow): void {
    if (this.#seen.has(row.id)) return;
    this.#seen.set(row.id, row.createdMs);
    if (row.createdMs > this.#since) this.#since = row.createdMs;
    this.#dispatch({ kind: row.kind as SignalKind, target: row.target });
  }

  #dispatch(signal: Signal): void {
    for (const handler of [...this.#handlers]) {
      try {
        handler(signal);
      } catch (error) {
        this.#logger?.warn({ err: String(error), kind: signal.kind }, "a signal handler failed");
      }
    }
  }

  /** Forgets the ids of signals older than the table keeps (no read returns them again), listening or polling. */
  #forgetOld(): void {
    const horizon = this.#since - KEEP_MS;
    for (const [id, at] of this.#seen) if (at < horizon) this.#seen.delete(id);
  }

  async #poll(): Promise<void> {
    if (this.#polling || this.#stopped) return;
    this.#polling = true;
    try {
      // Rows commit in any order: read a window a few seconds back and skip the ones seen — page after page, so a
      // burst of more rows than one page holds cannot hide the signals after it.
      let from: { ms: number; id?: string } = { ms: this.#since - 5_000 };
      for (;;) {
        const rows = await this.#repo.signalsSince(from.ms, from.id);
        for (const row of rows) {
          this.#deliver(row);
          if (row.createdMs > this.#since) this.#since = row.createdMs;
        }
        const last = rows.at(-1);
        if (rows.length < SIGNAL_PAGE || !last || this.#stopped) break;
        from = { ms: last.createdMs, id: last.id };
      }
      this.#forgetOld();
      if (Math.random() < 0.02) await this.#repo.pruneSignals(this.#since - KEEP_MS);
    } catch (error) {
      this.#logger?.debug({ err: String(error) }, "polling signals failed");
    } finally {
      this.#polling = false;
    }
  }
}
