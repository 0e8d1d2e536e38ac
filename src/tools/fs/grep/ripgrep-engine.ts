/**
 * grep's ripgrep engine: ripgrep walks and scans with the tool's rules expressed as flags; each line it reports is
 * re-tested with the JavaScript RegExp in a worker unless the pattern's translation is exact (regex-translate.ts),
 * so results are exactly the JS semantics. Its output ("path\0line:text", each file's lines together, then the
 * --stats block) is parsed as it streams.
 */

import { isAscii } from "node:buffer";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { readConfig, type ToolhostConfig } from "../../../core/config.js";
import { isLinkedDeniedFile } from "../../../core/path-aliases.js";
import type { RegexWorker } from "../regex-worker.js";
import {
  cutLineBytes,
  type EngineOutcome,
  emptySkipped,
  FileCollector,
  fileFilter,
  type GrepPlan,
  type GrepResult,
  isBinaryFile,
  MAX_MATCH_LINE_CHARS,
  type RawMatch,
  startWorker,
} from "./common.js";

let rgPathCache: string | null | undefined;

/**
 * The ripgrep binary: $TOOLHOST_RG_PATH (from `config`, by default the environment's), else @vscode/ripgrep's, else
 * null. Throws ConfigError when it reads a malformed environment.
 */
export function ripgrepPath(config?: Pick<ToolhostConfig, "ripgrepPath">): string | null {
  if (rgPathCache !== undefined) return rgPathCache;
  const fromEnv = (config ?? readConfig()).ripgrepPath;
  if (fromEnv) {
    rgPathCache = existsSync(fromEnv) ? fromEnv : null;
    return rgPathCache;
  }
  try {
    const require = createRequire(import.meta.url);
    const pkg = `@vscode/ripgrep-${process.platform}-${process.arch}`;
    const bin = require.resolve(`${pkg}/bin/${process.platform === "win32" ? "rg.exe" : "rg"}`);
    rgPathCache = existsSync(bin) ? bin : null;
  } catch {
    rgPathCache = null;
  }
  return rgPathCache;
}

/** ripgrep refused the translated pattern: the caller runs the JS engine instead. */
export class RipgrepUnusable extends Error {}

/**
 * Calls `onLine(bytes, start, end)` for each LF-terminated line of a stream (ripgrep's output): the line is
 * `bytes[start, end)`, LF excluded, never decoded here. Called synchronously per chunk ('data' events: an async
 * iterator costs several times more per chunk, and ripgrep writes a chunk per file); a line spread over several
 * chunks is joined once, so a minified file's long line costs linear time. The callback may keep subarrays of
 * `bytes` (chunks are never reused). Rejects with what `onLine` throws (the stream is then destroyed) or with the
 * stream's error.
 */
function forEachLine(
  stream: NodeJS.ReadableStream & { destroy(error?: Error): void },
  onLine: (bytes: Buffer, start: number, end: number) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let parts: Buffer[] = [];
    let failed = false;
    const fail = (error: unknown) => {
      if (failed) return;
      failed = true;
      stream.removeListener("data", onData);
      stream.destroy();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      try {
        let start = 0;
        for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
          if (parts.length > 0) {
            parts.push(chunk.subarray(start, nl));
            const joined = Buffer.concat(parts);
            parts = [];
            onLine(joined, 0, joined.length);
          } else {
            onLine(chunk, start, nl);
          }
          start = nl + 1;
        }
        if (start < chunk.length) parts.push(chunk.subarray(start));
      } catch (error) {
        fail(error);
      }
    };
    stream.on("data", onData);
    stream.once("error", fail);
    stream.once("end", () => {
      if (failed) return;
      try {
        if (parts.length > 0) {
          const joined = Buffer.concat(parts);
          onLine(joined, 0, joined.length);
        }
        resolve();
      } catch (error) {
        fail(error);
      }
    });
  });
}

/** The --stats block's lines (and the empty line before it). */
const STATS_LINE =
  /^(?:|\d+ (?:matches|matched lines|files contained matches|files searched|bytes printed|bytes searched)|[\d.]+ seconds(?: spent searching| total)?)$/;
/** The line ripgrep prints instead of a file's lines when `--binary` finds a NUL byte in a file with a match. */
const BINARY_MATCH = /^(.*): binary file matches \(found "\\0" byte around offset \d+\)$/s;

/**
 * ripgrep's command line for a search: the tool's rules as flags (text mode, or `--binary` when
 * `ripgrepDetectsBinary`; UTF-8, CRLF, no parent/global ignore files, size and per-file caps, `.git` excluded,
 * dotfiles and .gitignore per the settings) and the `glob` argument as a file type where ripgrep can express it.
 * `postFilter` is the part of the glob applied to what ripgrep reports (path globs), or null.
 */
