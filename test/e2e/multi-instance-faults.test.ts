/**
 * Faults at awkward moments for several real `toolhost serve` processes on one PostgreSQL database: an owner
 * SIGKILLed after it stored a turn's messages but before its lease ended, and other moments a takeover must not run
 * a turn twice. Each instance has its own data directory; one fake model serves them all.
 */
import { rmSync } from "node:fs";
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
import { tempDir } from "../helpers/temp.js";
import { until as untilShared } from "../helpers/until.js";
import { assertBuilt, CLI, type CliProcess, cleanEnv, startCli, startProgram } from "./chat-process.js";

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

interface Instance {
  name: string;
  p: CliProcess;
  url: string;
}

let databaseUrl: string;
let work: string;
let fake: FakeProvider;
let db: pg.Client;
const instances: Instance[] = [];
const tokens: Record<string, string> = {};

/** The shared polling helper with this file's patience (real processes on a machine that may be busy): 60 s. */
const until: typeof untilShared = (check, what, options = {}) =>
  untilShared(check, what, { timeoutMs: 60_000, intervalMs: 25, ...options });

/** The fake model: answers text, counting how often it was asked for each user message. */
const asked = new Map<string, number>();
function dispatch(request: FakeRequest): FakeTurnAction {
  const users = (request.body?.input ?? []).filter((item: { role?: string }) => item.role === "user");
  const last = users.at(-1);
  const task = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
  asked.set(task, (asked.get(task) ?? 0) + 1);
  const ask = /^ASK (\S+)/.exec(task)?.[1];
  if (ask && request.lastToolResults.length === 0)
    return { kind: "tools", calls: [{ name: "bash", arguments: { command: `echo ${ask}` } }] };
  return { kind: "text", text: `answer to ${task}` };
}

/** Starts an instance; `ownPidNamespace`: in a PID namespace of its own (bwrap), on the same host name. */
function startInstance(name: string, ownPidNamespace = false): Promise<Instance> {
  const serve = ["serve", "--port", "0"];
  // Killed with its parent (bwrap, which the test ends with SIGKILL: it does not pass SIGTERM on).
  const bwrap = ["--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--die-with-parent"];
  const p = (
    ownPidNamespace
      ? (args: string[], env: NodeJS.ProcessEnv) =>
          startProgram("bwrap", [...bwrap, process.execPath, CLI, ...args], env)
      : startCli
  )(
    serve,
    cleanEnv({
      TOOLHOST_DATA_DIR: join(work, name),
      TOOLHOST_DATABASE_URL: databaseUrl,
      TOOLHOST_TURN_LEASE_MS: "1500",
      OPENAI_API_KEY: "test-key",
      OPENAI_BASE_URL: fake.baseURL,
      TOOLHOST_ADMIN_USERS: "local",
      TOOLHOST_APPROVAL_STALE_MS: "1000",
    }),
  );
  return p
    .waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out))
    .then(() => ({ name, p, url: /http:\/\/[\d.]+:\d+/.exec(p.stdout())![0] }));
}

