/**
 * A deterministic directory walker for glob and grep's JS engine: pre-order depth-first, entries of each
 * directory in code-unit name order, symlinks reported but never followed (so a symlink cycle cannot loop),
 * stoppable at any entry (the walk ends when a cap is reached), and cancellable through an AbortSignal.
 *
 * Directories are read with readdirSync in slices, yielding to the event loop every few milliseconds, which is
 * both the fastest way to list directories in Node and keeps a long walk from starving other work.
 */
import { type Dirent, readdirSync } from "node:fs";
import { join } from "node:path";

/** One entry met by the walk. */
export interface WalkEntry {
  /** Path relative to the walk root, `/`-separated. */
  rel: string;
  name: string;
  dirent: Dirent;
  /** 1 for the root's children. */
  depth: number;
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
  /** Called with a directory's entries (already sorted) before they are visited; `rel` is "" for the root. */
  onDirectory?(rel: string, entries: Dirent[]): void;
  /** Called for a directory that cannot be read (permissions, vanished). */
  onError?(rel: string, error: NodeJS.ErrnoException): void;
}

const byName = (a: Dirent, b: Dirent) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** Walks `root`; resolves with `stopped: true` when a visit returned "stop". Throws the signal's reason on abort. */
export async function walk(options: WalkOptions): Promise<{ stopped: boolean; directories: number }> {
  const stack: { rel: string; depth: number }[] = [{ rel: "", depth: 0 }];
  let directories = 0;
  let sliceStart = performance.now();
  while (stack.length > 0) {
    const { rel, depth } = stack.pop()!;
    if (performance.now() - sliceStart > 8) {
      await new Promise((r) => setImmediate(r));
      sliceStart = performance.now();
    }
    if (options.signal?.aborted) throw options.signal.reason;
    let entries: Dirent[];
    try {
      entries = readdirSync(rel ? join(options.root, rel) : options.root, { withFileTypes: true });
    } catch (error) {
      options.onError?.(rel, error as NodeJS.ErrnoException);
      continue;
    }
    directories++;
    entries.sort(byName);
    options.onDirectory?.(rel, entries);
    const children: { rel: string; depth: number }[] = [];
    for (const dirent of entries) {
      const childRel = rel ? `${rel}/${dirent.name}` : dirent.name;
      const verdict = options.visit({ rel: childRel, name: dirent.name, dirent, depth: depth + 1 });
      if (verdict === "stop") return { stopped: true, directories };
      if (verdict === "skip") continue;
      if (dirent.isDirectory()) children.push({ rel: childRel, depth: depth + 1 });
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return { stopped: false, directories };
}
