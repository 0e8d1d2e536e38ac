#!/usr/bin/env node
/**
 * Toolhost benchmarks (npm run bench; never part of npm test, and no test asserts a timing).
 *
 * Every case is measured in one run next to the best-known tool for the same job, and reported as a ratio:
 *   - call:  executeTool on a no-op tool vs calling the function directly (µs per call);
 *   - cli:   `toolhost --version` and `toolhost call get_current_datetime` vs `node -e 0` (child CPU time);
 *   - http:  GET /api/settings/tools with 16 keep-alive connections vs bare Hono serving the same body, and
 *            POST /api/tools/read_file/execute vs bare Hono reading the same file per request (req/s);
 *   - mcp:   `toolhost mcp` over stdio vs the reference filesystem MCP server, the official SDK client on both, the
 *            same 12 KB file (read_file vs read_text_file) and the same 200-entry folder (list_directory), calls/s;
 *   - turn:  one agent turn with 5 tool calls through Toolhost's tool loop vs the AI SDK's streamText with the same
 *            tools (toolhost/ai-sdk) and the same model stream, CPU per turn;
 *   - grep:  the grep tool through ToolRuntime.executeTool (settings and path policy on) vs ripgrep, same flags;
 *   - glob:  the glob tool through executeTool vs fdir + picomatch (and tinyglobby, find);
 *   - read:  read_file through executeTool vs cat;
 *   - sandbox: the same command through the bash tool inside the bubblewrap sandbox vs with `sandbox: "off"`
 *     (and bare bwrap vs bare bash), reported as a ratio and as milliseconds added per command.
 * Tools are called as a host calls them: through a ToolRuntime with a settings store and the default protected
 * paths, on a copy of node_modules (the installation's own node_modules is off limits to tools).
 *
 * Environment: BENCH_RUNS (timed runs per case, default 7), BENCH_ONLY (comma-separated groups),
 * BENCH_TREE (tree to search; default a hard-linked copy of node_modules in the temp directory),
 * BENCH_HTTP_MS (load duration per server, default 5000), BENCH_WRITE=0 to skip writing BENCHMARKS.md.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const RUNS = Number(process.env.BENCH_RUNS ?? 7);
// Benchmarks never write into the real per-user data directory (~/.local/share/toolhost): runtimes made without
// a data directory (and their spill areas) use a throwaway one.
process.env.TOOLHOST_DATA_DIR ||= mkdtempSync(join(tmpdir(), "toolhost-bench-data-"));

const ALL_GROUPS = "call,cli,http,mcp,turn,grep,glob,read,sandbox";
const ONLY = new Set((process.env.BENCH_ONLY ?? ALL_GROUPS).split(","));
const HTTP_MS = Number(process.env.BENCH_HTTP_MS ?? 5000);
/** The `toolhost` executable as installed: package.json's bin (the bundled CLI). */
const CLI = join(ROOT, JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).bin.toolhost);

if (!existsSync(join(ROOT, "dist", "index.js"))) {
  console.error("Build first: npm run build (npm run bench does it for you).");
  process.exit(2);
}

/** The tree grep and glob search: a copy of node_modules outside the installation (cached between runs). */
function benchTree() {
  if (process.env.BENCH_TREE) return process.env.BENCH_TREE;
  const tree = join(tmpdir(), "toolhost-bench-tree");
  if (!existsSync(join(tree, "typescript"))) {
    rmSync(tree, { recursive: true, force: true });
    const r = spawnSync("cp", ["-al", join(ROOT, "node_modules"), tree]);
    if (r.status !== 0) execFileSync("cp", ["-a", join(ROOT, "node_modules"), tree]);
  }
  return tree;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * CPU milliseconds used so far by this process (every thread) and its waited-for children (ripgrep, find), or
 * null where /proc is missing. On a busy machine wall times stretch, while CPU time shows the work each case does.
 */
function cpuMs() {
  try {
    // Fields after the command name: [0] is field 3 (state), so cutime (16) and cstime (17) are [13] and [14].
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
    const tick = 10; // USER_HZ is 100 on Linux
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000 + (Number(fields[13]) + Number(fields[14])) * tick;
  } catch {
    return null;
  }
}

/** Warm-up once, then RUNS timed runs: {ms (median), min, max, last, cpu (mean CPU ms per run, or null)}. */
async function time(fn, runs = RUNS) {
  await fn();
  const samples = [];
  let last;
  const cpu0 = cpuMs();
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    last = await fn();
    samples.push(performance.now() - t);
  }
  const cpu1 = cpuMs();
  const cpu = cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / runs;
  return { ms: median(samples), min: Math.min(...samples), max: Math.max(...samples), last, cpu };
}

