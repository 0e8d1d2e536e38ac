/**
 * A deterministic directory walker for glob and grep's JS engine: pre-order depth-first, entries of each
 * directory in code-unit name order, symlinks reported but never followed (so a symlink cycle cannot loop),
 * stoppable at any entry (the walk ends when a cap is reached), and cancellable through an AbortSignal.
 *
 * Reading directories is most of a walk's cost, and most of that is the kernel's (getdents), so directories are
 * read ahead on the libuv thread pool while the visits stay in the order of a sequential walk:
 * - With `descend` (a pure prediction of which subdirectories the walk will enter), a directory's subdirectories
 *   are read as soon as its own listing arrives, up to READ_AHEAD reads started but not yet visited. The visits
 *   then rarely wait, and the kernel work runs on every core.
 * - Without it, the next READ_AHEAD directories on the stack (those the visits accepted) are read ahead, and the
 *   directory about to be visited is read synchronously when its read was not started (the cheapest call).
 * A directory is read once: a visit awaits the read started ahead. A walk that stops early leaves those reads to
 * finish unobserved (their outcome is a value, never a rejection). The walk yields to the event loop every few
 * milliseconds, so a long walk never starves other work.
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

/** Most directory reads started ahead of their visit. */
const READ_AHEAD = 256;
/** How far down the stack a visited directory looks for reads to start. */
const REFILL = 32;
/**
 * Subdirectories of an arriving listing read at once (its first ones in walk order): a depth-first walk needs the
 * first child next, and the first child's first child after that; the rest are started from the stack as the walk
 * comes near them, so wide directories do not use up the budget.
 */
const FIRST_CHILDREN = 4;

/**
 * A directory to visit. `started` is set once its read was started ahead; `outcome` holds the listing (or the
 * error) once it arrived, and `waiter` is the visit waiting for it. No promise per read: most reads have arrived
 * by the time their visit comes, and then the visit continues without a tick. `ahead` holds the subdirectories
 * read early.
 */
interface Pending {
  rel: string;
  depth: number;
  started?: boolean;
  outcome?: Dirent[] | NodeJS.ErrnoException;
  waiter?: () => void;
  ahead?: Map<string, Pending>;
}

/** Walks `root`; resolves with `stopped: true` when a visit returned "stop". Throws the signal's reason on abort. */
export async function walk(options: WalkOptions): Promise<{ stopped: boolean; directories: number }> {
  const { descend, keep, signal } = options;
  // `rel` is already normal (names joined by "/"), so a string join is enough (path.join normalizes again).
  const root = options.root.endsWith(sep) ? options.root : `${options.root}${sep}`;
  const pathOf = (rel: string) => (rel ? root + rel : options.root);
  let outstanding = 0;
  let done = false;

  /** A listing arrived: sort it, and start reading the subdirectories the walk will enter (budget permitting). */
  const arrived = (node: Pending, listing: Dirent[] | NodeJS.ErrnoException): Dirent[] | NodeJS.ErrnoException => {
    if (!Array.isArray(listing) || done) return listing;
    const outcome = keep ? listing.filter(keep) : listing;
    outcome.sort(byName);
    if (descend) {
      let started = 0;
      for (const dirent of outcome) {
        if (outstanding >= READ_AHEAD || started >= FIRST_CHILDREN) break;
        if (!dirent.isDirectory()) continue;
        const rel = node.rel ? `${node.rel}/${dirent.name}` : dirent.name;
        if (!descend(rel, dirent.name)) continue;
        const child: Pending = { rel, depth: node.depth + 1 };
        start(child);
        started++;
        node.ahead ??= new Map();
        node.ahead.set(dirent.name, child);
      }
    }
    return outcome;
  };
  const start = (node: Pending) => {
    outstanding++;
    node.started = true;
    readdir(pathOf(node.rel), { withFileTypes: true }, (error, entries) => {
      try {
        node.outcome = arrived(node, error ?? entries);
      } catch (failure) {
        node.outcome = failure as NodeJS.ErrnoException;
      }
      node.waiter?.();
    });
  };
  const readNow = (node: Pending): Dirent[] | NodeJS.ErrnoException => {
    try {
      return arrived(node, readdirSync(pathOf(node.rel), { withFileTypes: true }));
    } catch (error) {
      return error as NodeJS.ErrnoException;
    }
  };

  const stack: Pending[] = [{ rel: "", depth: 0 }];
  let directories = 0;
  let sliceStart = performance.now();
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
          // An abort ends the wait too (a read can hang on a dead network mount).
          await new Promise<void>((resolve) => {
            const onAbort = () => resolve();
            signal?.addEventListener("abort", onAbort, { once: true });
            node.waiter = () => {
              signal?.removeEventListener("abort", onAbort);
              resolve();
            };
          });
          if (signal?.aborted) throw signal.reason;
        }
        outcome = node.outcome!;
        outstanding--;
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
      for (const dirent of outcome) {
        const entry = new Entry(node.rel, dirent.name, dirent, node.depth + 1);
        const verdict = options.visit(entry);
        if (verdict === "stop") return { stopped: true, directories };
        const early = dirent.isDirectory() ? node.ahead?.get(dirent.name) : undefined;
        if (verdict === "skip") {
          if (early) outstanding--; // read for nothing: a wrong prediction
          continue;
        }
        if (dirent.isDirectory()) children.push(early ?? { rel: entry.rel, depth: node.depth + 1 });
      }
      node.ahead = undefined;
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
      // Read ahead the directories next in line; the top one is read synchronously if its turn comes first.
      for (let i = stack.length - 2, n = 0; i >= 0 && n < REFILL && outstanding < READ_AHEAD; i--, n++) {
        if (!stack[i]!.started) start(stack[i]!);
      }
    }
    return { stopped: false, directories };
  } finally {
    done = true;
  }
}
