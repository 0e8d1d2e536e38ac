/**
 * The ask round-trip through the real server (`toolhost serve` in its own process, SQLite in a data directory that
 * survives restarts) and the OpenAI SDK against the fake provider: a chat's write_file call under an `ask` rule is
 * shown on the SSE stream, answered with POST /api/approvals/:id, and runs once; the same with the server killed
 * between the ask and the answer; deny and expiry reach the model as errors; an altered stored call is refused.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, cleanEnv } from "../e2e/chat-process.js";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
import { eventually, type ServerProcess, SseReader, startServerProcess } from "./helpers.js";

let work: string;
let roots: string;
const script: FakeTurn[] = [];
let fake: FakeProvider;
let env: NodeJS.ProcessEnv;
let expiringEnv: NodeJS.ProcessEnv;
let server: ServerProcess & { token: string };
let expiring: ServerProcess & { token: string };

const ASK_NOTES = { decision: "ask", match: "notes/**", mustMatch: ["notes/todo.md"], mustNotMatch: ["src/index.ts"] };

beforeAll(async () => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), "toolhost-approvals-"));
  roots = join(work, "roots");
  mkdirSync(roots);
  fake = await startFakeProvider("openai", script);
  const base = { OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.baseURL, TOOLHOST_CHAT_ROOTS: roots };
  // A process that died is taken over at once (a single server here); asks wait long unless a test says otherwise.
  env = cleanEnv({ ...base, TOOLHOST_DATA_DIR: join(work, "data"), TOOLHOST_APPROVAL_STALE_MS: "0" });
  expiringEnv = cleanEnv({
    ...base,
    TOOLHOST_DATA_DIR: join(work, "data-expiring"),
    TOOLHOST_APPROVAL_TIMEOUT_SECONDS: "0.5",
  });
  // The expiry test's server (a data directory of its own) starts beside the main one instead of inside that test.
  [server, expiring] = await Promise.all([startServerProcess(env), startServerProcess(expiringEnv)]);
});

afterAll(async () => {
  await Promise.all([server?.stop(), expiring?.stop()]);
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

afterEach(() => {
  expect(fake.failures).toEqual([]);
});

function project(): string {
  return mkdtempSync(join(roots, "project-"));
}

async function askOnNotes(s: ServerProcess) {
  const response = await s.api("/api/settings/tools/write_file", {
    method: "PUT",
    json: { parameters: { approvalRules: [ASK_NOTES] } },
  });
  expect(response.status).toBe(200);
}

async function newChat(s: ServerProcess, dir: string): Promise<string> {
  const response = await s.api("/api/chats", {
    method: "POST",
    json: { provider: "openai", model: "fake-model", workingDirectory: dir },
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { id: string }).id;
}

/** The write the fake model asks for. */
const writeCall = (content: string): FakeTurn => ({
  kind: "tools",
  calls: [{ name: "write_file", arguments: { path: "notes/todo.md", content, createDirectories: true } }],
});

/** The model's final answer, quoting the tool result it received. */
const answer: FakeTurn = (request) => ({
  kind: "text",
  text: `Tool said: ${request.lastToolResults[0]?.content ?? "nothing"}`,
});

/** The write the fake model asks for, then a final answer quoting the tool result it received. */
function writeThenAnswer(content: string) {
  script.push(writeCall(content), answer);
}

async function send(s: ServerProcess, chatId: string, content: string): Promise<SseReader> {
  const response = await s.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content } });
  expect(response.status).toBe(200);
  return new SseReader(response);
}

describe("approval rules in the settings", () => {
  it("refuses a rule whose examples fail (422) and shows the saved rule", async () => {
    const bad = await server.api("/api/settings/tools/write_file", {
      method: "PUT",
      json: { parameters: { approvalRules: [{ decision: "ask", match: "notes/**", mustMatch: ["docs/a.md"] }] } },
    });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as any).error.message).toContain('does not match its example "docs/a.md"');
    const wrong = await server.api("/api/settings/tools/write_file", {
      method: "PUT",
      json: { parameters: { approvalRules: [{ decision: "ask", match: "notes/**", mustNotMatch: ["notes/x"] }] } },
    });
    expect(wrong.status).toBe(422);
    await askOnNotes(server);
    const tool = (await (await server.api("/api/settings/tools/write_file")).json()) as any;
    expect(tool.parameters.approval).toBe("allow");
    expect(tool.parameters.approvalRules).toEqual([{ ...ASK_NOTES, note: "" }]);
    const rules = tool.parameterDescriptors.find((d: any) => d.name === "approvalRules");
    expect(rules).toMatchObject({ type: "object[]" });
    expect(rules.fields.map((f: any) => f.name)).toEqual(["decision", "match", "mustMatch", "mustNotMatch", "note"]);
  });
});

