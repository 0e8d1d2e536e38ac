/**
 * What a hostile second user learns from the HTTP API: nothing about resources that are not theirs. Table-driven
 * over every per-user route of the OpenAPI document (a new route under /api/chats, /api/approvals, /api/agents or
 * /api/images is covered by adding nothing; a route under another prefix fails until it has a fixture): another
 * user's resource, in each state it can be in, answers exactly as a missing one does (status, code, message).
 * Also: admin routes validate user ids by the CLI's rule, and every route answers a malformed query `bad_request`.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildOpenApiDocument } from "../../src/server/openapi.js";
import { agentOpenApiPaths } from "../../src/server/routes/agents.js";
import { approvalOpenApiPaths } from "../../src/server/routes/approvals.js";
import { chatOpenApiPaths } from "../../src/server/routes/chats.js";
import { type FakeProvider, startFakeProvider } from "../fakes/provider-server.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
let alice: string;
let mallory: string;
/** Alice's resources by the first path segment after /api: each state a resource of hers can be in. */
const owned: Record<string, { label: string; id: string }[]> = {};
let fake: FakeProvider;
const turnAbort = new AbortController();
/**
 * The running turn's response, its body never read: kept reachable for the whole file, since fetch cancels the body
 * of a response that is garbage collected, and the server then sees the client go and stops the turn.
 */
let runningTurn: Response | undefined;

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

beforeAll(async () => {
  fake = await startFakeProvider("openai", [{ kind: "stall" }]);
  process.env.OPENAI_API_KEY = "test-key";
  process.env.OPENAI_BASE_URL = fake.baseURL;
  server = await startTestServer();
  alice = (await server.ctx.tokens.create("alice")).token;
  mallory = (await server.ctx.tokens.create("mallory")).token;
  const { ctx } = server;
  const db = ctx.database.db;
  const at = new Date().toISOString();

  const idle = await ctx.chats.create({ userId: "alice", provider: "openai", model: "m" });
  const running = await ctx.chats.create({ userId: "alice", provider: "openai", model: "m" });
  // A turn whose model never answers: the chat is running (in this process) until the stream is cancelled.
  const turn = await server.api(`/api/chats/${running.id}/messages`, {
    method: "POST",
    token: alice,
    json: { content: "hi" },
    signal: turnAbort.signal,
  });
  expect(turn.status).toBe(200);
  runningTurn = turn;
  owned.chats = [
    { label: "idle chat", id: idle.id },
    { label: "running chat", id: running.id },
  ];

  const approval = (id: string, status: string) => ({
    id,
    userId: "alice",
    chatId: idle.id,
    turnId: null,
    toolCallId: "c1",
    tool: "write_file",
    argsHash: "h",
    preview: "write_file notes.txt",
    rule: null,
    reason: "approval: ask",
    candidates: [],
    agentPath: null,
    workingDirectory: null,
    status: status as "pending",
    decision: null,
    message: null,
    decidedBy: null,
    decidedAt: null,
    createdAt: at,
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    hmac: "x",
  });
  const pending = randomUUID();
  const decided = randomUUID();
  await ctx.approvals.repository.create(approval(pending, "pending"));
  await ctx.approvals.repository.create(approval(decided, "denied"));
  owned.approvals = [
    { label: "pending approval", id: pending },
    { label: "decided approval", id: decided },
  ];

  const root = randomUUID();
  const agentRow = (id: string, kind: string, status: string) => ({
    id,
    user_id: "alice",
    chat_id: idle.id,
    kind,
    root_id: root,
    parent_id: kind === "root" ? null : root,
    depth: kind === "root" ? 0 : 1,
    path: kind === "root" ? root : `${root}/${id}`,
    template: "chat",
    provider: null,
    model: null,
    status,
    task: "t",
    result: null,
    note: null,
    transcript: "[]",
    input_tokens: 0,
    output_tokens: 0,
    turns: 0,
    tool_calls: 0,
    duration_ms: 0,
    children_count: 0,
    tree_count: 0,
    active_count: 0,
    tree_tokens: 0,
    queue_depth: 0,
    max_turns: 1,
    time_ms: 1000,
    instance_id: null,
    heartbeat_at: null,
    created_at: at,
    updated_at: at,
    finished_at: null,
  });
  const child = randomUUID();
  const done = randomUUID();
  await db
    .insertInto("agents")
    .values([agentRow(root, "root", "running"), agentRow(child, "child", "running"), agentRow(done, "child", "done")])
    .execute();
  owned.agents = [
    { label: "root agent", id: root },
    { label: "running sub-agent", id: child },
    { label: "finished sub-agent", id: done },
  ];

  const image = randomUUID();
  mkdirSync(join(server.dataDir, "images"), { recursive: true });
  writeFileSync(join(server.dataDir, "images", `${image}.png`), PNG);
  await db
    .insertInto("images")
    .values({
      id: image,
      user_id: "alice",
      chat_id: null,
      path: `images/${image}.png`,
      mime_type: "image/png",
      prompt: "p",
      model: null,
      created_at: at,
    })
    .execute();
  owned.images = [{ label: "image", id: image }];
});