/**
 * Times several cases in alternation: one warm-up each, then RUNS rounds that run every case once, so load that
 * comes and goes on a shared machine falls on all of them alike (each case's garbage may be collected during
 * another's run: alternate only cases whose ratio is wanted). Returns time()'s shape for each case, in order.
 */
async function timeAlternating(fns, runs = RUNS) {
  for (const fn of fns) await fn();
  const samples = fns.map(() => []);
  const cpu = fns.map(() => 0);
  const last = fns.map(() => undefined);
  let cpuKnown = true;
  for (let i = 0; i < runs; i++) {
    for (let k = 0; k < fns.length; k++) {
      const c0 = cpuMs();
      const t = performance.now();
      last[k] = await fns[k]();
      samples[k].push(performance.now() - t);
      const c1 = cpuMs();
      if (c0 === null || c1 === null) cpuKnown = false;
      else cpu[k] += c1 - c0;
    }
  }
  return fns.map((_, k) => ({
    ms: median(samples[k]),
    min: Math.min(...samples[k]),
    max: Math.max(...samples[k]),
    last: last[k],
    cpu: cpuKnown ? cpu[k] / runs : null,
  }));
}

/** "cpu 1.16x": a case's CPU time (process and children) relative to its reference's, when both were measured. */
const cpuNote = (t, ref) => (t.cpu && ref.cpu ? `cpu ${(t.cpu / ref.cpu).toFixed(2)}x of the reference` : "");

const rows = [];
/**
 * Records a row. For times lower is better and ratio = case / reference; for throughputs (higherIsBetter) the
 * ratio is case / reference too, and reads as "share of the reference's throughput".
 */
function row(group, name, t, ref, { note = "", unit = "ms", target = "" } = {}) {
  const r = {
    group,
    name,
    unit,
    median: t.ms,
    min: t.min,
    max: t.max,
    ratio: t.ms / ref.ms,
    note,
    target,
  };
  rows.push(r);
  const fmt = (v) => (unit === "µs" ? v.toFixed(2) : unit.endsWith("/s") ? v.toFixed(0) : v.toFixed(1));
  console.log(
    `${group.padEnd(5)} ${name.padEnd(64)} ${fmt(r.median).padStart(9)} ${unit.padEnd(5)} [${fmt(r.min)}–${fmt(r.max)}] ${r.ratio.toFixed(2)}x ${target} ${note}`,
  );
}

const lib = await import(join(ROOT, "dist", "index.js"));
const { ToolRuntime, ToolRegistryStore } = lib;
// The in-memory settings store is part of the application subpath (toolhost/app), not the root API.
const { MemoryToolSettingsStore } = await import(join(ROOT, "dist", "app", "index.js"));
// The shell tool's internals are not part of the public API: load their built modules by path.
const shell = {
  ...(await import(join(ROOT, "dist", "tools", "shell", "sandbox", "index.js"))),
  ...(await import(join(ROOT, "dist", "tools", "shell", "shell-tool.js"))),
};
const TREE = ONLY.has("grep") || ONLY.has("glob") ? benchTree() : "";
console.log(`runs: ${RUNS} (median, [min–max]); tree: ${TREE || "-"}; node ${process.version}`);

/** A runtime whose settings store holds `settings` (tool → parameters) for user "bench". */
async function runtimeWith(settings) {
  const store = new MemoryToolSettingsStore();
  for (const [tool, parameters] of Object.entries(settings)) {
    await store.save("bench", tool, { enabled: true, parameters });
  }
  return new ToolRuntime({ store });
}

/** The result cap at its ceiling, so the whole result comes back inline (the cap's spill is not what is measured). */
const UNCAPPED = { maxResultBytes: 1024 * 1024, maxResultLines: 100_000 };

