/**
 * grep (000_6d817c25d4590fa9.txt, "Built-in Tools" → grep; issue 4): lines matching a JavaScript regular
 * expression in a file or a directory tree.
 *
 * Semantics (both engines):
 * - The pattern is compiled with `new RegExp(pattern, caseInsensitive ? "i" : "")`; an invalid one is a
 *   GrepPatternError (validation_failed).
 * - Lines split on LF with one trailing CR removed (`^foo$` matches `foo\r\n`); BOM-marked UTF-8/UTF-16 decoded,
 *   invalid UTF-8 read as U+FFFD (text-probe.ts).
 * - A file with a NUL byte in its first 8 KiB is binary and skipped (the probe shared with read_file); a file
 *   above maxFileSizeBytes is skipped.
 * - Directory searches skip `.git`, names starting with "." (unless includeDotfiles), files ignored by
 *   `.gitignore` files inside the searched directory (unless respectGitignore is false), symbolic links (never
 *   followed), and entries covered by deniedPaths. `glob` filters files: without "/" it matches the file name at
 *   any depth (`*.ts`), with "/" the path relative to the searched directory (`src/**\/*.ts`); a leading "!"
 *   excludes.
 * - At most maxMatchesPerFile matches per file and maxResults in all, sorted by file then line; `truncated` says
 *   a cap cut the result. A matched line longer than 500 characters is cut around the match with markers.
 * - matches[].file is relative to the chat working directory (absolute when none is bound or outside it).
 *
 * Engines: ripgrep (@vscode/ripgrep) walks and scans when the pattern translates to a Rust regex matching a
 * superset of the JS pattern's lines (regex-translate.ts); every line it reports is re-tested with the JS RegExp,
 * so results are exactly the JS semantics. Otherwise, or without a ripgrep binary, a JS engine with the same rules
 * runs. The result says which engine ran, how many files were searched, which were skipped and why.
 */
import { spawn } from "node:child_process";
import { closeSync, constants, existsSync, openSync, readSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { basename, join } from "node:path";
import ignore from "ignore";
import picomatch from "picomatch";
import { ToolArgumentError } from "../../core/errors.js";
import {
  type EffectivePathPolicy,
  effectivePathPolicy,
  hasExclusionsWithin,
  isExcludedEntry,
  PATH_POLICY_DESCRIPTORS,
  resolveAndValidatePath,
  toResultPath,
} from "../../core/path-policy.js";
import { registerTool } from "../../core/registry.js";
import { booleanSetting, defineTool, integerSetting, stringSetting } from "../../core/settings-declaration.js";
import { BINARY_PROBE_BYTES, isBinaryHead } from "../../core/text-probe.js";
import type { RegisteredTool, ToolContext, ToolParameterDescriptor } from "../../core/types.js";
import { translateJsRegex } from "../fs/regex-translate.js";
import { RegexWorker, type WorkerFileOutcome } from "../fs/regex-worker.js";
import { walk } from "../fs/walk.js";

/** An invalid grep pattern (code validation_failed): the message carries the RegExp engine's reason. */
export class GrepPatternError extends ToolArgumentError {
  constructor(pattern: string, reason: string) {
    super(
      `Invalid regular expression ${JSON.stringify(pattern)}: ${reason}. grep takes a JavaScript regular expression; escape special characters such as ( [ { . * + ? with a backslash to match them literally.`,
      { argument: "pattern", rule: "invalid_regex" },
    );
  }
}

/** A matched line longer than this (UTF-16 code units) is cut around the match. */
export const MAX_MATCH_LINE_CHARS = 500;

const D = {
  maxResults: {
    name: "maxResults",
    type: "integer",
    description: "Most matches returned by one call.",
    min: 1,
    max: 5000,
    default: 100,
  },
  maxMatchesPerFile: {
    name: "maxMatchesPerFile",
    type: "integer",
    description: "Most matches returned from one file.",
    min: 1,
    max: 5000,
    default: 20,
  },
  maxFileSizeBytes: {
    name: "maxFileSizeBytes",
    type: "integer",
    description: "Files larger than this are skipped.",
    min: 1,
    max: 100 * 1024 * 1024,
    default: 1_000_000,
    unit: "bytes",
  },
  includeDotfiles: {
    name: "includeDotfiles",
    type: "boolean",
    description: "Search files and directories whose names start with a dot (.git is never searched).",
    default: false,
  },
  respectGitignore: {
    name: "respectGitignore",
    type: "boolean",
    description: "Skip files ignored by .gitignore files inside the searched directory.",
    default: true,
  },
  engine: {
    name: "engine",
    type: "string",
    description:
      'Search engine: "auto" (ripgrep where it can express the pattern exactly, else JS), "ripgrep" or "js".',
    allowedValues: ["auto", "ripgrep", "js"],
    default: "auto",
  },
} satisfies Record<string, ToolParameterDescriptor>;

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
  signal: AbortSignal;
}