afterAll(async () => {
  await runningTurn?.body?.cancel().catch(() => {});
  turnAbort.abort();
  await server?.stop();
  await fake?.close();
});

/** A valid body per route, so that a refusal cannot come from the body instead of the ownership check. */
const BODIES: Record<string, unknown> = {
  "PATCH /api/chats/{id}": { title: "mine now" },
  "POST /api/chats/{id}/messages": { content: "hello" },
  "POST /api/approvals/{id}": { decision: "allow_once" },
};

/** Every (method, path) of the OpenAPI document that names one per-user resource by `{id}`. */
function perUserRoutes(): { method: string; path: string }[] {
  const doc = buildOpenApiDocument("test", { ...chatOpenApiPaths, ...approvalOpenApiPaths, ...agentOpenApiPaths }) as {
    paths: Record<string, Record<string, unknown>>;
  };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    path.includes("{id}") && !path.startsWith("/api/admin/")
      ? Object.keys(ops).map((method) => ({ method: method.toUpperCase(), path }))
      : [],
  );
}

async function answer(token: string, method: string, path: string, id: string) {
  const body = BODIES[`${method} ${path}`];
  const res = await server.api(path.replace("{id}", id), {
    method,
    token,
    ...(body === undefined ? {} : { json: body }),
  });
  const text = await res.text();
  let error: { code?: string; message?: string } | undefined;
  try {
    error = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
  } catch {}
  return {
    status: res.status,
    code: error?.code,
    message: error?.message?.split(id).join("<id>"),
  };
}

describe("another user's resource answers exactly like a missing one", () => {
  const routes = perUserRoutes();

  it("the table covers the per-user routes of the document", () => {
    expect(routes.length).toBeGreaterThanOrEqual(8);
    for (const { path } of routes) {
      const kind = path.split("/")[2] ?? "";
      expect(owned[kind], `no fixture of alice's for ${path}: add one to this test`).toBeDefined();
    }
  });

  it.concurrent.each(perUserRoutes())("$method $path", async ({ method, path }) => {
    const kind = path.split("/")[2] ?? "";
    const missing = await answer(mallory, method, path, randomUUID());
    expect(missing.status, JSON.stringify(missing)).toBeGreaterThanOrEqual(400);
    for (const { label, id } of owned[kind] ?? []) {
      expect(await answer(mallory, method, path, id), `alice's ${label}`).toEqual(missing);
    }
  });

  it("ids in bodies too: the tool-execute route with alice's approval or chat answers like with a missing one", async () => {
    const execute = async (extra: Record<string, string>) => {
      const res = await server.api("/api/tools/read_file/execute", {
        method: "POST",
        token: mallory,
        json: { arguments: { path: "/etc/hostname" }, ...extra },
      });
      const body = JSON.stringify(await res.json());
      return { status: res.status, body: Object.values(extra).reduce((t, id) => t.split(id).join("<id>"), body) };
    };
    for (const { id } of owned.approvals ?? [])
      expect(await execute({ approvalId: id })).toEqual(await execute({ approvalId: randomUUID() }));
    for (const { id } of owned.chats ?? [])
      expect(await execute({ chatId: id })).toEqual(await execute({ chatId: randomUUID() }));
  });

  it("the fixtures are real: alice reaches her resources", async () => {
    for (const [kind, resources] of Object.entries(owned)) {
      const readable = kind === "agents" ? resources.filter((r) => r.label !== "root agent") : resources;
      for (const { id, label } of readable) {
        const path = kind === "approvals" ? `/api/chats/${owned.chats?.[0]?.id}/approvals` : `/api/${kind}/${id}`;
        expect((await server.api(path, { token: alice })).status, label).toBe(200);
      }
    }
    // Alice's own running chat is busy for her (the state is real), a 404 for anyone else (above).
    const busy = await server.api(`/api/chats/${owned.chats?.[1]?.id}`, { method: "DELETE", token: alice });
    expect(busy.status).toBe(409);
  });
});

