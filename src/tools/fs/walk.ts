/**
 * A deterministic directory walker for glob and grep's JS engine: pre-order depth-first, entries of each
 * directory in code-unit name order, symlinks reported but never followed (so a symlink cycle cannot loop),
 * stoppable at any entry (the walk ends when a cap is reached), and cancellable through an AbortSignal.
 *
 * Reading directories is most of a walk's cost, and most of that is the kernel's (getdents), so directories are
 * read ahead on the libuv thread pool while the visits stay in the order of a sequential walk:
 * - With `descend` (a pure prediction of which subdirectories the walk will enter), each arriving listing is
 *   filtered and sorted at once and its predicted subdirectories are queued for reading, deepest-first, so the reads
 *   run depth-first ahead of the visits, in nearly the order the visits need them. IN_FLIGHT reads at most are on
 *   the thread pool at a time (enough to keep it busy; a walk stopped early leaves little behind), and the reads
 *   ahead of the visits are bounded by a budget that grows with the directories visited. The visits then rarely
 *   wait, and the kernel work runs on every core.
 * - Without it, the next REFILL directories on the stack (those the visits accepted) are read ahead, and the
 *   directory about to be visited is read synchronously when its read was not started (the cheapest call).
 * A directory is read once: a visit awaits the read started ahead. A walk that stops early leaves those reads to
 * finish unobserved (their outcome is a value, never a rejection). The walk yields to the event loop every few
 * milliseconds (also within a wide directory), so a long walk never starves other work.
 */
import { type Dirent, readdir, readdirSync } from "node:fs";
import { sep } from "node:path";

/** One entry met by the walk. */
export interface WalkEntry {
  /** Path relative to the walk root, `/`-separated (built on first use: most entries of a big walk never need it). */
  readonly rel: string;
  /** The containing directory's `rel` ("" for the root). */
  readonly parent: string;
  readonly name: string;
  readonly dirent: Dirent;
  /** 1 for the root's children. */
  readonly depth: number;
}

class Entry implements WalkEntry {
  #rel: string | undefined;
  constructor(
    readonly parent: string,
    readonly name: string,
    readonly dirent: Dirent,
    readonly depth: number,
  ) {}
  get rel(): string {
    this.#rel ??= this.parent ? `${this.parent}/${this.name}` : this.name;
    return this.#rel;
  }
}

/** Options of walk(). */
export interface WalkOptions {
  /** Absolute directory to walk. */
  root: string;
  signal?: AbortSignal;
  /**
   * Called for every entry in walk order. Return "stop" to end the walk, "skip" to neither report nor descend
   * (for a directory), anything else to continue (directories are then descended into).
   */
  visit(entry: WalkEntry): "stop" | "skip" | undefined;
  /**
   * Optional prediction, without side effects, of whether `visit` will let the directory at `rel` be descended into;
   * it lets the walker read such directories early. A wrong prediction costs a wasted or a late read, never a
   * different result.
   */
  descend?(rel: string, name: string): boolean;
  /**
   * Optional: false for an entry that `visit` would neither report nor descend into. Such entries are dropped
   * before a listing is sorted, and never visited (nor passed to onDirectory).
   */
  keep?(dirent: Dirent): boolean;
  /** Called with a directory's entries (already sorted) before they are visited; `rel` is "" for the root. */
  onDirectory?(rel: string, entries: Dirent[]): void;
  /** Called for a directory that cannot be read (permissions, vanished). */
  onError?(rel: string, error: NodeJS.ErrnoException): void;
}

const byName = (a: Dirent, b: Dirent) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/**
 * Most directory reads in flight on the thread pool at once: enough to keep its threads busy (4 by default), few
 * enough that a walk stopped early leaves little queued work behind, and that other file-system calls of the
 * process never wait behind a long queue of reads.
 */
const IN_FLIGHT = 64;
/** Directory reads a walk may have ahead of its visits (in flight or arrived) before it has visited any directory. */
const READ_AHEAD_MIN = 64;
/** Reads ahead added per directory visited (the budget grows with the walk, so an early stop wastes few reads). */
const READ_AHEAD_PER_VISIT = 4;
/** Most directory reads ahead of their visit (bounds the listings held in memory). */
const READ_AHEAD_MAX = 4096;
/** How far down the stack a visited directory looks for reads to start (walks without `descend`). */
const REFILL = 32;

/**
 * A directory to visit. `started` is set once its read was started; `outcome` holds the listing (or the error) once
 * it arrived, and `waiter` is the visit waiting for it. No promise per read: most reads have arrived by the time
 * their visit comes, and then the visit continues without a tick. `ahead` holds the subdirectories predicted to be
 * entered (read early); `dropped` marks a directory the walk will not visit after all (a wrong prediction).
 */
interface Pending {
  rel: string;
  depth: number;
  started?: boolean;
  outcome?: Dirent[] | NodeJS.ErrnoException;
  waiter?: () => void;
  ahead?: Map<string, Pending>;
  /** The listing arrived before its visit and counts in `held`. */
  held?: boolean;
  dropped?: boolean;
}

/** What a walk did. */
export interface WalkSummary {
  /** True when a visit returned "stop". */
  stopped: boolean;
  /** Directories visited (listed and their entries visited). */
  directories: number;
  /** Directory reads started, the visited ones and those read ahead (an early stop or a wrong prediction wastes some). */
  reads: number;
}

