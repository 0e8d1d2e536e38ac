/**
 * What grep's two engines share: the plan of one search, the result shapes, the bounded match collector, the file
 * filter of the `glob` argument, the binary probe and the long-line cut. The tool (tools/builtin/grep.ts) states
 * the contract; js-engine.ts and ripgrep-engine.ts implement it.
 */

import { isAscii } from "node:buffer";
import { closeSync, constants, openSync, readSync } from "node:fs";
import { basename } from "node:path";
import picomatch from "picomatch";
import type { EffectivePathPolicy } from "../../../core/path-policy.js";
import { BINARY_PROBE_BYTES, isBinaryHead } from "../../../core/text-probe.js";
import { RegexWorker } from "../regex-worker.js";

/** A matched line longer than this (UTF-16 code units) is cut around the match. */
export const MAX_MATCH_LINE_CHARS = 500;

/** One grep match. */
export interface GrepMatch {
  file: string;
  line: number;
  text: string;
}

/** Result of grep. */
export interface GrepResult {
  pattern: string;
  /** The searched path as given. */
  path: string;
  matches: GrepMatch[];
  truncated: boolean;
  engine: "ripgrep" | "js";
  filesSearched: number;
  filesWithMatches: number;
  /** Files left out and why; `tooLarge` is null when the engine cannot count them (ripgrep skips silently). */
  skipped: { binary: number; tooLarge: number | null; unreadable: number; denied: number };
  /** What rules left files out of a directory search, and what caps cut; so "no match" is never "not searched". */
  notes: string[];
}

/** The resolved, validated inputs of one search. */
export interface GrepPlan {
  pattern: string;
  regex: RegExp;
  ignoreCase: boolean;
  rootAbs: string;
  rootReal: string;
  isFile: boolean;
  glob?: string;
  maxResults: number;
  maxPerFile: number;
  maxFileSize: number;
  dot: boolean;
  gitignore: boolean;
  policy: EffectivePathPolicy;
  /** Whether an entry (path relative to the root) is denied or protected; decided once for the root (walkExclusion). */
  excluded: (rel: string) => boolean;
  /** Identities of the denied and protected files that have other names (linkedDeniedFiles), found at the start. */
  deniedFiles: string[];
  signal: AbortSignal;
}

export interface RawMatch {
  rel: string;
  line: number;
  text: string;
}

/** What an engine found: matches relative to the root (bounded), counts, and whether a cap cut anything. */
export interface EngineOutcome {
  matches: RawMatch[];
  truncated: boolean;
  filesSearched: number;
  filesWithMatches: number;
  skipped: GrepResult["skipped"];
}

/** One file's matches as collected: `count` lines (in line order) described by `payload`. */
export interface CollectedFile<T> {
  rel: string;
  count: number;
  payload: T;
}

/**
 * Keeps the matches that can be among the first `max` in (file, line) order, file by file, while holding a bounded
 * number of them: each file's lines arrive together and in line order (both engines search a file at once), so
 * only files are sorted, never single matches. A file is added as its path, its number of lines and a payload
 * from which the caller materializes them (an array of lines, or an index into the caller's own storage). When the
 * held lines reach 2·max, the files are sorted by path and those past the first `max` lines are dropped; from then
 * on a file sorting after the last one kept is dropped on arrival (`wants` tells the caller beforehand, so it need
 * not even store that file's lines). Paths compare by UTF-16 code units (`<`), the order grep documents.
 */
export class FileCollector<T> {
  #files: CollectedFile<T>[] = [];
  #held = 0;
  /** Files sorting after this path cannot be among the first `max` lines (set once `max` lines are held). */
  #cutoff: string | null = null;
  #dropped = false;
  constructor(readonly max: number) {}

  /** Whether a file at `rel` could still contribute (false: it sorts after `max` lines already held). */
  wants(rel: string): boolean {
    return this.#cutoff === null || rel <= this.#cutoff;
  }

  /** Records that a file was left out without being added (it could not contribute; see wants). */
  markDropped(): void {
    this.#dropped = true;
  }

