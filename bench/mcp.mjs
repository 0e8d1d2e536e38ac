#!/usr/bin/env node
/**
 * MCP per-call cost over stdio: `toolhost mcp` vs the reference filesystem MCP server
 * (@modelcontextprotocol/server-filesystem), both driven by the official SDK client (@modelcontextprotocol/sdk)
 * over stdio, with the same 12 KB file and the same 200-entry folder. The servers run side by side and the rounds
 * alternate (one round of each per pass), so load that comes and goes falls on both alike.
 *
 * Used by bench/run.mjs (group "mcp"); run alone for profiling:
 *   node bench/mcp.mjs                       # prints calls/s per case
 *   BENCH_MCP_PROF=dir node bench/mcp.mjs    # toolhost mcp runs with --cpu-prof, profiles written to dir
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(ROOT, JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).bin.toolhost);
const REFERENCE = join(ROOT, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js");

/** The fixture: a 12 KB text file and a folder of 200 entries, in a fresh temporary directory. */
export function mcpFixture() {
  const dir = mkdtempSync(join(tmpdir(), "toolhost-bench-mcp-"));
  const lines = [];
  for (let i = 0; lines.join("\n").length < 12 * 1024; i++) {
    lines.push(`line ${i}: the quick brown fox jumps over the lazy dog ${i * 7919}`);
  }
  writeFileSync(join(dir, "file.txt"), `${lines.join("\n").slice(0, 12 * 1024)}\n`);
  const folder = join(dir, "folder");
  mkdirSync(folder);
  for (let i = 0; i < 200; i++) {
    if (i % 10 === 0) mkdirSync(join(folder, `dir-${i}`));
    else writeFileSync(join(folder, `entry-${String(i).padStart(3, "0")}.txt`), `entry ${i}\n`);
  }
  return { dir, file: join(dir, "file.txt"), folder, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function connect(command, args, env) {
  const client = new Client({ name: "toolhost-bench", version: "1.0.0" });
  const transport = new StdioClientTransport({ command, args, env: { ...process.env, ...env }, stderr: "ignore" });
  await client.connect(transport);
  return { client, pid: transport.pid };
}

/** CPU time (user + system, ms) a process has used so far, from /proc (null where there is no /proc). */
export function processCpuMs(pid) {
  try {
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15 (clock ticks of 10 ms).
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/**
 * Starts both servers over `fx` and returns their clients with the calls to compare:
 * { toolhost: {read, list}, reference: {read, list}, close() }.
 */
export async function startMcpPair(fx, { profileDir } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "toolhost-bench-mcp-data-"));
  const nodeArgs = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const { client: toolhost, pid: toolhostPid } = await connect(
    process.execPath,
    [...nodeArgs, CLI, "mcp", "--cwd", fx.dir],
    { TOOLHOST_DATA_DIR: dataDir },
  );
  const { client: reference, pid: referencePid } = await connect(process.execPath, [REFERENCE, fx.dir], {});
  const check = (result, what) => {
    if (result.isError) throw new Error(`${what} failed: ${JSON.stringify(result.content).slice(0, 300)}`);
    return result;
  };
  const pair = {
    pids: { toolhost: toolhostPid, reference: referencePid },
    toolhost: {
      read: async () =>
        check(await toolhost.callTool({ name: "read_file", arguments: { path: fx.file } }), "read_file"),
      list: async () =>
        check(await toolhost.callTool({ name: "list_directory", arguments: { path: fx.folder } }), "list_directory"),
    },
    reference: {
      read: async () =>
        check(await reference.callTool({ name: "read_text_file", arguments: { path: fx.file } }), "read_text_file"),
      list: async () =>
        check(await reference.callTool({ name: "list_directory", arguments: { path: fx.folder } }), "list_directory"),
    },
    async close() {
      await toolhost.close();
      await reference.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return pair;
}

/** Calls/s of `call` over `n` sequential calls. */
export async function callsPerSecond(call, n) {
  const t = performance.now();
  for (let i = 0; i < n; i++) await call();
  return (n * 1000) / (performance.now() - t);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const fx = mcpFixture();
  const profileDir = process.env.BENCH_MCP_PROF;
  const pair = await startMcpPair(fx, { profileDir });
  const N = Number(process.env.BENCH_MCP_CALLS ?? 300);
  const rounds = Number(process.env.BENCH_RUNS ?? 5);
  for (const kind of ["read", "list"]) {
    await callsPerSecond(pair.toolhost[kind], 50);
    await callsPerSecond(pair.reference[kind], 50);
    const th = [];
    const ref = [];
    const cpu = { toolhost: 0, reference: 0 };
    for (let r = 0; r < rounds; r++) {
      for (const side of ["toolhost", "reference"]) {
        const before = processCpuMs(pair.pids[side]);
        (side === "toolhost" ? th : ref).push(await callsPerSecond(pair[side][kind], N));
        cpu[side] += processCpuMs(pair.pids[side]) - before;
      }
    }
    const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const ratios = th.map((v, i) => v / ref[i]);
    console.log(
      `${kind}: toolhost ${med(th).toFixed(0)} calls/s [${Math.min(...th).toFixed(0)}–${Math.max(...th).toFixed(0)}], reference ${med(ref).toFixed(0)} [${Math.min(...ref).toFixed(0)}–${Math.max(...ref).toFixed(0)}], ratio ${med(ratios).toFixed(2)}x [${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}]; server CPU per call: toolhost ${(cpu.toolhost / (rounds * N)).toFixed(2)} ms, reference ${(cpu.reference / (rounds * N)).toFixed(2)} ms`,
    );
  }
  await pair.close();
  fx.cleanup();
}
