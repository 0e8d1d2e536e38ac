/**
 * grep's ripgrep engine: ripgrep walks and scans with the tool's rules expressed as flags; each line it reports is
 * re-tested with the JavaScript RegExp in a worker unless the pattern's translation is exact (regex-translate.ts),
 * so results are exactly the JS semantics. Its output ("path\0line:text", each file's lines together, then the
 * --stats block) is parsed as it streams.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import type { RegexWorker } from "../regex-worker.js";
import {
  Collector,
  cutAtColumn,
  type EngineOutcome,
  emptySkipped,
  fileFilter,
  type GrepPlan,
  type GrepResult,
  isBinaryFile,
  startWorker,
} from "./common.js";

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

/** ripgrep refused the translated pattern: the caller runs the JS engine instead. */
export class RipgrepUnusable extends Error {}

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
 * ripgrep's command line for a search: the tool's rules as flags (text mode, UTF-8, CRLF, no parent/global ignore
 * files, size and per-file caps, `.git` excluded, dotfiles and .gitignore per the settings) and the `glob`
 * argument as a file type where ripgrep can express it. `postFilter` is the part of the glob applied to what
 * ripgrep reports (path globs), or null.
 */
export function ripgrepArgs(
  plan: GrepPlan,
  rustPattern: string,
  exact: boolean,
  perFileLimit: number,
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
    String(perFileLimit),
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

  return { args, postFilter };
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
  const { args, postFilter } = ripgrepArgs(plan, rustPattern, exact, mLimit);

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
      const denied = plan.excluded(rel);
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
    if (code === 2 && filesSearched === 0 && /regex|pattern|syntax|size limit|glob/i.test(stderr)) {
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
