/**
 * grep's JS engine: walks the tree with the shared rules (dotfiles, .git, .gitignore chains, symbolic links never
 * followed, denied and protected entries) and evaluates the JavaScript RegExp in a terminable worker, a batch of
 * files per request.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import ignore from "ignore";
import type { RegexWorker, WorkerFileOutcome } from "../regex-worker.js";
import { walk } from "../walk.js";
import {
  type EngineOutcome,
  emptySkipped,
  FileCollector,
  fileFilter,
  flattenHits,
  type GrepPlan,
  type GrepResult,
  startWorker,
} from "./common.js";

/** Files sent to the worker per request. */
const FILE_BATCH = 64;

/** The JS engine: walks with the shared rules and searches files with a small concurrency pool. */
export async function searchWithJs(plan: GrepPlan, existing?: RegexWorker): Promise<EngineOutcome> {
  const skipped = emptySkipped();
  const collector = new FileCollector<{ line: number; text: string }[]>(plan.maxResults);
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
    collector.add(rel, outcome.lines.length, outcome.lines);
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
        const batch = worker.searchFiles(candidates.slice(i, i + FILE_BATCH).map((rel) => join(plan.rootReal, rel)));
        batch.catch(() => {}); // awaited below in order; once one fails (cancelled), the rest are never awaited
        batches.push(batch);
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
    if (!existing) worker.release();
  }
  const { files, dropped } = collector.finish();
  return { matches: flattenHits(files), truncated: dropped || perFileCut, filesSearched, filesWithMatches, skipped };
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
      if (plan.excluded(rel)) {
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