// ---- executeTool overhead ----
if (ONLY.has("call")) {
  const registry = new ToolRegistryStore();
  const noop = async () => ({ ok: true });
  registry.register({
    definition: {
      name: "noop",
      description: "Does nothing.",
      parameters: { type: "object", properties: { x: { type: "integer" } } },
    },
    settings: {
      title: "No-op",
      description: "Does nothing.",
      category: "system",
      enabledByDefault: true,
      canDisable: true,
      defaultParameters: {},
      parameterDescriptors: [],
    },
    execute: noop,
  });
  const runtime = new ToolRuntime({ registry });
  const N = 20_000;
  const perCall = async (fn) =>
    time(async () => {
      const t = performance.now();
      for (let i = 0; i < N; i++) await fn(i);
      return ((performance.now() - t) * 1000) / N;
    }).then((r) => ({ ms: r.last, min: r.min * (1000 / N), max: r.max * (1000 / N) }));
  const direct = await perCall((i) => noop({ x: i }));
  const viaRuntime = await perCall((i) => runtime.executeTool("noop", { x: i }, { userId: "bench" }));
  row("call", "direct call of the tool's function (reference)", direct, direct, { unit: "µs" });
  row("call", "ToolRuntime.executeTool on a no-op tool", viaRuntime, direct, {
    unit: "µs",
    note: `overhead ${(viaRuntime.ms - direct.ms).toFixed(2)} µs/call`,
    target: "overhead ≤ 2 µs",
  });
}