/** Every (method, path) of the OpenAPI document. */
function allRoutes(): { method: string; path: string }[] {
  const doc = buildOpenApiDocument("test", { ...chatOpenApiPaths, ...approvalOpenApiPaths, ...agentOpenApiPaths }) as {
    paths: Record<string, Record<string, unknown>>;
  };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((method) => ({ method: method.toUpperCase(), path })),
  );
}

const PUBLIC = new Set(["/api/health", "/api/openapi.json"]);

describe("closed routes answer alike, whatever they would have found", () => {
  /** The path with its parameters filled: a real id of alice's where there is one, a made-up one otherwise. */
  const fill = (path: string, real: boolean) =>
    path
      .replace("{id}", real ? (owned[path.split("/")[2] ?? ""]?.[0]?.id ?? "tok") : randomUUID())
      .replace("{user}", real ? "alice" : "nobody")
      .replace("{toolName}", real ? "read_file" : "no_such_tool")
      .replace("{name}", real ? "srv" : "no-such-server");

  it.concurrent.each(allRoutes().filter((r) => !PUBLIC.has(r.path)))(
    "$method $path: 401 without a token",
    async ({ method, path }) => {
      const answers = await Promise.all(
        [true, false].map(async (real) => {
          const res = await server.api(fill(path, real), { method, token: null });
          return { status: res.status, code: ((await res.json()) as { error: { code: string } }).error.code };
        }),
      );
      expect(answers).toEqual([
        { status: 401, code: "unauthorized" },
        { status: 401, code: "unauthorized" },
      ]);
    },
  );

  it.concurrent.each(allRoutes().filter((r) => r.path.startsWith("/api/admin/") || r.path === "/metrics"))(
    "$method $path: 403 for a non-admin",
    async ({ method, path }) => {
      const answers = await Promise.all(
        [true, false].map(async (real) => {
          const res = await server.api(fill(path, real), { method, token: mallory });
          const { error } = (await res.json()) as { error: { code: string; message: string } };
          return { status: res.status, code: error.code, message: error.message };
        }),
      );
      expect(answers[0]).toMatchObject({ status: 403, code: "access_denied" });
      expect(answers[1]).toEqual(answers[0]);
    },
  );
});

describe("the audit listing's time bounds", () => {
  it("take an ISO-8601 time or a duration ago, as the CLI's --since and --until do", async () => {
    for (const query of ["since=2h", "since=15m&until=0s", "since=7d", "since=2026-12-01T10:00:00Z"]) {
      const res = await server.api(`/api/admin/audit?${query}`);
      expect(res.status, query).toBe(200);
    }
  });
});

describe("malformed queries and user ids", () => {
  it.concurrent.each([
    ["GET", "/api/chats?limit=abc"],
    ["GET", "/api/chats?limit=0"],
    ["GET", "/api/chats?cursor=garbage"],
    ["GET", "/api/agents?limit=x"],
    ["GET", "/api/agents?limit=0"],
    ["GET", "/api/admin/audit?limit=x"],
    ["GET", "/api/admin/audit?kind=other"],
    ["GET", "/api/admin/audit?since=yesterday"],
    ["GET", "/api/admin/audit?since=99999999999999d"],
    ["GET", "/api/admin/audit?user=..%2F..%2Fetc"],
    ["GET", "/api/admin/audit?user=%ZZ"],
    ["GET", "/api/admin/tokens?user=a%20b"],
    ["GET", "/api/admin/users/a%20b/settings/tools"],
    ["GET", "/api/admin/users/..../settings/tools/read_file"],
    ["GET", `/api/admin/users/${"x".repeat(129)}/settings/tools`],
    ["DELETE", "/api/admin/users/%2Fetc/settings/tools/read_file/locks"],
  ])("%s %s → 400 bad_request", async (method, path) => {
    const res = await server.api(path, { method });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("bad_request");
  });

  it("creating a token for a user id the CLI would refuse is a 400 naming the rule", async () => {
    const res = await server.api("/api/admin/tokens", { method: "POST", json: { userId: "..." } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/not only dots/);
  });
});
