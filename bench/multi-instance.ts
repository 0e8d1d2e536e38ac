/**
 * Several `toolhost serve` instances on one PostgreSQL (a throwaway cluster), with the fake OpenAI provider of the
 * test suite (test/fakes): what coordination across instances costs. Run: `npm run build && npx tsx
 * bench/multi-instance.ts` (never part of npm test). Prints Markdown rows for BENCHMARKS.md:
 *   - cancel latency: POST /api/chats/:id/cancel sent to instance B while instance A runs a real `sleep`, until
 *     that process is gone (p50/p99 over BENCH_TRIALS trials, default 50);
 *   - approval latency: POST /api/approvals/:id sent to B while A's turn waits, until A's stream shows the call's
 *     result (the turn continued);
 *   - chat turns per second with 1, 2 and 3 instances (BENCH_CLIENTS concurrent clients, default 8, spread round
 *     robin over the instances; each turn one model request answered with text), BENCH_MS per run, the three
 *     configurations interleaved over BENCH_ROUNDS rounds (default 3) and each reported as its median.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAppContext } from "../src/app/context.js";
import { type FakeRequest, type FakeTurnAction, startFakeProvider } from "../test/fakes/provider-server.js";
import { BIN } from "../test/helpers/cli.js";
import { launchPostgres } from "../test/helpers/postgres.js";

const TRIALS = Number(process.env.BENCH_TRIALS ?? 50);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const LOAD_MS = Number(process.env.BENCH_MS ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const work = mkdtempSync(join(tmpdir(), "toolhost-bench-multi-"));
const tokens: Record<string, string> = {};

function dispatch(request: FakeRequest): FakeTurnAction {
  const items = (request.body?.input ?? []) as { role?: string; content?: unknown }[];
  const task = JSON.stringify(items.filter((i) => i.role === "user").at(-1)?.content ?? "");
  const seen = request.lastToolResults.length;
  const sleep = /SLEEP ([\w.]+)/.exec(task)?.[1];
  if (sleep && seen === 0)
    return { kind: "tools", calls: [{ name: "bash", arguments: { command: `sleep ${sleep}` } }] };
  if (/ASK/.test(task) && seen === 0)
    return { kind: "tools", calls: [{ name: "bash", arguments: { command: "echo ok" } }] };
  return { kind: "text", text: "hello there" };
}

interface Instance {
  child: ChildProcess;
  url: string;
}

function startInstance(name: string, databaseUrl: string, baseURL: string): Promise<Instance> {
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0"], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TOOLHOST_DATA_DIR: join(work, name),
      TOOLHOST_DATABASE_URL: databaseUrl,
      TOOLHOST_LOG_LEVEL: "error",
      TOOLHOST_ADMIN_USERS: "local,asker",
      OPENAI_API_KEY: "bench",
      OPENAI_BASE_URL: baseURL,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const url = /http:\/\/[\d.]+:\d+/.exec(out)?.[0];
      if (url) resolve({ child, url });
    });
    child.once("exit", (code) => reject(new Error(`instance ${name} exited (${code})`)));
  });
}

function api(i: Instance, user: string, path: string, json?: unknown): Promise<Response> {
  return fetch(`${i.url}${path}`, {
    method: json === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${tokens[user]}`, "content-type": "application/json" },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
}

async function newChat(i: Instance, user = "local"): Promise<string> {
  const res = await api(i, user, "/api/chats", { provider: "openai", model: "fake", workingDirectory: work });
  return ((await res.json()) as { id: string }).id;
}

/** Calls `onEvent(type, data)` for each SSE event until the stream ends. */
async function readSse(res: Response, onEvent: (type: string, data: any) => void = () => {}): Promise<void> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
    if (done) return;
    buffer += value;
    for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (type) onEvent(type, data ? JSON.parse(data) : null);
    }
  }
}

function sleepPid(marker: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv[0]?.endsWith("sleep") && argv[1] === marker) return Number(entry);
    } catch {
      // gone
    }
  }
  return undefined;
}