// ---- CLI start (child CPU time: user + sys) ----
if (ONLY.has("cli")) {
  const dataDir = mkdtempSync(join(tmpdir(), "toolhost-bench-cli-"));
  const env = { ...process.env, TOOLHOST_DATA_DIR: dataDir };
  /** CPU seconds (user+sys) of a command's children, read from bash's `times`, in ms. */
  const cpuOf = (command) => {
    const r = spawnSync("bash", ["-c", `${command} >/dev/null 2>&1; times`], { env, encoding: "utf8" });
    const line = r.stdout.trim().split("\n").pop() ?? "";
    const secs = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
    return (secs[0] + secs[1]) * 1000;
  };
  const cpuTime = async (command) => {
    cpuOf(command);
    const xs = Array.from({ length: RUNS }, () => cpuOf(command));
    return { ms: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
  };
  const node = JSON.stringify(process.execPath);
  const ref = await cpuTime(`${node} -e 0`);
  row("cli", "node -e 0 (reference)", ref, ref);
  row("cli", "toolhost --version", await cpuTime(`${node} ${CLI} --version`), ref, { target: "≤ 1.2x" });
  row(
    "cli",
    'toolhost call get_current_datetime \'{"timezone":"UTC"}\'',
    await cpuTime(`${node} ${CLI} call get_current_datetime '{"timezone":"UTC"}'`),
    ref,
    { target: "≤ 2x" },
  );
  rmSync(dataDir, { recursive: true, force: true });
}

// ---- settings API throughput ----
if (ONLY.has("http")) {
  const dataDir = mkdtempSync(join(tmpdir(), "toolhost-bench-http-"));
  // The execute benchmark's file: 12 KB of text in the server's working directory (the admin's fallback root),
  // outside the data directory (which tools never touch).
  const workDir = mkdtempSync(join(tmpdir(), "toolhost-bench-http-work-"));
  const readFile12k = join(workDir, "file.txt");
  writeFileSync(readFile12k, `${"the quick brown fox jumps over the lazy dog\n".repeat(280)}`);
  const startChild = (args, env = {}) =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, args, {
        cwd: workDir,
        env: { ...process.env, TOOLHOST_DATA_DIR: dataDir, TOOLHOST_LOG_LEVEL: "warn", ...env },
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      const timer = setTimeout(() => reject(new Error(`no start line from ${args.join(" ")}: ${out}`)), 30_000);
      child.stdout.on("data", (d) => {
        out += d;
        const port = out.match(/listening (\d+)/)?.[1] ?? out.match(/http:\/\/127\.0\.0\.1:(\d+)/)?.[1];
        const token = out.match(/\b(th_[A-Za-z0-9_-]+)/)?.[1];
        if (port && (token || !args.includes("serve"))) {
          clearTimeout(timer);
          resolve({ child, port: Number(port), token });
        }
      });
      child.on("exit", (code) => reject(new Error(`${args.join(" ")} exited ${code}: ${out}`)));
      // A failing run must not leave its servers behind.
      process.once("exit", () => child.kill("SIGTERM"));
    });
  const load = (url, auth, body) => {
    const args = [join(ROOT, "bench", "load.mjs"), url, "16", String(HTTP_MS), auth ?? "", ...(body ? [body] : [])];
    const r = spawnSync(process.execPath, args, { encoding: "utf8" });
    if (r.status !== 0) throw new Error(r.stderr);
    return JSON.parse(r.stdout.trim().split("\n").pop());
  };
  const th = await startChild([CLI, "serve", "--port", "0"]);
  const auth = `Bearer ${th.token}`;
  const url = `http://127.0.0.1:${th.port}/api/settings/tools`;
  const res = await fetch(url, { headers: { authorization: auth } });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`settings list answered ${res.status}: ${body.slice(0, 200)}`);
  const bodyFile = join(dataDir, "settings-body.json");
  writeFileSync(bodyFile, body);
  const bare = await startChild([join(ROOT, "bench", "bare-hono.mjs"), bodyFile]);
  const bareUrl = `http://127.0.0.1:${bare.port}/api/settings/tools`;
  load(bareUrl); // warm both
  load(url, auth);
  const rounds = 3;
  const a = [];
  const b = [];
  for (let i = 0; i < rounds; i++) {
    a.push(load(bareUrl).rps);
    b.push(load(url, auth).rps);
  }
  // POST /api/tools/read_file/execute vs bare Hono reading the same file per request.
  const execUrl = `http://127.0.0.1:${th.port}/api/tools/read_file/execute`;
  const execBody = JSON.stringify({ arguments: { path: readFile12k } });
  // On a connection of its own (a pooled one from the first request may have been closed by the server since).
  const probed = await new Promise((resolve, reject) => {
    const req = httpRequest(
      execUrl,
      { method: "POST", agent: false, headers: { authorization: auth, "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (d) => (text += d));
        res.on("end", () => resolve(JSON.parse(text)));
      },
    );
    req.on("error", reject);
    req.end(execBody);
  });
  if (!probed.ok) throw new Error(`read_file execute failed: ${JSON.stringify(probed).slice(0, 300)}`);
  const bareRead = await startChild([join(ROOT, "bench", "bare-hono.mjs"), "--read", readFile12k]);
  const bareReadUrl = `http://127.0.0.1:${bareRead.port}/read`;
  load(bareReadUrl, "", execBody);
  load(execUrl, auth, execBody);
  const c = [];
  const d = [];
  for (let i = 0; i < rounds; i++) {
    c.push(load(bareReadUrl, "", execBody).rps);
    d.push(load(execUrl, auth, execBody).rps);
  }
  th.child.kill("SIGTERM");
  bare.child.kill("SIGTERM");
  bareRead.child.kill("SIGTERM");
  const stat = (xs) => ({ ms: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
  row("http", `bare Hono serving the same ${(body.length / 1024).toFixed(0)} KB body (reference)`, stat(a), stat(a), {
    unit: "req/s",
  });
  row("http", "GET /api/settings/tools (auth, settings rows, serialization)", stat(b), stat(a), {
    unit: "req/s",
    note: "ratio = share of the reference's throughput",
    target: "≥ 0.80x",
  });
  row("http", "bare Hono reading the same 12 KB file per request (reference)", stat(c), stat(c), { unit: "req/s" });
  row("http", "POST /api/tools/read_file/execute, 12 KB file (auth, gate, executeTool, audit)", stat(d), stat(c), {
    unit: "req/s",
    note: "ratio = share of the reference's throughput",
    target: "≥ 0.60x",
  });
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(workDir, { recursive: true, force: true });
}

// ---- One agent turn: Toolhost's loop vs the AI SDK's ----
if (ONLY.has("turn")) {
  const { measureTurns } = await import(join(ROOT, "bench", "turn.mjs"));
  const { toolhost, reference } = await measureTurns({ rounds: RUNS });
  const stat = (xs) => ({ ms: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
  row("turn", "AI SDK streamText, 5 read_file calls then text (reference)", stat(reference), stat(reference));
  row("turn", "Toolhost runToolLoop with the approval gate, same calls and stream", stat(toolhost), stat(reference), {
    note: "CPU per turn; both run each call through toolhost's policy, executeTool and audit",
    target: "≤ 1.0x",
  });
}

// ---- MCP over stdio ----
if (ONLY.has("mcp")) {
  const { mcpFixture, startMcpPair, callsPerSecond, processCpuMs } = await import(join(ROOT, "bench", "mcp.mjs"));
  const fx = mcpFixture();
  const pair = await startMcpPair(fx);
  const N = Number(process.env.BENCH_MCP_CALLS ?? 200);
  for (const [kind, what, reference] of [
    ["read", "read_file of a 12 KB file", "read_text_file"],
    ["list", "list_directory of a 200-entry folder", "list_directory"],
  ]) {
    // Both servers warm, then rounds alternating between them (N sequential calls each).
    await callsPerSecond(pair.toolhost[kind], 50);
    await callsPerSecond(pair.reference[kind], 50);
    const th = [];
    const ref = [];
    // Each server's CPU time over its rounds (from /proc): steadier than calls/s on a loaded machine.
    const cpu = { toolhost: 0, reference: 0 };
    for (let i = 0; i < RUNS; i++) {
      for (const side of ["toolhost", "reference"]) {
        const before = processCpuMs(pair.pids[side]);
        (side === "toolhost" ? th : ref).push(await callsPerSecond(pair[side][kind], N));
        cpu[side] += processCpuMs(pair.pids[side]) - before;
      }
    }
    const stat = (xs) => ({ ms: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
    const ratios = th.map((v, i) => v / ref[i]);
    const perCall = (side) => (cpu[side] / (RUNS * N)).toFixed(2);
    row("mcp", `reference filesystem server, ${reference} (reference)`, stat(ref), stat(ref), { unit: "calls/s" });
    row("mcp", `toolhost mcp, ${what}`, stat(th), stat(ref), {
      unit: "calls/s",
      note: `ratio per round ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}; server CPU per call ${perCall("toolhost")} ms vs the reference's ${perCall("reference")} ms`,
      target: "≥ 1.0x",
    });
  }
  await pair.close();
  fx.cleanup();
}

// ---- grep ----
const PATTERN = process.env.BENCH_PATTERN ?? "function\\s+\\w+\\(";
if (ONLY.has("grep")) {
  const rg = (await import(join(ROOT, "node_modules", "@vscode", "ripgrep", "lib", "index.js"))).rgPath;
  const rgPath = process.env.TOOLHOST_RG_PATH ?? rg;
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
    PATTERN,
    TREE,
  ];
  const engines = ["ripgrep", "js"];
  const defaults = await runtimeWith({ grep: { engine: "ripgrep", maxResults: 5000, maxMatchesPerFile: 20 } });
  const atDefaults = () =>
    defaults.executeTool("grep", { pattern: PATTERN, path: "." }, { userId: "bench", workingDirectory: TREE });
  const calls = [];
  for (const engine of engines) {
    const runtime = await runtimeWith({ grep: { engine, maxResults: 5000, maxMatchesPerFile: 20, ...UNCAPPED } });
    calls.push(() =>
      runtime.executeTool("grep", { pattern: PATTERN, path: "." }, { userId: "bench", workingDirectory: TREE }),
    );
  }
  // The target row (ripgrep engine) alternates with the reference; the JS engine, whose garbage would spill into
  // their runs, is timed after them.
  const [ref, viaRipgrep, viaDefaults] = await timeAlternating([
    () => spawnSync(rgPath, args, { maxBuffer: 1 << 30 }),
    calls[0],
    atDefaults,
  ]);
  const timed = [viaRipgrep, await time(calls[1])];
  row("grep", "ripgrep, same flags, text output (reference)", ref, ref);
  for (const [k, engine] of engines.entries()) {
    const r = timed[k];
    if (!r.last.ok) throw new Error(JSON.stringify(r.last.error));
    row("grep", `grep tool via executeTool, ${engine} engine`, r, ref, {
      note: `${r.last.result.filesWithMatches ?? "?"} files with matches, ${r.last.result.matches?.length} returned; ${cpuNote(r, ref)}`,
      target: engine === "ripgrep" ? "≤ 1.15x" : "",
    });
  }
  if (!viaDefaults.last.ok) throw new Error(JSON.stringify(viaDefaults.last.error));
  const cut = viaDefaults.last.result.outputTruncated?.fields?.[0];
  row("grep", "grep tool via executeTool, default settings (48 KiB cap, rest spilled)", viaDefaults, ref, {
    note: `${viaDefaults.last.result.filesWithMatches ?? "?"} files with matches; ${cut ? `cut: ${cut.field} ${cut.totalLines} entries, spilled` : "not cut"}; ${cpuNote(viaDefaults, ref)}`,
    target: "≤ 1.3x",
  });
}

// ---- glob ----
if (ONLY.has("glob")) {
  const { fdir } = await import("fdir");
  const picomatch = (await import("picomatch")).default;
  const { glob: tinyglobby } = await import("tinyglobby");
  const pattern = "**/package.json";
  const isMatch = picomatch(pattern);
  const runtime = await runtimeWith({ glob: { maxResults: 5000, ...UNCAPPED } });
  // The target row alternates with the reference; the other tools are timed after them. The reference is fdir's
  // idiomatic async crawl (every directory read concurrently on the thread pool), relative paths, picomatch on each
  // file's path, dot directories not entered, links listed and not followed: the tool's semantics, unsorted.
  const [ref, g] = await timeAlternating([
    () =>
      new fdir()
        .withRelativePaths()
        .filter((p) => isMatch(p))
        .exclude((name) => name.startsWith("."))
        .crawl(TREE)
        .withPromise(),
    () => runtime.executeTool("glob", { pattern }, { userId: "bench", workingDirectory: TREE }),
  ]);
  const tg = await time(() => tinyglobby(pattern, { cwd: TREE, dot: false, followSymbolicLinks: false }));
  const fnd = await time(() => spawnSync("find", [TREE, "-name", "package.json", "-not", "-path", "*/.*"]));
  if (!g.last.ok) throw new Error(JSON.stringify(g.last.error));
  // Same pattern semantics: the reference, tinyglobby and the tool return the same set of paths.
  const same = (xs) => JSON.stringify([...xs].sort()) === JSON.stringify([...g.last.result.matches].sort());
  if (!same(ref.last) || !same(tg.last)) throw new Error("glob: the tool and its references disagree on the matches");
  row("glob", "fdir + picomatch (reference)", ref, ref, { note: `${ref.last.length} matches` });
  row("glob", "tinyglobby", tg, ref, { note: `${tg.last.length} matches` });
  row("glob", "find -name", fnd, ref);
  row("glob", "glob tool via executeTool", g, ref, {
    note: `${g.last.result.matches.length} matches, truncated ${g.last.result.truncated}; ${cpuNote(g, ref)}`,
    target: "≤ 1.0x",
  });
}

// ---- read_file ----
if (ONLY.has("read")) {
  const dir = mkdtempSync(join(tmpdir(), "toolhost-bench-read-"));
  const file = join(dir, "ten-mib.txt");
  const line = `${"the quick brown fox jumps over the lazy dog ".repeat(2)}\n`;
  writeFileSync(file, line.repeat(Math.floor((10 * 1024 * 1024 - 1) / line.length)));
  const ref = await time(() => spawnSync("cat", [file], { stdio: ["ignore", "pipe", "ignore"], maxBuffer: 1 << 26 }));
  row("read", "cat (reference, includes process spawn)", ref, ref);
  const runtime = await runtimeWith({});
  const call = (args) => runtime.executeTool("read_file", args, { userId: "bench", workingDirectory: dir });
  row(
    "read",
    "read_file via executeTool (whole-file sha256, 2000-line window)",
    await time(() => call({ path: file })),
    ref,
  );
  row(
    "read",
    "read_file via executeTool, window at line 100000",
    await time(() => call({ path: file, startLine: 100_000, maxLines: 10 })),
    ref,
  );
  rmSync(dir, { recursive: true, force: true });
}

// ---- shell sandbox overhead ----
if (ONLY.has("sandbox")) {
  const probe = await shell.probeSandbox();
  const bash = shell.findInterpreter("bash");
  if (!probe.available || !bash) {
    console.log(`sandbox: skipped (${probe.available ? "bash not found" : probe.reason})`);
  } else {
    const dir = mkdtempSync(join(tmpdir(), "toolhost-bench-sandbox-"));
    const registry = new ToolRegistryStore();
    registry.register(shell.buildShellTool("bash", bash));
    const runtimeFor = async (sandbox) => {
      const store = new MemoryToolSettingsStore();
      await store.save("bench", "bash", { enabled: true, parameters: { sandbox } });
      return new ToolRuntime({ registry, store, dataDir: join(dir, "data") });
    };
    const command = "echo hello; ls >/dev/null";
    const callWith = (runtime) => () =>
      runtime.executeTool("bash", { command }, { userId: "bench", workingDirectory: dir }).then((o) => {
        if (!o.ok) throw new Error(JSON.stringify(o.error));
        return o.result;
      });
    const off = await runtimeFor("off");
    const on = await runtimeFor("required");
    const ref = await time(callWith(off), Math.max(RUNS, 15));
    row("sandbox", `bash tool, sandbox off (reference): ${command}`, ref, ref);
    const boxed = await time(callWith(on), Math.max(RUNS, 15));
    if (boxed.last?.sandboxed !== true) throw new Error("the sandboxed case did not run sandboxed");
    row("sandbox", "bash tool, sandbox required (bwrap + seccomp, network off)", boxed, ref, {
      note: `+${(boxed.ms - ref.ms).toFixed(1)} ms per command`,
      target: "< +40 ms",
    });
    const bare = await time(() => spawnSync(bash, ["-c", command], { cwd: dir }), Math.max(RUNS, 15));
    row("sandbox", "bare bash -c (spawnSync)", bare, bare);
    const plan = await shell.planSandbox(
      {
        userId: "bench",
        chatId: null,
        workingDirectory: dir,
        dataDir: join(dir, "data"),
        settings: { enabled: true, values: {} },
      },
      dir,
      "bench",
    );
    const filterFile = join(dir, "seccomp.bpf");
    writeFileSync(filterFile, plan.seccomp);
    const bareBoxed = await time(
      () => {
        const fd = openSync(filterFile, "r");
        try {
          const r = spawnSync(probe.bwrap, [...plan.args, "--", bash, "-c", command], {
            cwd: dir,
            stdio: ["ignore", "pipe", "pipe", fd],
          });
          if (r.status !== 0) throw new Error(`bwrap failed: ${r.stderr}`);
          return r;
        } finally {
          closeSync(fd);
        }
      },
      Math.max(RUNS, 15),
    );
    row("sandbox", "bare bwrap … bash -c (same profile)", bareBoxed, bare, {
      note: `+${(bareBoxed.ms - bare.ms).toFixed(1)} ms per command`,
    });
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.env.BENCH_WRITE !== "0" && ONLY.size === ALL_GROUPS.split(",").length) {
  const fmt = (r, v) => (r.unit === "µs" ? v.toFixed(2) : r.unit.endsWith("/s") ? v.toFixed(0) : v.toFixed(1));
  const md = [
    "# Benchmarks",
    "",
    "Generated by `npm run bench` (bench/run.mjs). Never part of `npm test`; tests never assert timings.",
    "",
    "## Method",
    "",
    `- Machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}. The machine is shared, so absolute numbers are noisy: compare the ratios, which are measured side by side in the same run.`,
    `- Each case runs once to warm caches, then ${RUNS} times; the table gives the median and the spread [min–max]. The grep and glob tools run in alternation with their reference (one run of each per round), so changing load falls on both alike.`,
    "- Ratio = case / reference in the same group. For times (ms, µs) lower is better; for throughput (req/s) it is the share of the reference's throughput, higher is better.",
    "- Tools are called as a host calls them: `ToolRuntime.executeTool` with a settings store and the default protected paths (Toolhost's own installation), on a hard-linked copy of `node_modules` outside the installation.",
    `- grep: pattern \`${PATTERN}\`, maxResults 5000, maxMatchesPerFile 20, default rules (skip dotfiles, .gitignore, .git, files over 1 MB, binary). Reference: ripgrep with the flags the tool passes, text output to a pipe.`,
    "- glob: `**/package.json`, maxResults 5000 (a full walk), dotfiles off, symlinks not followed. Reference: fdir + picomatch (fdir's async crawl, picomatch on each file's relative path, dot directories not entered); the run checks that the tool, the reference and tinyglobby return the same set of paths.",
    "- grep and glob notes give the CPU time (this process's threads plus children such as ripgrep, mean per run) relative to the reference: on a busy machine the wall-clock ratio is noisy, the CPU ratio much less.",
    "- grep and glob run with the result cap at its ceiling (maxResultBytes 1 MiB, maxResultLines 100,000), so the whole result is returned inline and the numbers compare whole searches.",
    "- cli: CPU time (user + sys) of the whole child process, from bash's `times`. Reference: `node -e 0`.",
    "- http: `GET /api/settings/tools` with a valid bearer token, 16 keep-alive connections from a separate load process (bench/load.mjs, undici), 3 rounds alternating with the reference: bare Hono on @hono/node-server serving the same bytes. Execute: `POST /api/tools/read_file/execute` of a 12 KB file (the whole path: auth, body limits, approval gate, settings, path policy, read, audit) vs bare Hono reading the same file from disk per request.",
    "- mcp: `toolhost mcp` and the reference filesystem MCP server (`@modelcontextprotocol/server-filesystem`) started side by side, each driven over stdio by the official SDK client (`@modelcontextprotocol/sdk` Client, sequential calls); the same 12 KB file (`read_file` vs `read_text_file`) and the same folder of 200 entries (`list_directory`); rounds of 200 calls alternate between the servers (bench/mcp.mjs).",
    "- turn: one agent turn — the model streams five read_file calls, then a text answer — through Toolhost's tool loop (runToolLoop with the approval gate a chat turn uses) vs the Vercel AI SDK's streamText with the same tools from toolhost/ai-sdk (so both run each call through the same policy, executeTool and audit) and the same two steps from the SDK's MockLanguageModelV3; CPU time per turn, rounds alternating (bench/turn.mjs).",
    "- grep at default settings: the same search with the default cap (48 KiB, 2000 lines), so the result is cut and the rest written to a spill file; it alternates with ripgrep and the ceiling case.",
    "- call: executeTool of a no-op tool (argument parsing, settings resolution, budget timer, metrics) vs calling its function directly, 20,000 calls per run.",
    '- sandbox: the bash tool through executeTool running `echo hello; ls >/dev/null` in a temp directory with `sandbox: "required"` (bwrap with the default profile and the seccomp filter) vs `sandbox: "off"`, at least 15 runs; plus bare `bwrap … bash -c` vs bare `bash -c` with spawnSync. The note gives the milliseconds the sandbox adds per command (target: under 40 ms).',
    "",
    "## Results",
    "",
    "| group | case | median | spread | unit | ratio | target | notes |",
    "| --- | --- | ---: | --- | --- | ---: | --- | --- |",
    ...rows.map(
      (r) =>
        `| ${r.group} | ${r.name} | ${fmt(r, r.median)} | ${fmt(r, r.min)}–${fmt(r, r.max)} | ${r.unit} | ${r.ratio.toFixed(2)}x | ${r.target} | ${r.note} |`,
    ),
    "",
  ];
  // Sections measured by other scripts (bench/multi-instance.ts writes "## Several instances") are kept.
  const previous = existsSync(join(ROOT, "BENCHMARKS.md")) ? readFileSync(join(ROOT, "BENCHMARKS.md"), "utf8") : "";
  const kept = previous.indexOf("\n## Several instances");
  if (kept >= 0) md.push(previous.slice(kept + 1));
  writeFileSync(join(ROOT, "BENCHMARKS.md"), md.join("\n"));
  console.log("wrote BENCHMARKS.md");
}
