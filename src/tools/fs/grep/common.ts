/**
 * What grep's two engines share: the plan of one search, the result shapes, the bounded match collector, the file
 * filter of the `glob` argument, the binary probe and the long-line cut. The tool (tools/builtin/grep.ts) states
 * the contract; js-engine.ts and ripgrep-engine.ts implement it.
 */
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

/** Keeps the first `max` matches in (file, line) order while holding at most 2·max. */
export class Collector {
  #items: RawMatch[] = [];
  #dropped = false;
  constructor(readonly max: number) {}
  push(m: RawMatch) {
    this.#items.push(m);
    if (this.#items.length >= this.max * 2) this.#prune();
  }
  #prune() {
    this.#items.sort(compareMatches);
    if (this.#items.length > this.max) {
      this.#items.length = this.max;
      this.#dropped = true;
    }
  }
  finish(): { matches: RawMatch[]; dropped: boolean } {
    this.#prune();
    return { matches: this.#items, dropped: this.#dropped };
  }
}

export function compareMatches(a: RawMatch, b: RawMatch): number {
  if (a.rel !== b.rel) return a.rel < b.rel ? -1 : 1;
  return a.line - b.line;
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
    },
    plan.signal,
  );
}

/** The shared binary probe on a path (sync: a thread-pool round trip per file costs 10x more than the read). */
export function isBinaryFile(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const buf = Buffer.allocUnsafe(BINARY_PROBE_BYTES);
    return isBinaryHead(buf.subarray(0, readSync(fd, buf, 0, BINARY_PROBE_BYTES, 0)));
  } catch {
    return true;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
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