interface RawMatch {
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
class Collector {
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

function compareMatches(a: RawMatch, b: RawMatch): number {
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

function emptySkipped(): GrepResult["skipped"] {
  return { binary: 0, tooLarge: 0, unreadable: 0, denied: 0 };
}

/** Starts the worker that evaluates the JS RegExp for one search (see regex-worker.ts). */
function startWorker(plan: GrepPlan): RegexWorker {
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
function isBinaryFile(path: string): boolean {
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

/** Files sent to the worker per request. */
const FILE_BATCH = 64;

/** The JS engine: walks with the shared rules and searches files with a small concurrency pool. */
export async function searchWithJs(plan: GrepPlan, existing?: RegexWorker): Promise<EngineOutcome> {
  const skipped = emptySkipped();
  const collector = new Collector(plan.maxResults);
  let filesSearched = 0;
  let filesWithMatches = 0;
  let perFileCut = false;
  const record = (rel: string, outcome: WorkerFileOutcome) => {
    if (outcome.kind !== "searched") {
      skipped[outcome.kind]++;
      return;
    }
    filesSearched++;
    if (outcome.lines.length > 0) filesWithMatches++;
    if (outcome.more) perFileCut = true;
    for (const l of outcome.lines) collector.push({ rel, line: l.line, text: l.text });
  };
  const worker = existing ?? startWorker(plan);
  try {
    if (plan.isFile) {
      const [outcome] = await worker.searchFiles([plan.rootReal]);
      record("", outcome!);
    } else {
      const candidates = await listCandidates(plan, skipped);
      const batches: Promise<WorkerFileOutcome[]>[] = [];
      for (let i = 0; i < candidates.length; i += FILE_BATCH) {
        batches.push(worker.searchFiles(candidates.slice(i, i + FILE_BATCH).map((rel) => join(plan.rootReal, rel))));
      }
      for (let b = 0; b < batches.length; b++) {
        const outcomes = await batches[b]!;
        outcomes.forEach((o, k) => {
          record(candidates[b * FILE_BATCH + k]!, o);
        });
      }
    }
  } catch (error) {
    if (plan.signal.aborted) throw plan.signal.reason;
    throw error;
  } finally {
    if (!existing) worker.terminate();
  }
  const { matches, dropped } = collector.finish();
  return { matches, truncated: dropped || perFileCut, filesSearched, filesWithMatches, skipped };
}

/** Lists the files a directory search covers (JS engine), applying every exclusion rule. */
async function listCandidates(plan: GrepPlan, skipped: GrepResult["skipped"]): Promise<string[]> {
  type Chain = { base: string; ig: ReturnType<typeof ignore> }[];
  const chains = new Map<string, Chain>();
  const filter = fileFilter(plan.glob);
  const out: string[] = [];
  const parentOf = (rel: string) => {
    const i = rel.lastIndexOf("/");
    return i < 0 ? "" : rel.slice(0, i);
  };
  const ignored = (rel: string, isDir: boolean): boolean => {
    const chain = chains.get(parentOf(rel));
    if (!chain) return false;
    let result = false;
    for (const { base, ig } of chain) {
      const sub = base ? rel.slice(base.length + 1) : rel;
      const t = ig.test(isDir ? `${sub}/` : sub);
      if (t.ignored) result = true;
      else if (t.unignored) result = false;
    }
    return result;
  };
  const { readFileSync } = await import("node:fs");
  await walk({
    root: plan.rootReal,
    signal: plan.signal,
    onDirectory(rel, entries) {
      const inherited = chains.get(parentOf(rel)) ?? [];
      let chain = rel === "" ? [] : inherited;
      if (plan.gitignore && entries.some((e) => e.name === ".gitignore" && e.isFile())) {
        try {
          const text = readFileSync(join(plan.rootReal, rel, ".gitignore"), "utf8");
          chain = [...chain, { base: rel, ig: ignore({ allowRelativePaths: true }).add(text) }];
        } catch {
          // an unreadable .gitignore is treated as absent
        }
      }
      chains.set(rel, chain);
    },
    visit(entry) {
      const { dirent, rel, name } = entry;
      if (name === ".git") return "skip";
      if (!plan.dot && name.startsWith(".")) return "skip";
      if (dirent.isSymbolicLink()) return "skip";
      if (!dirent.isFile() && !dirent.isDirectory()) return "skip";
      if (isExcludedEntry(plan.policy, join(plan.rootAbs, rel), join(plan.rootReal, rel))) {
        skipped.denied++;
        return "skip";
      }
      if (plan.gitignore && ignored(rel, dirent.isDirectory())) return "skip";
      if (dirent.isFile() && (!filter || filter(rel))) out.push(rel);
      return undefined;
    },
  });
  return out;
}

let rgPathCache: string | null | undefined;

/** The ripgrep binary: $TOOLHOST_RG_PATH, else @vscode/ripgrep's, else null. */
export function ripgrepPath(): string | null {
  if (rgPathCache !== undefined) return rgPathCache;
  const fromEnv = process.env.TOOLHOST_RG_PATH;
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

class RipgrepUnusable extends Error {}

/**
 * Calls `onLine` for each LF-terminated UTF-8 line of a stream (ripgrep's output), synchronously per chunk.
 * Newlines are found in the raw bytes and each line is decoded once, so a line spread over many chunks (a
 * minified file's) costs linear time.
 */
async function forEachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): Promise<void> {
  let parts: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      if (parts.length > 0) {
        parts.push(piece);
        onLine(Buffer.concat(parts).toString("utf8"));
        parts = [];
      } else {
        onLine(piece.toString("utf8"));
      }
      start = nl + 1;
    }
    if (start < chunk.length) parts.push(chunk.subarray(start));
  }
  if (parts.length > 0) onLine(Buffer.concat(parts).toString("utf8"));
}

/**
 * The ripgrep engine for a directory search. Throws RipgrepUnusable when ripgrep rejects the translated pattern
 * (the caller then runs the JS engine).
 */
export async function searchWithRipgrep(
  plan: GrepPlan,
  rg: string,
  rustPattern: string,
  exact = false,
): Promise<EngineOutcome> {
  const skipped: GrepResult["skipped"] = { ...emptySkipped(), tooLarge: null };
  const collector = new Collector(plan.maxResults);
  const mLimit = plan.maxPerFile + 1;
  const args = [
    "--no-heading",
    "--with-filename",
    "--line-number",
    exact ? "--column" : "--no-column",
    "--null",
    "--color",
    "never",
    "--stats",
    // Leave a core to this process, which parses ripgrep's output as it streams.
    "--threads",
    String(Math.max(1, availableParallelism() - 1)),
    "--no-config",
    "--text",
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
    String(mLimit),
    "--glob",
    "!.git",
  ];
  if (!plan.gitignore) args.push("--no-ignore-vcs");
  if (plan.dot) args.push("--hidden");
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
  const recheck: string[] = [];
  let current: { rel: string; lines: { line: number; text: string }[] } | null = null;
  let started: RegexWorker | null = null;
  const worker = () => {
    started ??= startWorker(plan);
    return started;
  };
  // Verification runs in the worker, file by file, in ripgrep's output order.
  let chain: Promise<void> = Promise.resolve();
  const prefix = plan.rootReal.endsWith("/") ? plan.rootReal : `${plan.rootReal}/`;

  type Finished = { rel: string; lines: { line: number; text: string }[] };
  let batch: Finished[] = [];
  let batchLines = 0;
  const flush = () => {
    if (batch.length === 0) return;
    const files = batch;
    batch = [];
    batchLines = 0;
    // An exact translation needs no re-test: only the binary probe, done here.
    const verdicts = exact
      ? Promise.resolve(
          files.map((f) => ({ binary: isBinaryFile(join(plan.rootReal, f.rel)), texts: f.lines.map((l) => l.text) })),
        )
      : worker().verifyFiles(
          files.map((f) => ({ path: join(plan.rootReal, f.rel), lines: f.lines.map((l) => l.text) })),
        );
    verdicts.catch(() => {});
    chain = chain.then(async () => {
      const results = await verdicts;
      files.forEach((file, i) => {
        const { binary, texts } = results[i]!;
        const verified: { line: number; text: string }[] = [];
        texts.forEach((text, k) => {
          if (text !== null) verified.push({ line: file.lines[k]!.line, text });
        });
        if (file.lines.length >= mLimit && verified.length <= plan.maxPerFile) {
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
        for (const l of verified.slice(0, plan.maxPerFile)) collector.push({ rel: file.rel, ...l });
      });
    });
  };
  const finishFile = () => {
    const file = current;
    current = null;
    if (!file || file.lines.length === 0) return;
    batch.push(file);
    batchLines += file.lines.length;
    if (batchLines >= 2000) flush();
  };

  // Output lines are "path\0line:text" (each file's lines contiguous), then the --stats block.
  let currentPath: string | null = null;
  const handle = (raw: string) => {
    const nul = raw.indexOf("\0");
    if (nul < 0) {
      const stat = /^(\d+) files searched$/.exec(raw.trim());
      if (stat) filesSearched = Number(stat[1]);
      return;
    }
    const path = raw.slice(0, nul);
    if (path !== currentPath) {
      finishFile();
      currentPath = path;
      const rel = path.startsWith(prefix) ? path.slice(prefix.length) : path;
      const denied = isExcludedEntry(plan.policy, join(plan.rootAbs, rel), join(plan.rootReal, rel));
      if (denied) skipped.denied++;
      current = denied || (postFilter && !postFilter(rel)) ? null : { rel, lines: [] };
    }
    if (!current) return;
    const colon = raw.indexOf(":", nul + 1);
    if (colon < 0) return;
    let textStart = colon + 1;
    let column = 1;
    if (exact) {
      const colon2 = raw.indexOf(":", textStart);
      if (colon2 < 0) return;
      column = Number(raw.slice(textStart, colon2));
      textStart = colon2 + 1;
    }
    let line = raw.slice(textStart);
    if (line.endsWith("\r")) line = line.slice(0, -1);
    current.lines.push({ line: Number(raw.slice(nul + 1, colon)), text: exact ? cutAtColumn(line, column) : line });
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
    if (code === 2 && filesSearched === 0 && /regex|pattern|syntax|size limit/i.test(stderr)) {
      throw new RipgrepUnusable(stderr);
    }
    if (code === 2) skipped.unreadable += (stderr.match(/\n/g) ?? []).length;
    await chain;
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
        for (const l of outcome.lines) collector.push({ rel, ...l });
      });
    }
  } catch (error) {
    if (plan.signal.aborted) throw plan.signal.reason;
    throw error;
  } finally {
    (started as RegexWorker | null)?.terminate();
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  const { matches, dropped } = collector.finish();
  return { matches, truncated: dropped || perFileCut, filesSearched, filesWithMatches, skipped };
}

/** Compiles the pattern (GrepPatternError when invalid) and resolves the path under the policy. */
export async function planGrep(
  args: { pattern: string; path: string; glob?: string; caseInsensitive?: boolean },
  context: ToolContext,
): Promise<GrepPlan> {
  const ignoreCase = args.caseInsensitive === true;
  let regex: RegExp;
  try {
    regex = new RegExp(args.pattern, ignoreCase ? "i" : "");
  } catch (error) {
    throw new GrepPatternError(args.pattern, (error as Error).message.replace(/^Invalid regular expression: /, ""));
  }
  const { absolute, real } = await resolveAndValidatePath(args.path, context, { mustExist: true, purpose: "read" });
  const { stat } = await import("node:fs/promises");
  const info = await stat(real);
  const params = context.settings.parameters;
  return {
    pattern: args.pattern,
    regex,
    ignoreCase,
    rootAbs: absolute,
    rootReal: real,
    isFile: !info.isDirectory(),
    glob: args.glob,
    maxResults: integerSetting(params, D.maxResults),
    maxPerFile: integerSetting(params, D.maxMatchesPerFile),
    maxFileSize: integerSetting(params, D.maxFileSizeBytes),
    dot: booleanSetting(params, D.includeDotfiles),
    gitignore: booleanSetting(params, D.respectGitignore),
    policy: await effectivePathPolicy(context),
    signal: context.signal,
  };
}

/** Executes grep on parsed arguments. */
export async function runGrep(
  args: { pattern: string; path: string; glob?: string; caseInsensitive?: boolean },
  context: ToolContext,
): Promise<GrepResult> {
  const plan = await planGrep(args, context);
  const choice = stringSetting(context.settings.parameters, D.engine);
  let engine: GrepResult["engine"] = "js";
  let outcome: EngineOutcome | undefined;
  // ripgrep would read denied and protected files (and reveal them through its binary-skip counts) before their
  // matches could be dropped, so any such path inside the search root sends the search to the JS engine.
  const rg =
    choice === "js" || plan.isFile || hasExclusionsWithin(plan.policy, plan.rootAbs, plan.rootReal)
      ? null
      : ripgrepPath();
  const translated = rg ? translateJsRegex(plan.pattern, plan.ignoreCase) : null;
  if (rg && translated !== null) {
    try {
      outcome = await searchWithRipgrep(plan, rg, translated.rust, translated.exact);
      engine = "ripgrep";
    } catch (error) {
      if (!(error instanceof RipgrepUnusable)) throw error;
      context.logger.debug({ err: error.message }, "ripgrep refused the translated pattern; using the JS engine");
    }
  }
  outcome ??= await searchWithJs(plan);
  const matches = outcome.matches.map((m) => ({
    file: toResultPath(m.rel ? join(plan.rootAbs, m.rel) : plan.rootAbs, context),
    line: m.line,
    text: m.text,
  }));
  const notes: string[] = [];
  if (!plan.isFile) {
    notes.push(".git directories and symbolic links are not searched.");
    if (!plan.dot) notes.push('Names starting with "." were not searched (setting includeDotfiles).');
    if (plan.gitignore) notes.push("Files ignored by .gitignore were not searched (setting respectGitignore).");
    if (plan.glob) notes.push(`Only files matching the glob ${JSON.stringify(plan.glob)} were searched.`);
  }
  const s = outcome.skipped;
  if (s.tooLarge === null)
    notes.push(`Files larger than maxFileSizeBytes (${plan.maxFileSize} bytes) are skipped (not counted by ripgrep).`);
  else if (s.tooLarge > 0) {
    notes.push(`${s.tooLarge} file(s) larger than maxFileSizeBytes (${plan.maxFileSize} bytes) were skipped.`);
  }
  if (s.binary > 0) notes.push(`${s.binary} binary file(s) (NUL in the first 8 KiB) were skipped.`);
  if (s.denied > 0) notes.push(`${s.denied} path(s) covered by deniedPaths were skipped.`);
  if (s.unreadable > 0) notes.push(`${s.unreadable} file(s) could not be read.`);
  if (outcome.truncated) {
    notes.push(
      `Results were cut by maxResults (${plan.maxResults}) or maxMatchesPerFile (${plan.maxPerFile}); narrow the pattern, path or glob to see the rest.`,
    );
  }
  return {
    pattern: args.pattern,
    path: args.path,
    matches,
    truncated: outcome.truncated,
    engine,
    filesSearched: outcome.filesSearched,
    filesWithMatches: outcome.filesWithMatches,
    skipped: outcome.skipped,
    notes,
  };
}

export const grepTool: RegisteredTool = defineTool({
  definition: {
    name: "grep",
    description:
      "Searches a file, or every text file under a directory, for lines matching a JavaScript regular expression. Returns { file, line, text } matches sorted by file and line; file paths can be passed to read_file. Skips .git, dotfiles, .gitignored, binary and large files (the result says what it skipped).",
    parameters: {
      type: "object",
      properties: {
        pattern: { type: "string", description: 'JavaScript regular expression, e.g. "function\\\\s+main\\\\(".' },
        path: {
          type: "string",
          description: "File or directory to search: absolute, ~-prefixed, or relative to the working directory.",
        },
        glob: {
          type: "string",
          description:
            'File filter for directory searches: "*.ts" matches names at any depth, "src/**/*.ts" paths; "!" excludes.',
        },
        caseInsensitive: { type: "boolean", description: "Match case-insensitively. Default false." },
      },
      required: ["pattern", "path"],
    },
  },
  settings: {
    title: "Grep",
    description: "Lets the model search file contents with regular expressions within the allowed directories.",
    category: "system",
    annotations: { readOnlyHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS, ...Object.values(D)],
  },
  execute: (args, context) =>
    runGrep(args as { pattern: string; path: string; glob?: string; caseInsensitive?: boolean }, context),
});

registerTool(grepTool);
