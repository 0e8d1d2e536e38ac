#!/usr/bin/env node
/**
 * Filesystem tool benchmarks (npm run bench; never part of npm test).
 *
 * Measures, in one run on this machine, side by side:
 *   - grep (ripgrep engine and JS engine) vs ripgrep itself on the same search over node_modules;
 *   - glob vs fdir + picomatch, tinyglobby and find for the same pattern over node_modules;
 *   - read_file (text view, 10 MiB file) vs cat.
 * Each case runs once to warm caches, then RUNS times; the median wall time is reported, with the ratio to the
 * reference tool. Results are printed and written to BENCHMARKS.md.
 *
 * Uses the built library (dist/) when present, else the TypeScript sources through tsx.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const TREE = process.env.BENCH_TREE ?? join(ROOT, "node_modules");

async function loadModules() {
  const fromDist = join(ROOT, "dist", "tools", "builtin", "grep.js");
  const useDist = process.env.BENCH_SOURCE !== "src" && existsSync(fromDist);
  const base = useDist ? join(ROOT, "dist") : join(ROOT, "src");
  const ext = base.endsWith("dist") ? ".js" : ".ts";
  if (ext === ".ts") {
    const { register } = await import("tsx/esm/api");
    register();
  }
  const load = (p) => import(join(base, p + ext));
  return {
    via: base.endsWith("dist") ? "dist" : "src (tsx)",
    grep: await load("tools/builtin/grep"),
    glob: await load("tools/builtin/glob"),
    read: await load("tools/builtin/read-file"),
    stores: await load("core/stores"),
  };
}

function context(mods, parameters, workingDirectory) {
  return {
    userId: "bench",
    chatId: "bench",
    workingDirectory,
    signal: new AbortController().signal,
    settings: { enabled: true, parameters: { restrictPaths: false, ...parameters } },
    dataDir: tmpdir(),
    ledger: new mods.stores.MemoryFreshnessLedger(),
    audit: new mods.stores.MemoryAuditSink(),
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    emitProgress() {},
    services: {},
  };
}

async function time(fn) {
  await fn(); // warm-up
  const samples = [];
  let last;
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    last = await fn();
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return { ms: samples[Math.floor(samples.length / 2)], min: samples[0], last };
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { maxBuffer: 1 << 30, ...opts });
  if (r.error) throw r.error;
  return r;
}

const rows = [];
function row(group, name, t, ref, note = "") {
  const r = { group, name, ms: t.ms, min: t.min, ratio: t.ms / ref.ms, minRatio: t.min / ref.min, note };
  rows.push(r);
  console.log(
    `${group.padEnd(6)} ${name.padEnd(58)} median ${r.ms.toFixed(1).padStart(8)} ms ${r.ratio.toFixed(2)}x  best ${r.min.toFixed(1).padStart(8)} ms ${r.minRatio.toFixed(2)}x  ${note}`,
  );
}

const mods = await loadModules();
const rg = mods.grep.ripgrepPath();
console.log(`tree: ${TREE}; runs: ${RUNS} (median); modules from ${mods.via}; ripgrep: ${rg ?? "none"}`);

// ---- grep ----
const PATTERN = process.env.BENCH_PATTERN ?? "function\\s+\\w+\\(";
{
  const args = [
    "--no-config",
    "-a",
    "-E",
    "utf-8",
    "--crlf",
    "--no-require-git",
    "--max-filesize",
    "1000000",
    "-m",
    "21",
    "-e",
    "function\\s+\\w+\\(",
    TREE,
  ];
  const ref = await time(() => run(rg, args));
  const refJson = await time(() => run(rg, ["--json", ...args]));
  row("grep", "ripgrep, same flags, text output (reference)", ref, ref);
  row("grep", "ripgrep, same flags, --json output", refJson, ref);
  for (const engine of ["ripgrep", "js"]) {
    const ctx = context(mods, { engine, maxResults: 5000, maxMatchesPerFile: 20 }, TREE);
    const r = await time(() => mods.grep.runGrep({ pattern: PATTERN, path: TREE }, ctx));
    row(
      "grep",
      `grep tool, ${engine} engine`,
      r,
      ref,
      `${r.last.filesWithMatches} files with matches, ${r.last.matches.length} returned`,
    );
  }
}

// ---- glob ----
{
  const { fdir } = await import("fdir");
  const picomatch = (await import("picomatch")).default;
  const { glob: tinyglobby } = await import("tinyglobby");
  const pattern = "**/package.json";
  const isMatch = picomatch(pattern);
  const ref = await time(async () =>
    new fdir()
      .withRelativePaths()
      .filter((p) => isMatch(p))
      .exclude((name) => name.startsWith("."))
      .crawl(TREE)
      .withPromise(),
  );
  row("glob", "fdir + picomatch (reference)", ref, ref, `${ref.last.length} matches`);
  const tg = await time(() => tinyglobby(pattern, { cwd: TREE, dot: false, followSymbolicLinks: false }));
  row("glob", "tinyglobby", tg, ref, `${tg.last.length} matches`);
  const fnd = await time(() => run("find", [TREE, "-name", "package.json", "-not", "-path", "*/.*"]));
  row("glob", "find -name", fnd, ref);
  const ctx = context(mods, { maxResults: 5000 }, TREE);
  const g = await time(() => mods.glob.runGlob({ pattern, cwd: TREE }, ctx));
  row("glob", "glob tool", g, ref, `${g.last.matches.length} matches, truncated ${g.last.truncated}`);
}

