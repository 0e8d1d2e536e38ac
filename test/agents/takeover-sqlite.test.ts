/**
 * Agent takeover on SQLite (one machine, several processes on one data directory): two real `toolhost serve`
 * processes share a data directory; the one running a chat turn is SIGKILLed while the turn's sub-agent runs its
 * second call (a `sleep`); the other takes the turn over, resumes the sub-agent from its journal — its first call
 * (which creates one file per run) is not run again, the interrupted `sleep` is reported to it, not re-run — and the
 * chat turn gets the agent's answer. The same code paths as on PostgreSQL (test/e2e/multi-instance.test.ts).
 */
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "../e2e/chat-process.js";
import {
  type FakeProvider,
  type FakeRequest,
  type FakeTurnAction,
  startFakeProvider,
} from "../fakes/provider-server.js";
import { killAll, sleeping } from "../helpers/processes.js";
import { tempDir } from "../helpers/temp.js";
import { until } from "../helpers/until.js";

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

let work: string;
let dataDir: string;
let fake: FakeProvider;
let token: string;
const servers: { p: CliProcess; url: string }[] = [];

/** The root spawns an agent; the agent creates a file (mktemp), then sleeps, then says whether it was interrupted. */
function dispatch(request: FakeRequest): FakeTurnAction {
  const users = (request.body?.input ?? []).filter((item: { role?: string }) => item.role === "user");
  const task = JSON.stringify(users.at(-1)?.content ?? "");
  const seen = request.lastToolResults.length > 0 ? request.toolResults.length : 0;
  const args = /AGENT ([\w.,/-]+)/.exec(task)?.[1];
  if (args) {
    if (seen === 0)
      return {
        kind: "tools",
        calls: [{ name: "agent_spawn", arguments: { template: "general", message: `WORK ${args}`, wait: true } }],
      };
    return { kind: "text", text: `agent: ${request.lastToolResults[0]?.content.includes("resumed: true")}` };
  }
  const [file, marker] = (/WORK ([\w.,/-]+)/.exec(task)?.[1] ?? ",").split(",");
  if (seen === 0) return { kind: "tools", calls: [{ name: "bash", arguments: { command: `mktemp ${file}.XXXXXX` } }] };
  if (seen === 1) return { kind: "tools", calls: [{ name: "bash", arguments: { command: `sleep ${marker}` } }] };
  return { kind: "text", text: `resumed: ${request.lastToolResults[0]?.content.includes("interrupted")}` };
}

async function startServer() {
  const p = startCli(
    ["serve", "--port", "0"],
    cleanEnv({
      TOOLHOST_DATA_DIR: dataDir,
      TOOLHOST_TURN_LEASE_MS: "2000",
      OPENAI_API_KEY: "test-key",
      OPENAI_BASE_URL: fake.baseURL,
    }),
  );
  await p.waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out));
  return { p, url: /http:\/\/[\d.]+:\d+/.exec(p.stdout())![0] };
}

beforeAll(async () => {
  assertBuilt();
  work = tempDir();
  dataDir = join(work, "data");
  fake = await startFakeProvider(
    "openai",
    Array.from({ length: 20 }, () => dispatch),
  );
  const ctx = await createAppContext({ dataDir });
  try {
    for (const tool of ["bash", "agent_spawn"])
      await ctx.settings.update("local", tool, { enabled: true, parameters: { approval: "allow" } }, { admin: true });
    token = (await ctx.tokens.create("local", "test")).token;
  } finally {
    await ctx.close();
  }
  servers.push(...(await Promise.all([startServer(), startServer()])));
});

afterAll(async () => {
  for (const s of servers) if (s.p.child.exitCode === null) s.p.child.kill("SIGTERM");
  await Promise.all(servers.map((s) => s.p.exited));
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

it("a serve process SIGKILLed mid-agent on a shared SQLite data directory: the other process completes the agent and the turn", async () => {
  const [a, b] = servers as [(typeof servers)[0], (typeof servers)[0]];
  const api = (url: string, init: RequestInit = {}) =>
    fetch(url, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } });
  const chat = (await (
    await api(`${a.url}/api/chats`, {
      method: "POST",
      body: JSON.stringify({ provider: "openai", model: "fake", workingDirectory: work }),
    })
  ).json()) as { id: string };
  const marker = `${300 + Math.floor(Math.random() * 100)}.${process.pid}${Math.floor(Math.random() * 1e6)}`;
  const ran = join(work, `ran-${marker}`);
  const res = await api(`${a.url}/api/chats/${chat.id}/messages`, {
    method: "POST",
    body: JSON.stringify({ content: `AGENT ${ran},${marker}` }),
  });
  const drained = res.text().catch(() => "");
  // Every 100 ms: each look reads the stat file of every process on the machine, and the sleep lasts minutes.
  await until(() => sleeping(marker).length > 0, "the sub-agent's sleep", { intervalMs: 100 });
  a.p.child.kill("SIGKILL");
  await a.p.exited;
  await drained;
  killAll(sleeping(marker));
  // B replays the chat's stored events and follows the turn it took over to its end.
  const rest = await (await api(`${b.url}/api/chats/${chat.id}/events?after=0`)).text();
  expect(rest).toMatch(/event: done\ndata: \{"type":"done","reason":"text"/);
  const view = (await (await api(`${b.url}/api/chats/${chat.id}`)).json()) as {
    messages: { role: string; content?: string }[];
  };
  expect(view.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  expect(view.messages.at(-1)?.content).toBe("agent: true");
  expect(readdirSync(work).filter((f) => f.startsWith(`ran-${marker}.`))).toHaveLength(1);
  const { agents } = (await (await api(`${b.url}/api/agents?chatId=${chat.id}`)).json()) as {
    agents: { status: string; response: string }[];
  };
  expect(agents).toEqual([expect.objectContaining({ status: "completed", response: "resumed: true" })]);
});