/** Walks `root`; resolves with `stopped: true` when a visit returned "stop". Throws the signal's reason on abort. */
export async function walk(options: WalkOptions): Promise<WalkSummary> {
  const { descend, keep, signal } = options;
  // `rel` is already normal (names joined by "/"), so a string join is enough (path.join normalizes again).
  const root = options.root.endsWith(sep) ? options.root : `${options.root}${sep}`;
  const pathOf = (rel: string) => (rel ? root + rel : options.root);
  /** Reads started and not arrived. */
  let inFlight = 0;
  /** Listings arrived ahead of their visit. */
  let held = 0;
  let done = false;
  let directories = 0;
  let reads = 0;
  /**
   * Predicted directories whose read is not started yet, the one to read next last. Each listing pushes its
   * predicted subdirectories (first name on top), so the reads run depth-first ahead of the visits, in nearly the
   * order the visits need them.
   */
  const want: Pending[] = [];
  /** Whether another read may start now. */
  const mayStart = () =>
    inFlight < IN_FLIGHT &&
    inFlight + held < Math.min(READ_AHEAD_MAX, READ_AHEAD_MIN + directories * READ_AHEAD_PER_VISIT);
  const pump = () => {
    while (!done && want.length > 0 && mayStart()) {
      const node = want.pop()!;
      if (!node.started && !node.dropped) start(node);
    }
  };
  /** A predicted directory will not be visited: forget it and what was read ahead beneath it. */
  const drop = (node: Pending) => {
    node.dropped = true;
    if (node.held) {
      node.held = false;
      held--;
    }
    if (node.ahead) for (const child of node.ahead.values()) drop(child);
    node.ahead = undefined;
  };

  /** A listing arrived: filter and sort it, and queue the subdirectories the walk will enter. */
  const arrived = (node: Pending, listing: Dirent[] | NodeJS.ErrnoException): Dirent[] | NodeJS.ErrnoException => {
    if (!Array.isArray(listing) || done) return listing;
    const outcome = keep ? listing.filter(keep) : listing;
    outcome.sort(byName);
    if (descend && !node.dropped) {
      for (let i = outcome.length - 1; i >= 0; i--) {
        const dirent = outcome[i]!;
        if (!dirent.isDirectory()) continue;
        const rel = node.rel ? `${node.rel}/${dirent.name}` : dirent.name;
        if (!descend(rel, dirent.name)) continue;
        const child: Pending = { rel, depth: node.depth + 1 };
        node.ahead ??= new Map();
        node.ahead.set(dirent.name, child);
        want.push(child);
      }
    }
    return outcome;
  };
  const start = (node: Pending) => {
    reads++;
    inFlight++;
    node.started = true;
    readdir(pathOf(node.rel), { withFileTypes: true }, (error, entries) => {
      inFlight--;
      if (done) return;
      try {
        node.outcome = arrived(node, error ?? entries);
      } catch (failure) {
        node.outcome = failure as NodeJS.ErrnoException;
      }
      if (node.waiter) node.waiter();
      else if (!node.dropped) {
        node.held = true;
        held++;
      }
      pump();
    });
  };
  const readNow = (node: Pending): Dirent[] | NodeJS.ErrnoException => {
    reads++;
    node.started = true;
    try {
      return arrived(node, readdirSync(pathOf(node.rel), { withFileTypes: true }));
    } catch (error) {
      return error as NodeJS.ErrnoException;
    }
  };

  const stack: Pending[] = [{ rel: "", depth: 0 }];
  let sliceStart = performance.now();
  /** The directory whose read the walk is waiting for; one abort listener per walk ends that wait. */
  let waitingFor: Pending | undefined;
  const onAbort = () => waitingFor?.waiter?.();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    while (stack.length > 0) {
      const node = stack.pop()!;
      if (performance.now() - sliceStart > 8) {
        await new Promise((r) => setImmediate(r));
        sliceStart = performance.now();
      }
      if (signal?.aborted) throw signal.reason;
      let outcome: Dirent[] | NodeJS.ErrnoException;
      if (node.started) {
        if (node.outcome === undefined) {
          // An abort ends the wait too (a read can hang on a dead network mount): see onAbort.
          waitingFor = node;
          await new Promise<void>((resolve) => {
            node.waiter = resolve;
          });
          waitingFor = undefined;
          if (signal?.aborted) throw signal.reason;
        }
        outcome = node.outcome!;
        if (node.held) {
          node.held = false;
          held--;
        }
      } else {
        outcome = readNow(node);
      }
      if (!Array.isArray(outcome)) {
        options.onError?.(node.rel, outcome);
        continue;
      }
      directories++;
      options.onDirectory?.(node.rel, outcome);
      const children: Pending[] = [];
      for (let i = 0; i < outcome.length; i++) {
        // A wide directory whose visits are slow (a costly match per name) yields too.
        if ((i & 7) === 7 && performance.now() - sliceStart > 8) {
          await new Promise((r) => setImmediate(r));
          sliceStart = performance.now();
          if (signal?.aborted) throw signal.reason;
        }
        const dirent = outcome[i]!;
        const entry = new Entry(node.rel, dirent.name, dirent, node.depth + 1);
        const verdict = options.visit(entry);
        if (verdict === "stop") return { stopped: true, directories, reads };
        const early = dirent.isDirectory() ? node.ahead?.get(dirent.name) : undefined;
        if (verdict === "skip") {
          if (early) drop(early); // read for nothing: a wrong prediction
          continue;
        }
        if (dirent.isDirectory()) children.push(early ?? { rel: entry.rel, depth: node.depth + 1 });
      }
      node.ahead = undefined;
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
      if (descend) pump();
      else {
        // No predictions: read ahead the directories next in line on the stack; the top one is read synchronously
        // if its turn comes first.
        for (let i = stack.length - 2, n = 0; i >= 0 && n < REFILL && mayStart(); i--, n++) {
          if (!stack[i]!.started) start(stack[i]!);
        }
      }
    }
    return { stopped: false, directories, reads };
  } finally {
    done = true;
    signal?.removeEventListener("abort", onAbort);
  }
}