export function ripgrepArgs(
  plan: GrepPlan,
  rustPattern: string,
  exact: boolean,
  perFileLimit: number,
  ripgrepDetectsBinary = false,
): { args: string[]; postFilter: ((rel: string) => boolean) | null } {
  const args = [
    "--no-heading",
    "--with-filename",
    "--line-number",
    exact ? "--column" : "--no-column",
    "--null",
    "--color",
    "never",
    "--stats",
    // Every core: parsing the output as it streams costs this process a small fraction of ripgrep's work.
    "--threads",
    String(availableParallelism()),
    "--no-config",
    // --binary: ripgrep flags a file with a NUL byte in what it reads (always its first 8 KiB) instead of printing
    // its lines; --text: every file is read as text and grep probes the files with matches itself.
    ripgrepDetectsBinary ? "--binary" : "--text",
    "--encoding",
    "utf-8",
    "--crlf",
    "--no-ignore-parent",
    "--no-ignore-global",
    "--no-ignore-exclude",
    "--no-ignore-dot",
    "--no-require-git",
    "--max-filesize",
    String(plan.maxFileSize),
    "--max-count",
    String(perFileLimit),
    "--glob",
    "!.git",
  ];
  if (!plan.gitignore) args.push("--no-ignore-vcs");
  // A file type selected by the glob (below) overrides ripgrep's hidden-file rule: `--type` with "*" or ".env" would
  // bring dotfiles back. An explicit exclusion keeps them out, as the JS engine does.
  if (plan.dot) args.push("--hidden");
  else args.push("--glob", "!.*");
  const filter = fileFilter(plan.glob);
  let postFilter: ((rel: string) => boolean) | null = null;
  if (plan.glob && plan.glob.trim() !== "") {
    const negated = plan.glob.startsWith("!");
    const body = negated ? plan.glob.slice(1) : plan.glob;
    // A file-name glob becomes a ripgrep file type (types, unlike --glob, never override ignore rules); a path
    // glob is applied to what ripgrep reports.
    if (body.includes("/") || /[:\s]/.test(body)) postFilter = filter;
    else args.push("--type-add", `thsel:${body}`, negated ? "--type-not" : "--type", "thsel");
  }
  args.push("--regexp", rustPattern, "--", plan.rootReal);

  return { args, postFilter };
}

/** A line whose text is final: verified and cut by the worker. */
interface TextHit {
  line: number;
  text: string;
}

/**
 * A byte arena that lines are copied into, so ripgrep's output chunks are garbage as soon as they are parsed
 * (holding subarrays of them kept megabytes of small buffers alive through every collection of a search).
 */
