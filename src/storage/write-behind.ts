/**
 * Writes that run behind their callers, batched: what the audit log and the freshness ledger queue is stored by one
 * write a short while after the first line was queued, so back-to-back calls share it.
 */

/**
 * Runs `write` (which drains its owner's queue) at most once at a time: {@link soon} runs it a while after the first
 * ask (later asks share that run), {@link now} at once. A timer's run that fails is left to `write` to report.
 */
export class WriteBehind {
  readonly #write: () => Promise<void>;
  readonly #delayMs: number;
  readonly #unref: boolean;
  #timer = false;
  #running: Promise<void> | undefined;

  /**
   * @param write drains the owner's queue; a rejection reaches the caller of {@link now}
   * @param delayMs how long (ms) {@link soon} waits by default
   * @param options `unref`: a pending run does not keep the process alive (its owner flushes before it closes)
   */
  constructor(write: () => Promise<void>, delayMs: number, options: { unref?: boolean } = {}) {
    this.#write = write;
    this.#delayMs = delayMs;
    this.#unref = options.unref ?? false;
  }

  /** Whether a write is running now. */
  get busy(): boolean {
    return this.#running !== undefined;
  }

  /** Runs the write in `ms` (default: the delay given), unless a run is already waiting for its timer. */
  soon(ms = this.#delayMs): void {
    if (this.#timer) return;
    this.#timer = true;
    const timer = setTimeout(() => {
      this.#timer = false;
      void this.now().catch(() => {});
    }, ms);
    if (this.#unref) timer.unref?.();
  }

  /**
   * The run in progress, or a new one. The run is forgotten by its own settlement, never synchronously inside it (a
   * run over an empty queue settles at once, and a settled promise left behind would make a flush loop spin).
   */
  now(): Promise<void> {
    if (this.#running) return this.#running;
    const run: Promise<void> = this.#write().finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    this.#running = run;
    return run;
  }
}
