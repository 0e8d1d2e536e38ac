/**
 * Hostile request lines, on SQLite and on PostgreSQL (whose text columns refuse a NUL character): a NUL in an id, a
 * name or a filter (in the URL or in a body) is a 400 `bad_request` before anything reaches the database, never a 500; a method a path does
 * not have is a 405 naming the methods it has (an `Allow` header), distinct from a path that does not exist (404); a
 * chat deleted at the moment a message is posted to it is either deleted (the post then finds no chat) or busy
 * (409), never deleted under a running turn; an answer to an approval that loses to a concurrent one changes nothing
 * (no allow rule stored behind a 409).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../fakes/provider-server.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

let fake: FakeProvider;
const saved = { key: process.env.OPENAI_API_KEY, url: process.env.OPENAI_BASE_URL };
beforeAll(async () => {
  // Every turn stalls until it is cancelled.
  fake = await startFakeProvider(
    "openai",
    Array.from({ length: 200 }, () => ({ kind: "stall", text: "thinking" }) as const),
  );
  process.env.OPENAI_API_KEY = "test-key";
  process.env.OPENAI_BASE_URL = fake.baseURL;
});
afterAll(async () => {
  await fake?.close();
  if (saved.key === undefined) delete process.env.OPENAI_API_KEY;
  else process.env.OPENAI_API_KEY = saved.key;
  if (saved.url === undefined) delete process.env.OPENAI_BASE_URL;
  else process.env.OPENAI_BASE_URL = saved.url;
});

const backends = [
  { name: "SQLite", url: async () => undefined },
  ...(findPgBin() ? [{ name: "PostgreSQL", url: async () => await freshPostgresDatabase() }] : []),
];

describe.each(backends)("hostile request lines ($name)", ({ url }) => {
  let server: TestServer;
  let adminToken: string;
  beforeAll(async () => {
    const databaseUrl = await url();
    server = await startTestServer({ ...(databaseUrl ? { databaseUrl } : {}), adminUsers: ["root"] });
    adminToken = (await server.ctx.tokens.create("root")).token;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("a NUL character in a path id or a query filter is 400 bad_request, never a 500", async () => {
    const requests: [string, string, unknown?][] = [
      ["GET", "/api/chats/%00"],
      ["GET", "/api/chats/a%00b/events"],
      ["GET", "/api/chats/%00/approvals"],
      ["PATCH", "/api/chats/%00", { title: "x" }],
      ["DELETE", "/api/chats/%00"],
      ["POST", "/api/chats/%00/cancel"],
      ["POST", "/api/chats/%00/messages", { content: "hi" }],
      ["GET", "/api/agents/%00"],
      ["GET", "/api/agents?chatId=%00"],
      ["POST", "/api/agents/%00/cancel"],
      ["POST", "/api/approvals/%00", { decision: "deny" }],
      ["GET", "/api/admin/audit?tool=%00"],
      ["GET", "/api/admin/audit?chatId=x%00"],
      ["POST", "/api/admin/data-sources/%00/test"],
      ["DELETE", "/api/admin/mcp-servers/%00"],
    ];
    for (const [method, path, json] of requests) {
      const res = await server.api(path, { method, json, token: adminToken });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect({ method, path, status: res.status, code: body.error.code }).toEqual({
        method,
        path,
        status: 400,
        code: "bad_request",
      });
      expect(body.error.message).toMatch(/NUL/);
    }
    // Still a 401 without a token: nothing is said before authentication.
    expect((await server.api("/api/chats/%00", { token: null })).status).toBe(401);
  });

  it("a NUL character in the ids of a tool call's body is 400; in the tool's arguments it is the tool's to refuse", async () => {
    for (const field of ["chatId", "approvalId"]) {
      const res = await server.api("/api/tools/read_file/execute", {
        method: "POST",
        json: { arguments: { path: "x" }, [field]: "a\u0000b" },
      });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect({ field, status: res.status, code: body.error.code }).toEqual({ field, status: 400, code: "bad_request" });
      expect(body.error.message).toContain(`body.${field}`);
    }
    const res = await server.api("/api/tools/read_file/execute", {
      method: "POST",
      json: { arguments: { path: "a\u0000b" } },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: false, error: { code: "validation_failed" } });
  });

  it("a method the path does not have is 405 with Allow; an unknown path stays 404", async () => {
    const cases: [string, string, string][] = [
      ["PUT", "/api/chats", "GET, POST"],
      ["DELETE", "/api/chats", "GET, POST"],
      ["PUT", "/api/chats/some-id", "GET, PATCH, DELETE"],
      ["GET", "/api/chats/some-id/messages", "POST"],
      ["GET", "/api/chats/some-id/cancel", "POST"],
      ["GET", "/api/approvals/some-id", "POST"],
      ["DELETE", "/api/settings/tools/read_file", "GET, PUT"],
      ["POST", "/api/health", "GET"],
    ];
    for (const [method, path, allow] of cases) {
      const res = await server.api(path, { method, token: adminToken });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect({ method, path, status: res.status, allow: res.headers.get("allow"), code: body.error.code }).toEqual({
        method,
        path,
        status: 405,
        allow,
        code: "method_not_allowed",
      });
      expect(body.error.message).toContain(allow);
    }
    const missing = await server.api("/api/nothing-here", { token: adminToken });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("not_found");
    // Authentication still comes first on the API.
    expect((await server.api("/api/chats", { method: "PUT", token: null })).status).toBe(401);
  });

  it("a chat deleted while a message is posted to it: deleted (the post is 404) or busy (409), never both accepted", async () => {
    for (let round = 0; round < 12; round++) {
      const created = await server.api("/api/chats", { method: "POST", json: { provider: "openai", model: "m" } });
      const chatId = ((await created.json()) as { id: string }).id;
      const [post, del] = await Promise.all([
        server.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content: "stall" } }),
        server.api(`/api/chats/${chatId}`, { method: "DELETE" }),
      ]);
      const outcome = { round, post: post.status, delete: del.status };
      expect([
        { round, post: 200, delete: 409 },
        { round, post: 404, delete: 204 },
      ]).toContainEqual(outcome);
      if (post.status === 200) {
        const cancel = await server.api(`/api/chats/${chatId}/cancel`, { method: "POST" });
        expect(cancel.status).toBe(200);
        expect(await post.text()).toMatch(/"type":"done","reason":"aborted"/);
      } else await post.text();
      await del.text();
    }
  });

  it("an allow_always that loses to a concurrent answer stores no rule: a refused answer changes nothing", async () => {
    const work = tempDir("toolhost-always-race-");
    const as = { token: adminToken };
    const ask = await server.api("/api/settings/tools/list_directory", {
      method: "PUT",
      json: { parameters: { approval: "ask" } },
      ...as,
    });
    expect(ask.status).toBe(200);
    const ruleFor = async (dir: string) => {
      const res = await server.api("/api/settings/tools/list_directory", as);
      const rules = ((await res.json()) as { parameters: { approvalRules: { match: string }[] } }).parameters
        .approvalRules;
      return rules.some((rule) => rule.match.endsWith(`/${dir}`));
    };
    for (let round = 0; round < 8; round++) {
      const dir = `race-${round}`;
      mkdirSync(join(work, dir));
      const asked = await server.api("/api/tools/list_directory/execute", {
        method: "POST",
        json: { workingDirectory: work, arguments: { path: dir } },
        ...as,
      });
      const approvalId = ((await asked.json()) as { error: { details: { approvalId: string } } }).error.details
        .approvalId;
      const answer = (decision: string) =>
        server.api(`/api/approvals/${approvalId}`, { method: "POST", json: { decision }, ...as });
      const [always, deny] = await Promise.all([answer("allow_always"), answer("deny")]);
      const outcome = { round, always: always.status, deny: deny.status, rule: await ruleFor(dir) };
      expect([
        { round, always: 200, deny: 409, rule: true },
        { round, always: 409, deny: 200, rule: false },
      ]).toContainEqual(outcome);
    }
  });
});