class Arena {
  #buffer: Buffer;
  #used = 0;
  constructor(initial = 64 * 1024) {
    this.#buffer = Buffer.from(new ArrayBuffer(initial));
  }
  get buffer(): Buffer {
    return this.#buffer;
  }
  get used(): number {
    return this.#used;
  }
  /** Copies `source[start, end)` in; returns where it starts in `buffer`. */
  append(source: Buffer, start: number, end: number): number {
    const at = this.#used;
    const length = end - start;
    if (at + length > this.#buffer.length) {
      const grown = Buffer.from(new ArrayBuffer(Math.max(this.#buffer.length * 2, at + length)));
      this.#buffer.copy(grown, 0, 0, at);
      this.#buffer = grown;
    }
    source.copy(this.#buffer, at, start, end);
    this.#used = at + length;
    return at;
  }
}

/**
 * The lines of an exactly translated search, stored flat (no object per line) for the cut text they may become:
 * a line of at most MAX_MATCH_LINE_CHARS bytes whole, a longer ASCII line only as the window cutLineBytes would
 * return (plus its length), any other line whole (cut by cutAtColumn when returned). Decoded only when returned.
 */
class ExactLines {
  readonly #arena = new Arena();
  /** Per line: number, column, arena start, arena end, window start in the line (-1: stored whole), line length. */
  readonly #meta: number[] = [];
  get size(): number {
    return this.#meta.length / 6;
  }
  push(chunk: Buffer, line: number, column: number, start: number, end: number): void {
    const length = end - start;
    let from = -1;
    let to = end;
    if (length > MAX_MATCH_LINE_CHARS && isAscii(chunk.subarray(start, end))) {
      from = Math.max(0, Math.min(column - 1 - 100, length - MAX_MATCH_LINE_CHARS));
      to = start + Math.min(length, from + MAX_MATCH_LINE_CHARS);
    }
    const at = this.#arena.append(chunk, from < 0 ? start : start + from, to);
    this.#meta.push(line, column, at, this.#arena.used, from, length);
  }
  line(k: number): number {
    return this.#meta[6 * k]!;
  }
  /** The line's text as returned: cut around its match like cutLineBytes. */
  cut(k: number): string {
    const m = this.#meta;
    const column = m[6 * k + 1]!;
    const start = m[6 * k + 2]!;
    const end = m[6 * k + 3]!;
    const from = m[6 * k + 4]!;
    const length = m[6 * k + 5]!;
    const buffer = this.#arena.buffer;
    if (from < 0) return cutLineBytes(buffer, start, end, column);
    const to = from + (end - start);
    return `${from > 0 ? `[…${from} chars] ` : ""}${buffer.toString("latin1", start, end)}${to < length ? ` […${length - to} chars]` : ""}`;
  }
}

/** Lines to re-test in the worker, copied into one transferable buffer (see VerifyBatch). */
class CandidateLines {
  readonly #arena = new Arena();
  readonly #lines: number[] = [];
  readonly #ends: number[] = [];
  get size(): number {
    return this.#lines.length;
  }
  push(chunk: Buffer, line: number, _column: number, start: number, end: number): void {
    this.#arena.append(chunk, start, end);
    this.#lines.push(line);
    this.#ends.push(this.#arena.used);
  }
  line(k: number): number {
    return this.#lines[k]!;
  }
  /** The bytes (its buffer, handed over: the store is not used afterwards) and where each line ends in them. */
  packed(): { bytes: ArrayBuffer; ends: number[] } {
    return { bytes: this.#arena.buffer.buffer as ArrayBuffer, ends: this.#ends };
  }
}

/** The file whose lines are being read: `first` indexes its first stored line, -1 when none are stored. */
interface ReportedFile {
  rel: string;
  count: number;
  first: number;
}

/**
 * The ripgrep engine for a directory search. Throws RipgrepUnusable when ripgrep rejects the translated pattern, or
 * prints a line this parser cannot attribute to a file inside the root (a file name holding a line break); the
 * caller then runs the JS engine.
 *
 * ripgrep's output is parsed as bytes while it streams: a file's path is decoded once, line numbers and columns are
 * read from the digits, and a line's bytes are copied out (ExactLines, CandidateLines). With an exact translation
 * nothing is re-tested, so a line is decoded (and cut around its match) only when it is among the lines returned;
 * a file that sorts after every file already holding maxResults lines only has its lines counted. Otherwise the
 * lines go to the worker as bytes (one transferred buffer per batch of files, in ripgrep's output order), where
 * they are decoded and re-tested, and the worker probes each file with a verified line. Results are grouped and
 * sorted by file (FileCollector), never match by match.
 *
 * Binary files: grep's rule is a NUL byte in the first 8 KiB. When the pattern is exact and `nulFree`, ripgrep runs
 * with `--binary`: a file in which it meets no NUL byte is searched exactly as with `--text` (and it always reads
 * the first 8 KiB of a file it searches), while a file with a NUL byte and a match is reported as one "binary file
 * matches" line. Such files (rare) are searched again here with the JS engine's exact rules: probed, and read as
 * text when the NUL lies past the first 8 KiB; a binary one counts in `skipped.binary` when it has a match. A
 * NUL-free pattern finds every match of the original lines in ripgrep's NUL-split lines, so no file with a match
 * goes unreported. Otherwise ripgrep runs with `--text` and each file with a match gets the shared probe.
 */
export async function searchWithRipgrep(
  plan: GrepPlan,
  rg: string,
  rustPattern: string,
  exact = false,
  nulFree = false,
): Promise<EngineOutcome> {
  const skipped: GrepResult["skipped"] = { ...emptySkipped(), tooLarge: null };
  const mLimit = plan.maxPerFile + 1;
  const ripgrepDetectsBinary = exact && nulFree;
  const { args, postFilter } = ripgrepArgs(plan, rustPattern, exact, mLimit, ripgrepDetectsBinary);

  const child = spawn(rg, args, { stdio: ["ignore", "pipe", "pipe"] });
  const onAbort = () => child.kill("SIGKILL");
  plan.signal.addEventListener("abort", onAbort, { once: true });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    if (stderr.length < 4096) stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  let filesSearched = 0;
  let filesWithMatches = 0;
  let perFileCut = false;
  // Payload: the index of an exact file's first stored line, or the verified lines of a re-tested one.
  const hits = new FileCollector<number | TextHit[]>(plan.maxResults);
  const reported = new ExactLines();
  const recheck: string[] = [];
  let current: ReportedFile | null = null;
  let started: RegexWorker | null = null;
  const worker = () => {
    started ??= startWorker(plan);
    return started;
  };
  // Verification runs in the worker, file by file, in ripgrep's output order.
  let chain: Promise<void> = Promise.resolve();
  const prefix = plan.rootReal.endsWith("/") ? plan.rootReal : `${plan.rootReal}/`;

  // Re-tested lines go to the worker as bytes, a batch of files at a time: `batchLines` holds the lines of the
  // files in `batch` (each file's lines from `first`, `count` of them), then a fresh store takes the next batch.
  type Candidates = { rel: string; first: number; count: number };
  let batch: Candidates[] = [];
  let batchLines = new CandidateLines();
  const flush = () => {
    if (batch.length === 0) return;
    const files = batch;
    const lines = batchLines;
    batch = [];
    batchLines = new CandidateLines();
    const { bytes, ends } = lines.packed();
    const verdicts = worker().verifyFiles({
      paths: files.map((f) => join(plan.rootReal, f.rel)),
      counts: files.map((f) => f.count),
      ends,
      bytes,
    });
    verdicts.catch(() => {});
    chain = chain.then(async () => {
      const results = await verdicts;
      files.forEach((file, i) => {
        const { binary, texts } = results[i]!;
        const verified: { line: number; text: string }[] = [];
        texts.forEach((text, k) => {
          if (text !== null) verified.push({ line: lines.line(file.first + k), text });
        });
        if (file.count >= mLimit && verified.length <= plan.maxPerFile) {
          recheck.push(file.rel); // verification dropped lines at ripgrep's per-file limit: recount exactly
          return;
        }
        if (verified.length === 0) return;
        if (binary) {
          skipped.binary++;
          return;
        }
        filesWithMatches++;
        if (verified.length > plan.maxPerFile) perFileCut = true;
        hits.add(file.rel, Math.min(verified.length, plan.maxPerFile), verified);
      });
    });
    // A search that fails midway (ripgrep unusable, cancelled) terminates the worker without awaiting the chain.
    chain.catch(() => {});
  };
  const finishFile = () => {
    const file = current;
    current = null;
    if (!file || file.count === 0) return;
    if (exact) {
      // An exact translation needs no re-test: only the binary probe, done here unless ripgrep detects binary files.
      if (!ripgrepDetectsBinary && isBinaryFile(join(plan.rootReal, file.rel))) {
        skipped.binary++;
        return;
      }
      filesWithMatches++;
      if (file.count > plan.maxPerFile) perFileCut = true;
      if (file.first >= 0) hits.add(file.rel, Math.min(file.count, plan.maxPerFile), file.first);
      else hits.markDropped();
      return;
    }
    batch.push({ rel: file.rel, first: file.first, count: file.count });
    if (batchLines.size >= 2000) flush();
  };

  // Output lines are "path\0line:text" ("path\0line:column:text" when exact), each file's lines contiguous, then
  // the --stats block (lines without a NUL).
  // A line that fits none of these shapes (a file name with a line break splits its record) makes the whole
  // search fall back to the JS engine rather than attribute text to the wrong file.
  // The current file's path as bytes of the chunk it came in (compared against each line's, decoded once).
  let pathBytes: Buffer | null = null;
  let pathStart = 0;
  let pathEnd = 0;
  const finished = new Set<string>();
  const flagged: string[] = [];
  // A reported file that is a denied or protected file under another name (a hard link) counts as denied.
  const aliases = new Set(plan.deniedFiles);
  const isAlias = (rel: string) => isLinkedDeniedFile(aliases, join(plan.rootReal, rel));
  const relOf = (path: string): string => {
    if (!path.startsWith(prefix)) throw new RipgrepUnusable(`ripgrep printed a path outside the root: ${path}`);
    return path.slice(prefix.length);
  };
  const handle = (bytes: Buffer, start: number, end: number) => {
    const nul = bytes.indexOf(0, start);
    if (nul < 0 || nul >= end) {
      const text = bytes.toString("utf8", start, end);
      const binary = ripgrepDetectsBinary ? BINARY_MATCH.exec(text) : null;
      if (binary) {
        const rel = relOf(binary[1]!);
        if (current?.rel === rel)
          current = null; // lines printed before the NUL byte was met: searched again
        else if (finished.has(rel)) throw new RipgrepUnusable(`ripgrep's output for ${rel} is not contiguous`);
        finished.add(rel);
        if (!plan.excluded(rel) && !isAlias(rel) && (!postFilter || postFilter(rel))) flagged.push(rel);
        return;
      }
      if (!STATS_LINE.test(text)) throw new RipgrepUnusable(`unexpected ripgrep output: ${text.slice(0, 200)}`);
      const stat = /^(\d+) files searched$/.exec(text);
      if (stat) filesSearched = Number(stat[1]);
      return;
    }
    if (
      pathBytes === null ||
      pathEnd - pathStart !== nul - start ||
      bytes.compare(pathBytes, pathStart, pathEnd, start, nul) !== 0
    ) {
      finishFile();
      pathBytes = bytes;
      pathStart = start;
      pathEnd = nul;
      const rel = relOf(bytes.toString("utf8", start, nul));
      if (finished.has(rel)) throw new RipgrepUnusable(`ripgrep's output for ${rel} is not contiguous`);
      finished.add(rel);
      const denied = plan.excluded(rel) || isAlias(rel);
      if (denied) skipped.denied++;
      current =
        denied || (postFilter && !postFilter(rel))
          ? null
          : { rel, count: 0, first: !exact ? batchLines.size : hits.wants(rel) ? reported.size : -1 };
    }
    if (!current) return;
    let i = nul + 1;
    let line = 0;
    for (let c = bytes[i]!; i < end && c >= 48 && c <= 57; c = bytes[++i]!) line = line * 10 + c - 48;
    if (i >= end || bytes[i] !== 58) return;
    i++;
    let column = 1;
    if (exact) {
      column = 0;
      for (let c = bytes[i]!; i < end && c >= 48 && c <= 57; c = bytes[++i]!) column = column * 10 + c - 48;
      if (i >= end || bytes[i] !== 58) return;
      i++;
    }
    // Exact: only the lines that can be returned are stored (ripgrep's extra line just says the cap was hit).
    if (current.first >= 0 && (!exact || current.count < plan.maxPerFile)) {
      (exact ? reported : batchLines).push(bytes, line, column, i, end > i && bytes[end - 1] === 13 ? end - 1 : end);
    }
    current.count++;
  };

  try {
    try {
      await forEachLine(child.stdout, handle);
      finishFile();
      flush();
    } finally {
      plan.signal.removeEventListener("abort", onAbort);
    }
    const code = await exited;
    if (plan.signal.aborted) throw plan.signal.reason;
    if (code === 2 && filesSearched === 0 && /regex|pattern|syntax|size limit|glob/i.test(stderr)) {
      throw new RipgrepUnusable(stderr);
    }
    if (code === 2) skipped.unreadable += (stderr.match(/\n/g) ?? []).length;
    await chain;
    if (flagged.length > 0) {
      const outcomes = await worker().searchFiles(
        flagged.map((rel) => join(plan.rootReal, rel)),
        { binaryAsText: true },
      );
      outcomes.forEach((outcome, k) => {
        const rel = flagged[k]!;
        if (outcome.kind !== "searched") {
          skipped[outcome.kind] = (skipped[outcome.kind] ?? 0) + 1;
          return;
        }
        if (outcome.lines.length === 0) return;
        if (isBinaryFile(join(plan.rootReal, rel))) {
          skipped.binary++;
          return;
        }
        filesWithMatches++;
        if (outcome.more) perFileCut = true;
        hits.add(rel, outcome.lines.length, outcome.lines);
      });
    }
    if (recheck.length > 0) {
      const outcomes = await worker().searchFiles(recheck.map((rel) => join(plan.rootReal, rel)));
      outcomes.forEach((outcome, k) => {
        const rel = recheck[k]!;
        if (outcome.kind !== "searched") {
          skipped[outcome.kind] = (skipped[outcome.kind] ?? 0) + 1;
          return;
        }
        if (outcome.lines.length === 0) return;
        filesWithMatches++;
        if (outcome.more) perFileCut = true;
        hits.add(rel, outcome.lines.length, outcome.lines);
      });
    }
  } catch (error) {
    if (plan.signal.aborted) throw plan.signal.reason;
    throw error;
  } finally {
    (started as RegexWorker | null)?.release();
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  const { files, dropped } = hits.finish();
  const matches: RawMatch[] = [];
  for (const f of files) {
    const p = f.payload;
    for (let k = 0; k < f.count; k++) {
      if (typeof p === "number") matches.push({ rel: f.rel, line: reported.line(p + k), text: reported.cut(p + k) });
      else matches.push({ rel: f.rel, line: p[k]!.line, text: p[k]!.text });
    }
  }
  return { matches, truncated: dropped || perFileCut, filesSearched, filesWithMatches, skipped };
}