function api(instance: Instance, user: string, path: string, init: { method?: string; json?: unknown } = {}) {
  return fetch(`${instance.url}${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers: { authorization: `Bearer ${tokens[user]}`, "content-type": "application/json" },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
}

async function newChat(instance: Instance, user = "local"): Promise<string> {
  const res = await api(instance, user, "/api/chats", {
    json: { provider: "openai", model: "fake-model", workingDirectory: work },
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

async function messagesOf(instance: Instance, chatId: string): Promise<{ role: string; content?: string }[]> {
  const chat = (await (await api(instance, "local", `/api/chats/${chatId}`)).json()) as {
    messages: { role: string; content?: string }[];
  };
  return chat.messages;
}

beforeAll(async () => {
  assertBuilt();
  work = tempDir();
  databaseUrl = await freshPostgresDatabase();
  fake = await startFakeProvider(
    "openai",
    Array.from({ length: 100 }, () => dispatch),
  );
  const ctx = await createAppContext({ dataDir: join(work, "setup"), databaseUrl });
  try {
    tokens.local = (await ctx.tokens.create("local", "test")).token;
    tokens.other = (await ctx.tokens.create("other", "test")).token;
    await ctx.settings.update("local", "bash", { enabled: true, parameters: { approval: "ask" } }, { admin: true });
  } finally {
    await ctx.close();
  }
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  instances.push(...(await Promise.all(["a", "b"].map((name) => startInstance(name)))));
});

afterAll(async () => {
  for (const i of instances) if (i.p.child.exitCode === null) i.p.child.kill(i.name === "f" ? "SIGKILL" : "SIGTERM");
  await Promise.all(instances.map((i) => i.p.exited));
  await db?.end();
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

/**
 * Makes the statement `kind` (an UPDATE or DELETE) on `table` wait, for rows of the chats listed in `hold_<table>`,
 * until the test ends that backend: an owner's transaction held open at the moment the test chooses.
 */
async function holdOn(table: string, kind: "update" | "delete", when: string): Promise<void> {
  await db.query(`create table if not exists hold_${table} (chat_id text primary key)`);
  await db.query(`create or replace function hold_${table}() returns trigger language plpgsql as $$
    begin
      if (${when}) and exists (select 1 from hold_${table} where chat_id = old.chat_id) then
        perform pg_sleep(60);
      end if;
      return ${kind === "delete" ? "old" : "new"};
    end $$`);
  await db.query(
    `create or replace trigger hold_${table} before ${kind} on ${table} for each row execute function hold_${table}()`,
  );
}

/** Waits until a statement on `table` waits in its hold trigger. */
async function heldOn(table: string): Promise<void> {
  await until(
    async () =>
      (await db.query("select 1 from pg_stat_activity where wait_event = 'PgSleep' and query ilike $1", [`%${table}%`]))
        .rowCount === 1,
    `a statement on ${table} to wait in its trigger`,
  );
}

/** Lets every held statement go: ends their backends (their transactions roll back) and the holds. */
async function releaseHolds(table: string): Promise<void> {
  await db.query(`delete from hold_${table}`);
  await db.query("select pg_terminate_backend(pid) from pg_stat_activity where wait_event = 'PgSleep'");
}

describe("an owner killed at an awkward moment", () => {
  it("SIGKILLed after storing the turn's messages, before its lease ended: the turn is not run again, its messages are not stored twice", async () => {
    const [a, b] = instances as [Instance, Instance];
    const chatId = await newChat(a);
    // Ending this chat's lease blocks (the owner's transaction waits in a trigger) until the test lets it go.
    await holdOn("chat_leases", "update", "old.turn_id is not null and new.turn_id is null");
    await db.query("insert into hold_chat_leases values ($1)", [chatId]);
    const content = `once ${Date.now()}`;
    const res = api(a, "local", `/api/chats/${chatId}/messages`, { json: { content } });
    // The turn ran to its end; the end of its lease waits in the trigger.
    await heldOn("chat_leases");
    a.p.child.kill("SIGKILL");
    await a.p.exited;
    await res.then((r) => r.text()).catch(() => "");
    // The dead owner's transaction ends (rolled back: the lease still names the turn).
    await releaseHolds("chat_leases");
    await until(
      async () =>
        (await db.query("select turn_id from chat_leases where chat_id = $1", [chatId])).rows[0]?.turn_id === null,
      "the lease to end",
      { intervalMs: 50 },
    );
    // Stored once: by the dead owner (its messages and the end of its lease in one transaction) or, when that
    // did not commit, by the instance that took the turn over.
    expect((await messagesOf(b, chatId)).map((m) => m.role)).toEqual(["user", "assistant"]);
    expect((await messagesOf(b, chatId)).at(-1)?.content).toBe(`answer to ${content}`);
  });
});

describe("the database connection cut at an awkward moment", () => {
  it("the connection of the transaction that stores a finished turn is cut: the turn is stored anyway, its client told so", async () => {
    const [, b] = instances as [Instance, Instance];
    const chatId = await newChat(b);
    await holdOn("chat_leases", "update", "old.turn_id is not null and new.turn_id is null");
    await db.query("insert into hold_chat_leases values ($1)", [chatId]);
    const content = `cut ${Date.now()}`;
    const res = await api(b, "local", `/api/chats/${chatId}/messages`, { json: { content } });
    const text = res.text();
    await heldOn("chat_leases");
    // As a database restart or failover ends it: the backend goes, the client's connection with it.
    await releaseHolds("chat_leases");
    const stream = await text;
    expect(stream).not.toContain("could not be stored");
    expect(stream).toMatch(/event: done\ndata: \{"type":"done","reason":"text"/);
    expect((await messagesOf(b, chatId)).map((m) => m.role)).toEqual(["user", "assistant"]);
    expect((await db.query("select turn_id from chat_leases where chat_id = $1", [chatId])).rows[0]?.turn_id).toBe(
      null,
    );
  });
});

describe("a turn that asked for an approval", () => {
  it("its owner SIGKILLed after the turn was stored, before its approval state was removed: the turn is not resumed and stored again", async () => {
    const [, b] = instances as [Instance, Instance];
    const c = await startInstance("c");
    instances.push(c);
    const chatId = await newChat(b);
    await holdOn("approval_turns", "delete", "true");
    await db.query("insert into hold_approval_turns values ($1)", [chatId]);
    const content = `ASK w${Date.now()}`;
    const res = await api(c, "local", `/api/chats/${chatId}/messages`, { json: { content } });
    const text = res.text().catch(() => "");
    await until(
      async () => (await db.query("select id from approvals where chat_id = $1", [chatId])).rows[0]?.id,
      "the ask",
    );
    const { id } = (await db.query("select id from approvals where chat_id = $1", [chatId])).rows[0];
    expect((await api(b, "local", `/api/approvals/${id}`, { json: { decision: "allow_once" } })).status).toBe(200);
    // The turn is stored and its lease ended; removing its approval state waits in the trigger.
    await heldOn("approval_turns");
    c.p.child.kill("SIGKILL");
    await c.p.exited;
    await text;
    await releaseHolds("approval_turns");
    const stored = ["user", "assistant", "tool", "assistant"];
    await until(
      async () =>
        (await db.query("select 1 from approval_turns where chat_id = $1 and status != 'done'", [chatId])).rowCount ===
          0 &&
        (await db.query("select turn_id from chat_leases where chat_id = $1", [chatId])).rows[0]?.turn_id === null,
      "the turn to be over",
      { intervalMs: 50 },
    );
    expect((await messagesOf(b, chatId)).map((m) => m.role)).toEqual(stored);
    // The chat takes the next message.
    const next = await api(b, "local", `/api/chats/${chatId}/messages`, { json: { content: "next" } });
    expect(next.status).toBe(200);
    await next.text();
    expect((await messagesOf(b, chatId)).map((m) => m.role)).toEqual([...stored, "user", "assistant"]);
  });
});

describe("a cancel right after an answer", () => {
  it("a turn that waited for approvals after its client left, answered and at once cancelled on another instance, ends cancelled", async () => {
    // The earlier cases killed instances: a fresh one asks, the survivor answers and cancels.
    const b = instances[1]!;
    const a = await startInstance("d");
    instances.push(a);
    for (let round = 0; round < 3; round++) {
      const chatId = await newChat(a);
      const client = new AbortController();
      const res = await fetch(`${a.url}/api/chats/${chatId}/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${tokens.local}`, "content-type": "application/json" },
        body: JSON.stringify({ content: `ASK c${round}` }),
        signal: client.signal,
      });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      for (let seen = ""; !seen.includes("approval_requested"); ) seen += (await reader.read()).value ?? "";
      client.abort();
      const { id } = (await db.query("select id from approvals where chat_id = $1", [chatId])).rows[0];
      await until(
        async () =>
          (
            await db.query(
              "select 1 from approval_turns where chat_id = $1 and owner is not null and heartbeat_at < '2000'",
              [chatId],
            )
          ).rowCount === 1,
        "the turn to be left waiting",
      );
      expect((await api(b, "local", `/api/approvals/${id}`, { json: { decision: "allow_once" } })).status).toBe(200);
      const cancel = await api(b, "local", `/api/chats/${chatId}/cancel`, { json: {} });
      expect(await cancel.json()).toMatchObject({ cancelled: true });
      await until(
        async () =>
          (await db.query("select 1 from approval_turns where chat_id = $1", [chatId])).rowCount === 0 &&
          (await db.query("select turn_id from chat_leases where chat_id = $1", [chatId])).rows[0]?.turn_id == null,
        "the turn to be over",
        { intervalMs: 50 },
      );
      // It ended as a cancelled turn does: its step kept (the approved call and its result), no further model turn.
      expect((await messagesOf(b, chatId)).map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
      const events = await (await api(b, "local", `/api/chats/${chatId}/events`)).text();
      expect(events).toMatch(/"type":"done","reason":"aborted"/);
    }
  });
});

describe("instances on one host in different PID namespaces", () => {
  it("an answer given on an instance in another PID namespace (same host name) does not take a live owner's turn", async () => {
    const owner = instances.find((i) => i.name === "d") ?? (await startInstance("e"));
    const other = await startInstance("f", true);
    instances.push(other);
    const chatId = await newChat(owner);
    const res = await api(owner, "local", `/api/chats/${chatId}/messages`, {
      json: { content: `ASK ns${Date.now()}` },
    });
    const stream = res.text();
    await until(
      async () => (await db.query("select id from approvals where chat_id = $1", [chatId])).rows[0]?.id,
      "the ask",
    );
    const { id } = (await db.query("select id from approvals where chat_id = $1", [chatId])).rows[0];
    expect((await api(other, "local", `/api/approvals/${id}`, { json: { decision: "allow_once" } })).status).toBe(200);
    // The owner's pid does not exist in the other instance's namespace; the owner is alive all the same.
    const text = await stream;
    expect(text).not.toContain("lease_lost");
    expect(text).toMatch(/"type":"done","reason":"text"/);
    expect((await messagesOf(owner, chatId)).map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  });
});