  /** Adds one file with `count` lines (at most the per-file cap); a file that cannot contribute is dropped. */
  add(rel: string, count: number, payload: T): void {
    if (count === 0) return;
    if (!this.wants(rel)) {
      this.#dropped = true;
      return;
    }
    this.#files.push({ rel, count, payload });
    this.#held += count;
    if (this.#held >= this.max * 2) this.#prune();
  }

  #prune(): void {
    this.#files.sort(compareFiles);
    let held = 0;
    let keep = 0;
    while (keep < this.#files.length && held < this.max) held += this.#files[keep++]!.count;
    if (keep < this.#files.length) this.#dropped = true;
    this.#files.length = keep;
    this.#held = held;
    if (held >= this.max) this.#cutoff = this.#files[keep - 1]!.rel;
  }

  /**
   * The files holding the first `max` lines in (file, line) order, sorted by path; the last one's `count` is
   * lowered when only its first lines fit. `dropped` says whether anything was left out.
   */
  finish(): { files: CollectedFile<T>[]; dropped: boolean } {
    this.#prune();
    let room = this.max;
    for (const file of this.#files) {
      if (file.count > room) {
        file.count = room;
        this.#dropped = true;
      }
      room -= file.count;
    }
    return { files: this.#files, dropped: this.#dropped };
  }
}

function compareFiles(a: { rel: string }, b: { rel: string }): number {
  return a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0;
}

/** Flattens collected files whose payload is their lines into matches (rel, line, text), in order. */
export function flattenHits(files: CollectedFile<{ line: number; text: string }[]>[]): RawMatch[] {
  const out: RawMatch[] = [];
  for (const f of files) {
    for (let k = 0; k < f.count; k++) out.push({ rel: f.rel, line: f.payload[k]!.line, text: f.payload[k]!.text });
  }
  return out;
}

/** A file-name / path filter from the `glob` argument (null: every file). */
export function fileFilter(glob: string | undefined): ((rel: string) => boolean) | null {
  if (glob === undefined || glob.trim() === "") return null;
  const negated = glob.startsWith("!");
  const body = negated ? glob.slice(1) : glob;
  const byPath = body.includes("/");
  const m = picomatch(body.replace(/^\.\//, ""), { dot: true });
  return (rel: string) => m(byPath ? rel : basename(rel)) !== negated;
}

export function emptySkipped(): GrepResult["skipped"] {
  return { binary: 0, tooLarge: 0, unreadable: 0, denied: 0 };
}

/** Starts the worker that evaluates the JS RegExp for one search (see regex-worker.ts). */
export function startWorker(plan: GrepPlan): RegexWorker {
  return new RegexWorker(
    {
      pattern: plan.pattern,
      flags: plan.ignoreCase ? "i" : "",
      maxPerFile: plan.maxPerFile,
      maxFileSize: plan.maxFileSize,
      maxLineChars: MAX_MATCH_LINE_CHARS,
      deniedFiles: plan.deniedFiles,
    },
    plan.signal,
  );
}

const probeBuffer = Buffer.allocUnsafe(BINARY_PROBE_BYTES);

/**
 * The shared binary probe on a path: one open, one read of the first BINARY_PROBE_BYTES into a buffer reused by
 * every call, one close. Synchronous on purpose: a thread-pool round trip per file costs several times the read
 * (the files were just read by ripgrep, so the page cache answers). An unreadable file counts as binary.
 */
export function isBinaryFile(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    return isBinaryHead(probeBuffer.subarray(0, readSync(fd, probeBuffer, 0, BINARY_PROBE_BYTES, 0)));
  } catch {
    return true;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * cutAtColumn on a line given as UTF-8 bytes `buf[start, end)` (as ripgrep prints it), decoding only what is
 * returned when the line is ASCII (then bytes and UTF-16 code units coincide); any other long line is decoded
 * whole and cut by cutAtColumn. Invalid UTF-8 decodes to U+FFFD either way.
 */
export function cutLineBytes(buf: Buffer, start: number, end: number, column: number): string {
  const length = end - start;
  if (length <= MAX_MATCH_LINE_CHARS) return buf.toString("utf8", start, end);
  if (!isAscii(buf.subarray(start, end))) return cutAtColumn(buf.toString("utf8", start, end), column);
  const from = Math.max(0, Math.min(column - 1 - 100, length - MAX_MATCH_LINE_CHARS));
  const to = Math.min(length, from + MAX_MATCH_LINE_CHARS);
  return `${from > 0 ? `[…${from} chars] ` : ""}${buf.toString("latin1", start + from, start + to)}${to < length ? ` […${length - to} chars]` : ""}`;
}

/**
 * Cuts a long line around a match that starts at 1-based UTF-8 byte `column` (ripgrep's --column), with the same
 * markers as the worker's cut (a window of MAX_MATCH_LINE_CHARS starting 100 characters before the match).
 */
export function cutAtColumn(line: string, column: number): string {
  if (line.length <= MAX_MATCH_LINE_CHARS) return line;
  const at = Buffer.from(line, "utf8")
    .subarray(0, Math.max(0, column - 1))
    .toString("utf8").length;
  const start = Math.max(0, Math.min(at - 100, line.length - MAX_MATCH_LINE_CHARS));
  const end = Math.min(line.length, start + MAX_MATCH_LINE_CHARS);
  return `${start > 0 ? `[…${start} chars] ` : ""}${line.slice(start, end)}${end < line.length ? ` […${line.length - end} chars]` : ""}`;
}
