/**
 * Several real `toolhost serve` processes on one PostgreSQL database (the suite's throwaway cluster), each with its
 * own data directory, behind no load balancer: the test sends each request to the instance it chooses. One fake
 * model (a dispatcher keyed on the user's message) serves them all. What must hold: one executor per turn (two
 * posts at once through two instances: one 409 chat_busy, nothing lost or doubled), signals across instances (a chat
 * cancel and an agent cancel stop a real `sleep` run by another instance; an approval answered on one instance lets
 * the turn waiting on another continue), events resumed on another instance with Last-Event-ID, and takeover: an
 * owner SIGKILLed (or SIGTERMed) mid-turn, the turn completed by another instance, its first tool call run exactly
 * once — and likewise a turn's running sub-agent, resumed from its journal with the turn, its parent's agent_spawn
 * answered with its result.
 */
import { readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import {
  type FakeProvider,
  type FakeRequest,
  type FakeTurnAction,
  startFakeProvider,
} from "../fakes/provider-server.js";
import { freshPostgresDatabase } from "../helpers/postgres.js";
import { killAll, sleeping, sleepingUnder } from "../helpers/processes.js";
import { tempDir } from "../helpers/temp.js";
import { until } from "../helpers/until.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "./chat-process.js";

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

interface Instance {
  p: CliProcess;
  url: string;
}

let databaseUrl: string;
let work: string;
let fake: FakeProvider;
const instances: Instance[] = [];
const tokens: Record<string, string> = {};

const uniqueMarker = () => `${300 + Math.floor(Math.random() * 100)}.${process.pid}${Math.floor(Math.random() * 1e6)}`;

/** The shared polling helper with this file's patience (the instances run real processes on a busy machine). */
async function waitUntil(what: string, check: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  await until(check, what, { timeoutMs: ms, intervalMs: 25 });
}

/**
 * Whether a `sleep <marker>` runs under one of the instances: a look at their descendants, cheap enough to poll
 * every 25 ms (a scan of every process, {@link sleeping}, costs ~15 ms on a busy machine).
 */
const sleepStarted = (marker: string) =>
  sleepingUnder(
    instances.map((i) => i.p.child.pid!),
    marker,
  ).length > 0;

/**
 * Waits until no `sleep <marker>` is left anywhere on the machine: first until none runs under the instances (the
 * cheap look), then until a scan of every process finds none either (an orphaned sleep is no instance's
 * descendant), looking every 100 ms.
 */
async function sleepGone(what: string, marker: string): Promise<void> {
  await waitUntil(what, () => !sleepStarted(marker));
  await until(() => sleeping(marker).length === 0, what, { timeoutMs: 60_000, intervalMs: 100 });
}

/** The fake model: what it does depends on the user's message and how many tool results it has seen. */
function dispatch(request: FakeRequest): FakeTurnAction {
  const userTexts = (request.body?.input ?? [])
    .filter((item: { role?: string }) => item.role === "user")
    .map((item: { content?: unknown }) =>
      typeof item.content === "string" ? item.content : JSON.stringify(item.content ?? ""),
    );
  const task = String(userTexts.at(-1) ?? "");
  const seen = request.lastToolResults.length > 0 ? request.toolResults.length : 0;
  const word = (name: string) => new RegExp(`${name} ([\\w.,/-]+)`).exec(task)?.[1];
  if (word("AGENTKILL")) {
    // The root spawns a sub-agent that runs the KILL script; it answers with what the agent answered.
    if (seen === 0)
      return {
        kind: "tools",
        calls: [
          { name: "agent_spawn", arguments: { template: "general", message: `KILL ${word("AGENTKILL")}`, wait: true } },
        ],
      };
    return { kind: "text", text: `agent: ${request.lastToolResults[0]?.content.includes("taken over: true")}` };
  }
  if (word("SLEEP")) {
    if (seen === 0)
      return { kind: "tools", calls: [{ name: "bash", arguments: { command: `sleep ${word("SLEEP")}` } }] };
    return { kind: "text", text: "slept" };
  }
  if (word("AGENT")) {
    if (seen === 0)
      return {
        kind: "tools",
        calls: [
          { name: "agent_spawn", arguments: { template: "general", message: `SLEEP ${word("AGENT")}`, wait: true } },
        ],
      };
    return { kind: "text", text: "agent done" };
  }
  if (word("ASK")) {
    if (seen === 0) return { kind: "tools", calls: [{ name: "bash", arguments: { command: `echo ${word("ASK")}` } }] };
    return { kind: "text", text: `approved: ${request.lastToolResults[0]?.content.includes(word("ASK")!)}` };
  }
  if (word("STEPS")) {
    // Three bash steps (the second takes a moment), then an answer.
    if (seen < 3)
      return {
        kind: "tools",
        calls: [{ name: "bash", arguments: { command: seen === 1 ? "sleep 0.3; echo two" : `echo step${seen}` } }],
      };
    return { kind: "text", text: "three steps" };
  }
  if (word("KILL")) {
    const [file, marker] = word("KILL")!.split(",");
    if (seen === 0)
      return { kind: "tools", calls: [{ name: "bash", arguments: { command: `mktemp ${file}.XXXXXX` } }] };
    if (seen === 1) return { kind: "tools", calls: [{ name: "bash", arguments: { command: `sleep ${marker}` } }] };
    return { kind: "text", text: `taken over: ${request.lastToolResults[0]?.content.includes("interrupted")}` };
  }
  return { kind: "text", text: "hello there" };
}

function startInstance(name: string): Promise<Instance> {
  const p = startCli(
    ["serve", "--port", "0"],
    cleanEnv({
      TOOLHOST_DATA_DIR: join(work, name),
      TOOLHOST_DATABASE_URL: databaseUrl,
      TOOLHOST_TURN_LEASE_MS: "3000",
      OPENAI_API_KEY: "test-key",
      OPENAI_BASE_URL: fake.baseURL,
      TOOLHOST_ADMIN_USERS: "local,asker",
      ...(process.env.MULTI_DEBUG ? { TOOLHOST_LOG_LEVEL: "info" } : {}),
    }),
  );
  return p
    .waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out))
    .then(() => ({
      p,
      url: /http:\/\/[\d.]+:\d+/.exec(p.stdout())![0],
    }));
}