function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.includes(") Z");
  } catch {
    return true;
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

async function cancelLatency(a: Instance, b: Instance): Promise<number[]> {
  const samples: number[] = [];
  for (let t = 0; t < TRIALS; t++) {
    const marker = `${500 + t}.${process.pid}${t}`;
    const chatId = await newChat(a);
    const stream = readSse(await api(a, "local", `/api/chats/${chatId}/messages`, { content: `SLEEP ${marker}` }));
    let pid = sleepPid(marker);
    while (!pid) {
      await pause(5);
      pid = sleepPid(marker);
    }
    const t0 = performance.now();
    await api(b, "local", `/api/chats/${chatId}/cancel`, {});
    while (!gone(pid)) await pause(1);
    samples.push(performance.now() - t0);
    await stream;
  }
  return samples;
}

async function approvalLatency(a: Instance, b: Instance): Promise<number[]> {
  const samples: number[] = [];
  for (let t = 0; t < TRIALS; t++) {
    const chatId = await newChat(a, "asker");
    let t0 = 0;
    let answer: Promise<Response> | undefined;
    let continued = 0;
    await readSse(await api(a, "asker", `/api/chats/${chatId}/messages`, { content: "ASK" }), (type, data) => {
      if (type === "approval_requested") {
        t0 = performance.now();
        answer = api(b, "asker", `/api/approvals/${data.approvalId}`, { decision: "allow_once" });
      }
      if (type === "tool_result" && !continued) continued = performance.now();
    });
    await answer;
    samples.push(continued - t0);
  }
  return samples;
}

async function throughput(targets: Instance[]): Promise<number> {
  const chats = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => newChat(targets[i % targets.length]!)));
  let turns = 0;
  const end = performance.now() + LOAD_MS;
  const start = performance.now();
  await Promise.all(
    chats.map(async (chatId, i) => {
      let n = 0;
      while (performance.now() < end) {
        const target = targets[(i + n++) % targets.length]!;
        const res = await api(target, "local", `/api/chats/${chatId}/messages`, { content: "hello" });
        if (res.status !== 200) throw new Error(`turn refused: ${res.status} ${await res.text()}`);
        await readSse(res);
        turns++;
      }
    }),
  );
  return turns / ((performance.now() - start) / 1000);
}

async function main(): Promise<void> {
  if (!existsSync(BIN)) throw new Error("Run `npm run build` first.");
  const cluster = await launchPostgres();
  await cluster.started;
  const fake = await startFakeProvider(
    "openai",
    Array.from({ length: 1_000_000 }, () => dispatch),
  );
  const instances: Instance[] = [];
  try {
    const ctx = await createAppContext({ dataDir: join(work, "setup"), databaseUrl: cluster.url });
    try {
      await ctx.settings.update("local", "bash", { enabled: true, parameters: { approval: "allow" } }, { admin: true });
      await ctx.settings.update("asker", "bash", { enabled: true, parameters: { approval: "ask" } }, { admin: true });
      tokens.local = (await ctx.tokens.create("local", "bench")).token;
      tokens.asker = (await ctx.tokens.create("asker", "bench")).token;
    } finally {
      await ctx.close();
    }
    instances.push(...(await Promise.all(["a", "b", "c"].map((n) => startInstance(n, cluster.url, fake.baseURL)))));
    const [a, b] = instances as [Instance, Instance];
    if (process.env.BENCH_SERIAL) {
      const chatId = await newChat(a);
      for (let i = 0; i < 8; i++) {
        const t0 = performance.now();
        const marks: string[] = [];
        await readSse(await api(a, "local", `/api/chats/${chatId}/messages`, { content: "hello" }), (type) =>
          marks.push(`${type}@${(performance.now() - t0).toFixed(0)}`),
        );
        console.log(`turn ${i}: ${(performance.now() - t0).toFixed(1)} ms ${marks.join(" ")}`);
      }
      return;
    }
    const rows: string[] = [];
    const latencyRow = (name: string, samples: number[]) =>
      `| multi | ${name} | ${percentile(samples, 50).toFixed(1)} | p99 ${percentile(samples, 99).toFixed(1)} | ms | | ≤ 1000 ms | ${samples.length} trials, max ${Math.max(...samples).toFixed(1)} ms |`;
    rows.push(latencyRow("chat cancel through instance B until A's `sleep` is gone", await cancelLatency(a, b)));
    rows.push(latencyRow("approval answered on B until A's turn runs the call", await approvalLatency(a, b)));
    // Warm-up, then the configurations interleaved over ROUNDS rounds (1, 2, 3, 1, 2, 3, …), each reported as the
    // median of its rounds: a load that drifts on a shared machine then weighs on every configuration alike.
    await throughput([a]);
    const samples: number[][] = [[], [], []];
    for (let round = 0; round < ROUNDS; round++) {
      for (const n of [1, 2, 3]) samples[n - 1]!.push(await throughput(instances.slice(0, n)));
    }
    const rates = samples.map((runs) => percentile(runs, 50));
    for (const [i, rate] of rates.entries()) {
      rows.push(
        `| multi | chat turns/s, ${i + 1} instance${i ? "s" : ""} (fake provider, ${CLIENTS} clients) | ${rate.toFixed(1)} | | turns/s | ${(rate / rates[0]!).toFixed(2)}x | ${i === 1 ? "≥ 0.9x" : ""} | median of ${ROUNDS} rounds: ${samples[i]!.map((r) => r.toFixed(1)).join(", ")} |`,
      );
    }
    console.log(rows.join("\n"));
  } finally {
    for (const i of instances) i.child.kill("SIGTERM");
    await pause(500);
    await fake.close();
    cluster.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