describe("the ask round-trip over SSE and REST", () => {
  it("shows the ask on the stream, runs the call once when allowed, and audits call, decision and settings", async () => {
    await askOnNotes(server);
    const dir = project();
    const chatId = await newChat(server, dir);
    writeThenAnswer("buy milk\n");
    const stream = await send(server, chatId, "Note that I need milk.");
    const ask = (await stream.until((e) => e.event === "approval_requested")).data;
    expect(ask).toMatchObject({
      type: "approval_requested",
      tool: "write_file",
      rule: { decision: "ask", match: "notes/**" },
      subjects: [join(dir, "notes/todo.md")],
    });
    expect(ask.preview).toContain("notes/todo.md");
    expect(Date.parse(ask.expiresAt)).toBeGreaterThan(Date.now());
    expect(existsSync(join(dir, "notes/todo.md"))).toBe(false);

    const listed = (await (await server.api(`/api/chats/${chatId}/approvals`)).json()) as any;
    expect(listed.approvals.map((a: any) => [a.id, a.status, a.toolCallId])).toEqual([
      [ask.approvalId, "pending", ask.toolCallId],
    ]);
    expect((await server.api("/api/approvals/no-such-id", { method: "POST", json: { decision: "deny" } })).status).toBe(
      404,
    );
    const allowed = await server.api(`/api/approvals/${ask.approvalId}`, {
      method: "POST",
      json: { decision: "allow_once" },
    });
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toMatchObject({ status: "allowed", decision: "allow_once", decidedBy: "local" });
    const again = await server.api(`/api/approvals/${ask.approvalId}`, { method: "POST", json: { decision: "deny" } });
    expect(again.status).toBe(409);
    // The service's refusal, answered by the server's status table with its own code and details.
    // (allowed, or used once its call ran)
    const conflict = (await again.json()) as { error: { code: string; details: { status: string } } };
    expect(conflict.error.code).toBe("approval_conflict");
    expect(["allowed", "used"]).toContain(conflict.error.details.status);

    const events = await stream.rest();
    const results = events.filter((e) => e.event === "tool_result").map((e) => e.data);
    expect(results).toMatchObject([{ name: "write_file", ok: true }]);
    expect(events.find((e) => e.event === "approval_resolved")?.data).toMatchObject({ decision: "allow_once" });
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "text" });
    expect(readFileSync(join(dir, "notes/todo.md"), "utf8")).toBe("buy milk\n");

    const audit = (await (await server.api(`/api/admin/audit?tool=write_file&limit=50`)).json()) as any;
    const calls = audit.entries.filter((e: any) => e.kind === "tool_call" && e.chatId === chatId);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      outcome: "ok",
      approval: "allow_once",
      approvedBy: "local",
      cwd: dir,
      arguments: { path: "notes/todo.md", content: "buy milk\n" },
    });
    const change = audit.entries.find((e: any) => e.kind === "settings_change");
    expect(change).toMatchObject({ userId: "local", actor: "local", tool: "write_file" });
    expect(change.details.new.parameters.approvalRules[0].match).toBe("notes/**");
  });

  it("feeds a denial with the user's words back to the model as denied_by_user", async () => {
    await askOnNotes(server);
    const dir = project();
    const chatId = await newChat(server, dir);
    writeThenAnswer("secret\n");
    const stream = await send(server, chatId, "Write it down.");
    const ask = (await stream.until((e) => e.event === "approval_requested")).data;
    const denied = await server.api(`/api/approvals/${ask.approvalId}`, {
      method: "POST",
      json: { decision: "deny", message: "Not in notes/, put it in docs/ instead" },
    });
    expect(denied.status).toBe(200);
    const events = await stream.rest();
    const result = events.find((e) => e.event === "tool_result")?.data;
    expect(result).toMatchObject({ ok: false, error: { code: "denied_by_user" } });
    expect(result.error.message).toContain("Not in notes/, put it in docs/ instead");
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "text" });
    const last = fake.requests.at(-1)!;
    expect(last.lastToolResults[0]?.content).toContain("denied_by_user");
    expect(last.lastToolResults[0]?.content).toContain("put it in docs/ instead");
    expect(existsSync(join(dir, "notes/todo.md"))).toBe(false);
  });

  it("stores allow_always as a deduplicated allow rule that lets the next call run without asking", async () => {
    // The tool asks by its setting (no ask rule), so an allow rule can take over.
    const ask = await server.api("/api/settings/tools/write_file", {
      method: "PUT",
      json: { parameters: { approval: "ask", approvalRules: [] } },
    });
    expect(ask.status).toBe(200);
    const dir = project();
    const chatId = await newChat(server, dir);
    writeThenAnswer("one\n");
    const stream = await send(server, chatId, "Write one.");
    const asked = (await stream.until((e) => e.event === "approval_requested")).data;
    expect(asked.allowAlways).toBe(true);
    const always = await server.api(`/api/approvals/${asked.approvalId}`, {
      method: "POST",
      json: { decision: "allow_always" },
    });
    expect(always.status).toBe(200);
    await stream.rest();
    const tool = (await (await server.api("/api/settings/tools/write_file")).json()) as any;
    const target = join(dir, "notes/todo.md");
    expect(tool.parameters.approvalRules.filter((r: any) => r.decision === "allow" && r.match === target)).toHaveLength(
      1,
    );

    writeThenAnswer("two\n");
    const second = await send(server, chatId, "Write two.");
    const events = await second.rest();
    expect(events.some((e) => e.event === "approval_requested")).toBe(false);
    expect(readFileSync(target, "utf8")).toBe("two\n");
    const reset = await server.api("/api/settings/tools/write_file", {
      method: "PUT",
      json: { parameters: { approval: null, approvalRules: null } },
    });
    expect(reset.status).toBe(200);
  });

  it("refuses allow_always for an ask that an ask rule made (422), leaving it pending", async () => {
    await askOnNotes(server);
    const dir = project();
    const chatId = await newChat(server, dir);
    writeThenAnswer("x\n");
    const stream = await send(server, chatId, "Write x.");
    const ask = (await stream.until((e) => e.event === "approval_requested")).data;
    expect(ask.allowAlways).toBe(false);
    const refused = await server.api(`/api/approvals/${ask.approvalId}`, {
      method: "POST",
      json: { decision: "allow_always" },
    });
    expect(refused.status).toBe(422);
    const denied = await server.api(`/api/approvals/${ask.approvalId}`, { method: "POST", json: { decision: "deny" } });
    expect(denied.status).toBe(200);
    await stream.rest();
  });
});