function api(
  instance: Instance,
  user: string,
  path: string,
  init: { method?: string; json?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {},
) {
  return fetch(`${instance.url}${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers: { authorization: `Bearer ${tokens[user]}`, "content-type": "application/json", ...init.headers },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
    signal: init.signal,
  });
}

interface SseEvent {
  id: string;
  event: string;
  data: any;
}

/** Reads an SSE response, calling `onEvent` for each event; resolves with all of them when it ends. */
async function readSse(res: Response, onEvent: (e: SseEvent) => void = () => {}): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  let buffer = "";
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
    if (done) break;
    buffer += value;
    let cut = buffer.indexOf("\n\n");
    while (cut >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      cut = buffer.indexOf("\n\n");
      const fields: Record<string, string> = {};
      for (const line of block.split("\n")) {
        const at = line.indexOf(":");
        if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1).trimStart();
      }
      if (!fields.event) continue;
      const event = { id: fields.id ?? "", event: fields.event, data: JSON.parse(fields.data ?? "null") };
      events.push(event);
      onEvent(event);
    }
  }
  return events;
}

async function newChat(instance: Instance, user = "local"): Promise<string> {
  const res = await api(instance, user, "/api/chats", {
    json: { provider: "openai", model: "fake-model", workingDirectory: work },
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

beforeAll(async () => {
  assertBuilt();
  work = tempDir();
  databaseUrl = await freshPostgresDatabase();
  fake = await startFakeProvider(
    "openai",
    Array.from({ length: 400 }, () => dispatch),
  );
  const ctx = await createAppContext({ dataDir: join(work, "setup"), databaseUrl });
  try {
    const allow = { admin: true };
    for (const tool of ["bash", "agent_spawn", "agent_wait"])
      await ctx.settings.update("local", tool, { enabled: true, parameters: { approval: "allow" } }, allow);
    await ctx.settings.update("asker", "bash", { enabled: true, parameters: { approval: "ask" } }, allow);
    tokens.local = (await ctx.tokens.create("local", "test")).token;
    tokens.asker = (await ctx.tokens.create("asker", "test")).token;
  } finally {
    await ctx.close();
  }
  instances.push(...(await Promise.all(["a", "b", "c"].map(startInstance))));
});

afterAll(async () => {
  if (process.env.MULTI_DEBUG)
    for (const [n, i] of instances.entries()) writeFileSync(`/tmp/multi-${n}.log`, i.p.stderr() + i.p.stdout());
  for (const i of instances) if (i.p.child.exitCode === null) i.p.child.kill("SIGTERM");
  await Promise.all(instances.map((i) => i.p.exited));
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

describe("several serve instances on one PostgreSQL", () => {
  it("two messages posted to one chat at the same moment through two instances: one 409 chat_busy, the other completes, nothing lost or doubled", async () => {
    const [a, b] = instances as [Instance, Instance];
    for (let round = 0; round < 4; round++) {
      const chatId = await newChat(a);
      const posts = await Promise.all(
        [a, b].map((i) => api(i, "local", `/api/chats/${chatId}/messages`, { json: { content: `hi ${round}` } })),
      );
      const statuses = posts.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 409]);
      const busy = posts.find((r) => r.status === 409)!;
      expect(((await busy.json()) as { error: { code: string } }).error.code).toBe("chat_busy");
      const events = await readSse(posts.find((r) => r.status === 200)!);
      expect(events.at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
      const chat = (await (await api(b, "local", `/api/chats/${chatId}`)).json()) as { messages: { role: string }[] };
      expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    }
  });

  it("POST /api/chats/:id/cancel on another instance stops the turn and kills its running sleep", async () => {
    const [a, b] = instances as [Instance, Instance];
    const marker = uniqueMarker();
    const chatId = await newChat(a);
    const res = await api(a, "local", `/api/chats/${chatId}/messages`, { json: { content: `SLEEP ${marker}` } });
    const events = readSse(res);
    await waitUntil("the sleep to start", () => sleepStarted(marker));
    // Any instance says which instance runs the turn.
    const view = (await (await api(b, "local", `/api/chats/${chatId}`)).json()) as { turn: { owner: string } };
    expect(view.turn.owner.split(":")[1]).toBe(String(a.p.child.pid));
    const cancel = await api(b, "local", `/api/chats/${chatId}/cancel`, { json: {} });
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toMatchObject({ cancelled: true });
    await sleepGone("the sleep to be gone", marker);
    expect((await events).at(-1)).toMatchObject({ event: "done", data: { reason: "aborted" } });
    // Another user's chat is not found; a chat with nothing running reports so.
    expect((await api(b, "asker", `/api/chats/${chatId}/cancel`, { json: {} })).status).toBe(404);
    expect(await (await api(b, "local", `/api/chats/${chatId}/cancel`, { json: {} })).json()).toEqual({
      cancelled: false,
      turnId: null,
    });
  });

  it("POST /api/agents/:id/cancel on another instance stops the sub-agent and kills its running sleep", async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const marker = uniqueMarker();
    const chatId = await newChat(a);
    const res = await api(a, "local", `/api/chats/${chatId}/messages`, { json: { content: `AGENT ${marker}` } });
    const events = readSse(res);
    await waitUntil("the sub-agent's sleep to start", () => sleepStarted(marker));
    const list = (await (await api(c, "local", `/api/agents?chatId=${chatId}`)).json()) as {
      agents: { id: string; status: string; owner: string | null }[];
    };
    const agent = list.agents.find((x) => x.status === "running")!;
    const cancel = await api(b, "local", `/api/agents/${agent.id}/cancel`, { json: {} });
    expect(cancel.status).toBe(200);
    expect((agent as { owner?: string }).owner?.split(":")[1]).toBe(String(a.p.child.pid));
    await sleepGone("the sub-agent's sleep to be gone", marker);
    expect((await events).at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
  });

  it("an MCP notifications/cancelled sent to another instance aborts the call and kills its sleep", async () => {
    const [a, b] = instances as [Instance, Instance];
    const marker = uniqueMarker();
    const headers = { accept: "application/json, text/event-stream", "Toolhost-Working-Directory": work };
    const call = api(a, "local", "/mcp", {
      headers,
      json: {
        jsonrpc: "2.0",
        id: 77,
        method: "tools/call",
        params: { name: "bash", arguments: { command: `sleep ${marker}` } },
      },
    });
    await waitUntil("the sleep to start", () => sleepStarted(marker));
    const cancel = await api(b, "local", "/mcp", {
      headers,
      json: { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 77, reason: "stop" } },
    });
    expect(cancel.status).toBe(202);
    await sleepGone("the sleep to be gone", marker);
    await call.then((r) => r.text()).catch(() => "");
  });

  it("an approval answered on another instance lets the waiting turn continue", async () => {
    const [a, b] = instances as [Instance, Instance];
    const chatId = await newChat(a, "asker");
    const word = `word${Date.now()}`;
    const res = await api(a, "asker", `/api/chats/${chatId}/messages`, { json: { content: `ASK ${word}` } });
    let answered: Promise<Response> | undefined;
    const events = await readSse(res, (e) => {
      if (e.event === "approval_requested")
        answered = api(b, "asker", `/api/approvals/${e.data.approvalId}`, { json: { decision: "allow_once" } });
    });
    expect((await answered!).status).toBe(200);
    expect(events.find((e) => e.event === "tool_result")).toMatchObject({ data: { ok: true } });
    expect(events.at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
    const text = events
      .filter((e) => e.event === "text_delta")
      .map((e) => e.data.delta)
      .join("");
    expect(text).toBe("approved: true");
  });

  it("GET /api/chats/:id/events with Last-Event-ID on another instance replays what followed, then follows the turn to done", async () => {
    const [a, b, c] = instances as [Instance, Instance, Instance];
    const chatId = await newChat(a);
    const res = await api(a, "local", `/api/chats/${chatId}/messages`, { json: { content: "STEPS go" } });
    let resumed: Promise<SseEvent[]> | undefined;
    const original = await readSse(res, (e) => {
      // After the first tool result, a second client picks the stream up on instance B from that event's id.
      if (!resumed && e.event === "tool_result")
        resumed = api(b, "local", `/api/chats/${chatId}/events`, { headers: { "last-event-id": e.id } }).then((r) =>
          readSse(r),
        );
    });
    const cut = original.findIndex((e) => e.event === "tool_result");
    const rest = await resumed!;
    expect(original.at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
    // Ids increase by one; the resumed stream is exactly what followed the cut.
    expect(original.map((e) => Number(e.id))).toEqual(original.map((_, i) => Number(original[0]!.id) + i));
    expect(rest.map((e) => [e.id, e.event])).toEqual(original.slice(cut + 1).map((e) => [e.id, e.event]));
    // ?after= on a third instance, after the turn ended: replays the rest and ends.
    const later = await readSse(await api(c, "local", `/api/chats/${chatId}/events?after=${original[cut]!.id}`));
    expect(later.map((e) => e.data)).toEqual(original.slice(cut + 1).map((e) => e.data));
    expect((await api(c, "local", `/api/chats/${chatId}/events?after=x`)).status).toBe(400);
    expect((await api(c, "asker", `/api/chats/${chatId}/events`)).status).toBe(404);
  });
});

/**
 * Starts, through `owner`, a chat turn whose sub-agent runs the KILL script (a first call that creates one file per
 * run, then a sleep), and resolves once the sub-agent's sleep runs.
 */
async function startAgentTurn(owner: Instance, home: Instance) {
  const marker = uniqueMarker();
  const ranFile = join(work, `ran-${marker}`);
  const chatId = await newChat(home);
  const res = await api(owner, "local", `/api/chats/${chatId}/messages`, {
    json: { content: `AGENTKILL ${ranFile},${marker}` },
  });
  const seen: SseEvent[] = [];
  const stream = readSse(res, (e) => seen.push(e));
  await waitUntil("the sub-agent's sleep to start", () => sleepStarted(marker), 20_000).catch((e) => {
    throw new Error(`${e.message}: ${JSON.stringify(seen)}`);
  });
  return { marker, chatId, seen, stream };
}

/**
 * After the owner of a startAgentTurn turn died or handed it over: a live instance took the turn over and ran its
 * sub-agent to completion — its first call ran once, its interrupted sleep was reported, not re-run — and the chat
 * turn got the agent's answer. `next` is the instance the check reads through.
 */
async function checkAgentTakenOver(turn: Awaited<ReturnType<typeof startAgentTurn>>, next: Instance, gone: Instance) {
  const last = turn.seen.filter((e) => e.event !== "done" && e.event !== "error").at(-1)?.id ?? "0";
  const rest = await readSse(
    await api(next, "local", `/api/chats/${turn.chatId}/events`, { headers: { "last-event-id": last } }),
  );
  expect(rest.at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
  // The sub-agent finished on the new owner; none of its calls ran again there (its sleep's result was the
  // interruption, reported as that call's tool_result); the root's agent_spawn call, run again, answered with that
  // agent's result.
  expect(rest.find((e) => e.event === "agent_finished")).toMatchObject({
    data: { status: "completed", response: "taken over: true" },
  });
  const results = rest.filter((e) => e.event === "tool_result");
  expect(results.map((e) => [e.data.name, e.data.agent?.id ?? null])).toEqual([
    ["bash", expect.any(String)],
    ["agent_spawn", null],
  ]);
  expect(results[0]!.data).toMatchObject({ ok: false, error: { code: "interrupted" } });
  expect(results[1]!.data.result).toMatchObject({ status: "completed", response: "taken over: true" });
  const chat = (await (await api(next, "local", `/api/chats/${turn.chatId}`)).json()) as {
    messages: { role: string; content?: string }[];
  };
  expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  expect(chat.messages.at(-1)!.content).toBe("agent: true");
  expect(readdirSync(work).filter((f) => f.startsWith(`ran-${turn.marker}.`))).toHaveLength(1);
  // One sub-agent, no second spawn; its row and its tree's root name their new owner, a live instance.
  const { agents } = (await (await api(next, "local", `/api/agents?chatId=${turn.chatId}`)).json()) as {
    agents: { id: string; status: string; depth: number }[];
  };
  expect(agents.map((x) => [x.depth, x.status])).toEqual([[1, "completed"]]);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const rows = await client.query("select kind, instance_id from agents where chat_id = $1 order by depth", [
      turn.chatId,
    ]);
    const owners = rows.rows.map((r) => Number(r.instance_id.split(":")[1]));
    expect(rows.rows.map((r) => r.kind)).toEqual(["root", "child"]);
    expect(owners[0]).toBe(owners[1]);
    expect(owners[0]).not.toBe(gone.p.child.pid);
    expect(instances.filter((i) => i.p.child.exitCode === null).map((i) => i.p.child.pid)).toContain(owners[0]);
  } finally {
    await client.end();
  }
}

// Last: it kills instance A.
describe("takeover", () => {
  it("an owner SIGKILLed mid-turn: another instance takes the turn (and a turn's running sub-agent) over, its finished first call is not run again, the interrupted one not re-run", async () => {
    const [a, b] = instances as [Instance, Instance];
    const marker = uniqueMarker();
    // Each run of the first call creates one file named after it.
    const ranFile = join(work, `ran-${marker}`);
    const chatId = await newChat(b);
    const res = await api(a, "local", `/api/chats/${chatId}/messages`, {
      json: { content: `KILL ${ranFile},${marker}` },
    });
    const seen: SseEvent[] = [];
    const stream = readSse(res, (e) => seen.push(e));
    // A second turn on A, whose sub-agent runs the same script: it moves with its turn.
    const agentTurn = startAgentTurn(a, b);
    await waitUntil("the second call's sleep to start", () => sleepStarted(marker), 20_000).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(seen)}`);
    });
    const agent = await agentTurn;
    a.p.child.kill("SIGKILL");
    await a.p.exited;
    await Promise.all([stream, agent.stream]);
    killAll([...sleeping(marker), ...sleeping(agent.marker)]);
    const agentChecked = checkAgentTakenOver(agent, b, a);
    // Follow the turn on B from the last event A delivered, until the instance that took it over ends it.
    const last = seen.at(-1)?.id ?? "0";
    const rest = await readSse(
      await api(b, "local", `/api/chats/${chatId}/events`, { headers: { "last-event-id": last } }),
    );
    expect(rest.at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
    // Nothing ran again after the takeover: the interrupted call's result was fed back, not produced by a run, and
    // its followers got it as the call's tool_result (the call had started on A, which never reported its end).
    const results = rest.filter((e) => e.event === "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]?.data).toMatchObject({ ok: false, error: { code: "interrupted" } });
    const chat = (await (await api(b, "local", `/api/chats/${chatId}`)).json()) as {
      messages: { role: string; content?: string; results?: { content: string }[] }[];
    };
    expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "tool", "assistant"]);
    expect(chat.messages[4]!.results![0]!.content).toContain("interrupted");
    expect(chat.messages.at(-1)!.content).toBe("taken over: true");
    expect(readdirSync(work).filter((f) => f.startsWith(`ran-${marker}.`))).toHaveLength(1);
    await agentChecked;
  });
  it("a graceful shutdown (SIGTERM) hands the running turn (and a turn's running sub-agent) over: another instance completes it, nothing run twice", async () => {
    const [, b, c] = instances as [Instance, Instance, Instance];
    const marker = uniqueMarker();
    const ranFile = join(work, `ran-${marker}`);
    const chatId = await newChat(c);
    const res = await api(b, "local", `/api/chats/${chatId}/messages`, {
      json: { content: `KILL ${ranFile},${marker}` },
    });
    const seen: SseEvent[] = [];
    const stream = readSse(res, (e) => seen.push(e));
    const agentTurn = startAgentTurn(b, c);
    await waitUntil("the second call's sleep to start", () => sleepStarted(marker));
    const agent = await agentTurn;
    b.p.child.kill("SIGTERM");
    expect(await b.p.exited).toBe(0);
    await Promise.all([stream, agent.stream]);
    expect(seen.find((e) => e.event === "error")).toMatchObject({ data: { code: "handed_over" } });
    expect(agent.seen.find((e) => e.event === "error")).toMatchObject({ data: { code: "handed_over" } });
    expect(sleeping(marker)).toEqual([]);
    expect(sleeping(agent.marker)).toEqual([]);
    const agentChecked = checkAgentTakenOver(agent, c, b);
    const last = seen.filter((e) => e.event !== "done" && e.event !== "error").at(-1)?.id ?? "0";
    const rest = await readSse(
      await api(c, "local", `/api/chats/${chatId}/events`, { headers: { "last-event-id": last } }),
    );
    expect(rest.at(-1)).toMatchObject({ event: "done", data: { reason: "text" } });
    const chat = (await (await api(c, "local", `/api/chats/${chatId}`)).json()) as {
      messages: { role: string; content?: string }[];
    };
    expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "tool", "assistant"]);
    expect(chat.messages.at(-1)!.content).toBe("taken over: true");
    expect(readdirSync(work).filter((f) => f.startsWith(`ran-${marker}.`))).toHaveLength(1);
    await agentChecked;
  });
});