// ---- read_file ----
{
  const dir = mkdtempSync(join(tmpdir(), "toolhost-bench-"));
  const file = join(dir, "ten-mib.txt");
  const line = `${"the quick brown fox jumps over the lazy dog ".repeat(2)}\n`;
  writeFileSync(file, line.repeat(Math.floor((10 * 1024 * 1024 - 1) / line.length)));
  const ref = await time(() => run("cat", [file], { stdio: ["ignore", "pipe", "ignore"] }));
  row("read", "cat (reference, includes process spawn)", ref, ref);
  const ctx = context(mods, {}, dir);
  const r = await time(() => mods.read.readFile({ path: file }, ctx));
  row("read", "read_file text view (whole-file sha256, 2000-line window)", r, ref);
  const rs = await time(() => mods.read.readFile({ path: file, startLine: 100_000, maxLines: 10 }, ctx));
  row("read", "read_file text view, window at line 100000", rs, ref);
  rmSync(dir, { recursive: true, force: true });
}

const md = [
  "# Benchmarks",
  "",
  "Generated by `npm run bench` (bench/run.mjs). Never part of `npm test`; tests never assert timings.",
  "",
  "## Method",
  "",
  `- Machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}, shared with other work (numbers are noisy).`,
  `- Tree: \`${TREE.replace(ROOT, ".")}\` (the installed dependencies). Each case runs once to warm the page cache, then ${RUNS} times; the median and the best wall time are reported.`,
  "- Ratio = case time / the group's reference time (lower is better; 1.00x is parity), for the median and for the best run (the best run is the least disturbed by other load on a shared machine).",
  `- grep: pattern \`${PATTERN}\`, default tool rules (skip dotfiles, .gitignore, .git, files over 1 MB, binary), maxResults 5000, maxMatchesPerFile 20. The reference is ripgrep run with the flags the tool passes (text mode, UTF-8 transcoding, CRLF, per-file limit, size limit) printing plain text to a pipe, as the tool reads it (a second row shows ripgrep's JSON output for comparison); the tool adds re-verification of every line with the JS RegExp, the binary probe, sorting and path re-anchoring.`,
  "- glob: pattern `**/package.json` (a full walk: the cap is not reached), dotfiles off, symlinks not followed. Reference: fdir + picomatch (the fastest JS crawler).",
  "- read_file: a 10 MiB text file of short lines; the tool reads it through one descriptor, hashes it (sha256), decodes it, splits lines and renders the window. Reference: `cat` to a pipe (includes spawning the process).",
  "",
  "## Results",
  "",
  "| group | case | median ms | ratio (median) | best ms | ratio (best) | notes |",
  "| --- | --- | ---: | ---: | ---: | ---: | --- |",
  ...rows.map(
    (r) =>
      `| ${r.group} | ${r.name} | ${r.ms.toFixed(1)} | ${r.ratio.toFixed(2)}x | ${r.min.toFixed(1)} | ${r.minRatio.toFixed(2)}x | ${r.note} |`,
  ),
  "",
];
writeFileSync(join(ROOT, "BENCHMARKS.md"), md.join("\n"));
console.log("wrote BENCHMARKS.md");