describe("pending approvals survive a restart", () => {
  // Two asks pending when the server is killed, answered after one restart: the untouched one runs its call once and
  // finishes its turn; the other's stored call, altered while the server was down, is refused.
  it("after the server is killed, the asks are still pending; allowing one runs the call once and finishes the turn, one whose stored arguments were altered meanwhile is refused (access_denied)", async () => {
    await askOnNotes(server);
    const dir = project();
    const chatId = await newChat(server, dir);
    const alteredDir = project();
    const alteredChatId = await newChat(server, alteredDir);
    const before = fake.requests.length;
    // One ask at a time, so that each turn takes its own scripted call; their answers are scripted when allowed.
    script.push(writeCall("after restart\n"));
    const stream = await send(server, chatId, "Remember this across a restart.");
    const ask = (await stream.until((e) => e.event === "approval_requested")).data;
    script.push(writeCall("harmless\n"));
    const alteredStream = await send(server, alteredChatId, "Write a harmless note.");
    const alteredAsk = (await alteredStream.until((e) => e.event === "approval_requested")).data;
    await server.kill();
    await Promise.all([stream.rest(), alteredStream.rest()]);
    // Someone with access to the database swaps the second stored call's arguments.
    const db = new Database(join(env.TOOLHOST_DATA_DIR!, "toolhost.db"));
    const row = db.prepare("SELECT id, state FROM approval_turns WHERE chat_id = ?").get(alteredChatId) as {
      id: string;
      state: string;
    };
    const state = JSON.parse(row.state);
    state.step.assistant.toolCalls[0].arguments = JSON.stringify({ path: "notes/todo.md", content: "evil\n" });
    db.prepare("UPDATE approval_turns SET state = ? WHERE id = ?").run(JSON.stringify(state), row.id);
    db.close();
    server = await startServerProcess(env, server.token);

    const listed = (await (await server.api(`/api/chats/${chatId}/approvals`)).json()) as any;
    expect(listed.approvals.map((a: any) => [a.id, a.status])).toEqual([[ask.approvalId, "pending"]]);
    const busy = await server.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content: "hello?" } });
    expect(busy.status).toBe(409);
    script.push(answer);
    const allowed = await server.api(`/api/approvals/${ask.approvalId}`, {
      method: "POST",
      json: { decision: "allow_once" },
    });
    expect(allowed.status).toBe(200);

    const chat = await eventually(async () => {
      const c = (await (await server.api(`/api/chats/${chatId}`)).json()) as any;
      return c.messages.length >= 4 ? c : undefined;
    });
    expect(chat.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(chat.messages[2].results[0]).toMatchObject({ name: "write_file", ok: true });
    expect(chat.messages[3].content).toContain("Tool said:");
    expect(readFileSync(join(dir, "notes/todo.md"), "utf8")).toBe("after restart\n");
    // The provider was asked for the two turns' calls once and then for this turn's answer: the decided call was not
    // requested again.
    expect(fake.requests.length - before).toBe(3);
    const audit = (await (await server.api(`/api/admin/audit?tool=write_file&limit=100`)).json()) as any;
    expect(audit.entries.filter((e: any) => e.chatId === chatId && e.outcome === "ok")).toHaveLength(1);
    // The turn is finished: the chat takes new messages again.
    script.push({ kind: "text", text: "Hello again." });
    const next = await send(server, chatId, "hello?");
    expect((await next.rest()).at(-1)?.data).toMatchObject({ type: "done", reason: "text" });

    // The altered call: allowed, it is refused when it would run, and nothing is written.
    script.push(answer);
    const allowedAltered = await server.api(`/api/approvals/${alteredAsk.approvalId}`, {
      method: "POST",
      json: { decision: "allow_once" },
    });
    expect(allowedAltered.status).toBe(200);
    const altered = await eventually(async () => {
      const c = (await (await server.api(`/api/chats/${alteredChatId}`)).json()) as any;
      return c.messages.length >= 4 ? c : undefined;
    });
    expect(altered.messages[2].results[0]).toMatchObject({ name: "write_file", ok: false });
    expect(JSON.parse(altered.messages[2].results[0].content).error.code).toBe("access_denied");
    expect(existsSync(join(alteredDir, "notes/todo.md"))).toBe(false);
  });
});

describe("expiry", () => {
  it("an unanswered ask expires into denied_by_user for the model, and answering it later is a 409", async () => {
    await askOnNotes(expiring);
    const dir = project();
    const chatId = await newChat(expiring, dir);
    writeThenAnswer("too late\n");
    const stream = await send(expiring, chatId, "Write it.");
    const ask = (await stream.until((e) => e.event === "approval_requested")).data;
    const events = await stream.rest();
    const result = events.find((e) => e.event === "tool_result")?.data;
    expect(result).toMatchObject({ ok: false, error: { code: "denied_by_user", details: { reason: "expired" } } });
    expect(events.find((e) => e.event === "approval_resolved")?.data).toMatchObject({ decision: "expired" });
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "text" });
    const answer = events
      .filter((e) => e.event === "text_delta")
      .map((e) => e.data.delta)
      .join("");
    expect(answer).toContain("denied_by_user");
    const late = await expiring.api(`/api/approvals/${ask.approvalId}`, {
      method: "POST",
      json: { decision: "allow_once" },
    });
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({ error: { code: "approval_conflict", details: { status: "expired" } } });
    expect(existsSync(join(dir, "notes/todo.md"))).toBe(false);
  });
});
