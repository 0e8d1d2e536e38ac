/**
 * One-off calls through the approval gate over real HTTP (an in-process server on a loopback port, SQLite in a
 * temp data directory): the tool-execute route returns the pending approval's id, runs the call once after it is
 * answered, refuses a replay with altered arguments, in another working directory or another chat (access_denied) or
 * a second run; `onAsk: wait` waits for the
 * answer; the MCP server denies an ask naming the rule when the client cannot be asked.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

let server: TestServer;
let work: string;

beforeAll(async () => {
  work = tempDir("toolhost-approvals-oneoff-");
  mkdirSync(join(work, "notes"));
  process.env.OPENAI_API_KEY = "sk-test-unused"; // a chat is created, never run
  server = await startTestServer();
  const rules = await server.api("/api/settings/tools/write_file", {
    method: "PUT",
    json: {
      parameters: {
        approvalRules: [
          { decision: "ask", match: "notes/**" },
          { decision: "deny", match: "secrets/**" },
        ],
      },
    },
  });
  expect(rules.status).toBe(200);
});

afterAll(async () => {
  await server?.stop();
});

async function execute(body: Record<string, unknown>) {
  const response = await server.api("/api/tools/write_file/execute", {
    method: "POST",
    json: { workingDirectory: work, ...body },
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe("the tool-execute route", () => {
  it("refuses, without asking, a call the path policy refuses anyway (outside the directory, Toolhost's own /proc)", async () => {
    const ask = await server.api("/api/settings/tools/read_file", {
      method: "PUT",
      json: { parameters: { approval: "ask" } },
    });
    expect(ask.status).toBe(200);
    const before = ((await (await server.api("/api/approvals")).json()) as { approvals: unknown[] }).approvals.length;
    for (const path of ["../elsewhere.txt", "/proc/self/environ", "/etc/hostname"]) {
      const response = await server.api("/api/tools/read_file/execute", {
        method: "POST",
        json: { workingDirectory: work, arguments: { path } },
      });
      const body = (await response.json()) as {
        ok: boolean;
        error: { code: string; details?: { approvalId?: string } };
      };
      expect(body.error.code, path).toBe("access_denied");
      expect(body.error.details?.approvalId, path).toBeUndefined();
    }
    const after = ((await (await server.api("/api/approvals")).json()) as { approvals: unknown[] }).approvals.length;
    expect(after).toBe(before);
    // A path it may read still asks.
    const inside = await server.api("/api/tools/read_file/execute", {
      method: "POST",
      json: { workingDirectory: work, arguments: { path: "notes/x.md" } },
    });
    expect(
      ((await inside.json()) as { error: { details: { approvalId?: string } } }).error.details.approvalId,
    ).toBeTruthy();
    const reset = await server.api("/api/settings/tools/read_file", {
      method: "PUT",
      json: { parameters: { approval: "allow" } },
    });
    expect(reset.status).toBe(200);
  });

  it("refuses, without asking, a shell call whose working directory the path policy refuses", async () => {
    expect((await server.api("/api/settings/tools/bash", { method: "PUT", json: { enabled: true } })).status).toBe(200);
    const pending = async () =>
      ((await (await server.api("/api/approvals")).json()) as { approvals: unknown[] }).approvals.length;
    const before = await pending();
    const bash = async (body: Record<string, unknown>) =>
      (await (await server.api("/api/tools/bash/execute", { method: "POST", json: body })).json()) as {
        error: { code: string; details?: { approvalId?: string; rule?: string } };
      };
    // cwd outside the chat's directory; and no directory at all for a user who may not use the server's own.
    const outside = await bash({ workingDirectory: work, arguments: { command: "touch x", cwd: "/etc" } });
    expect(outside.error.code).toBe("access_denied");
    expect(outside.error.details?.approvalId).toBeUndefined();
    const ana = await server.ctx.tokens.create("ana-oneoff");
    expect(
      (await server.api("/api/admin/users/ana-oneoff/settings/tools/bash", { method: "PUT", json: { enabled: true } }))
        .status,
    ).toBe(200);
    const nowhere = (await (
      await server.api("/api/tools/bash/execute", {
        method: "POST",
        token: ana.token,
        json: { arguments: { command: "touch x" } },
      })
    ).json()) as { error: { code: string; details?: { approvalId?: string; rule?: string } } };
    expect(nowhere.error.code).toBe("access_denied");
    expect(nowhere.error.details?.rule).toBe("noWorkingDirectory");
    expect(nowhere.error.details?.approvalId).toBeUndefined();
    expect(await pending()).toBe(before);
    // Inside the directory it still asks.
    const inside = await bash({ workingDirectory: work, arguments: { command: "touch x" } });
    expect(inside.error.details?.approvalId).toBeTruthy();
    expect((await server.api("/api/settings/tools/bash", { method: "PUT", json: { enabled: false } })).status).toBe(
      200,
    );
  });

  it("a re-sent call whose approval was denied is refused as in a turn: denied_by_user with the person's words", async () => {
    const args = { path: "notes/denied.md", content: "no\n" };
    const first = await execute({ arguments: args });
    const approvalId = first.body.error.details.approvalId as string;
    const early = await execute({ arguments: args, approvalId });
    expect(early.body.error.message).toContain(`POST /api/approvals/${approvalId}`);
    const answer = { decision: "deny", message: "not today" };
    expect((await server.api(`/api/approvals/${approvalId}`, { method: "POST", json: answer })).status).toBe(200);
    const resent = await execute({ arguments: args, approvalId });
    expect(resent.body).toMatchObject({
      ok: false,
      error: { code: "denied_by_user", details: { approvalId, userMessage: "not today" } },
    });
    expect(existsSync(join(work, "notes/denied.md"))).toBe(false);
  });

  it("returns the pending approval, runs the call once it is allowed, and refuses replays", async () => {
    const args = { path: "notes/plan.md", content: "the plan\n" };
    const first = await execute({ arguments: args });
    // The route's contract: every tool outcome, an approval's denial included, is 200 with ok false.
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ ok: false, error: { code: "denied_by_policy" } });
    const approvalId = first.body.error.details.approvalId as string;
    expect(first.body.error.message).toContain(approvalId);
    expect(existsSync(join(work, "notes/plan.md"))).toBe(false);

    const early = await execute({ arguments: args, approvalId });
    expect(early.body).toMatchObject({ ok: false, error: { code: "denied_by_policy" } });
    expect(
      (await server.api(`/api/approvals/${approvalId}`, { method: "POST", json: { decision: "allow_once" } })).status,
    ).toBe(200);

    const altered = await execute({ arguments: { path: "notes/plan.md", content: "something else\n" }, approvalId });
    expect(altered.body).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "approval_binding" } },
    });
    const otherTool = await server.api("/api/tools/read_file/execute", {
      method: "POST",
      json: { workingDirectory: work, arguments: { path: "notes/plan.md" }, approvalId },
    });
    expect(((await otherTool.json()) as any).error.code).toBe("access_denied");
    expect(existsSync(join(work, "notes/plan.md"))).toBe(false);

    const run = await execute({ arguments: args, approvalId });
    expect(run.body).toMatchObject({ ok: true });
    expect(readFileSync(join(work, "notes/plan.md"), "utf8")).toBe("the plan\n");
    const again = await execute({ arguments: args, approvalId });
    expect(again.body).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "approval_used" } },
    });
  });

  it("binds an approval to the working directory and the chat it was asked in", async () => {
    const sub = join(work, "sub");
    mkdirSync(join(sub, "notes"), { recursive: true });
    const args = { path: "notes/bound.md", content: "bound\n" };
    const first = await execute({ arguments: args, workingDirectory: sub });
    const approvalId = first.body.error.details.approvalId as string;
    const listed = ((await (await server.api("/api/approvals")).json()) as any).approvals.find(
      (a: any) => a.id === approvalId,
    );
    expect(listed).toMatchObject({ workingDirectory: sub, chatId: null });
    expect(
      (await server.api(`/api/approvals/${approvalId}`, { method: "POST", json: { decision: "allow_once" } })).status,
    ).toBe(200);

    const elsewhere = await execute({ arguments: args, workingDirectory: work, approvalId });
    expect(elsewhere.body).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "approval_binding" } },
    });
    expect(elsewhere.body.error.message).toContain(sub);
    expect(existsSync(join(work, "notes/bound.md"))).toBe(false);

    const chat = await server.api("/api/chats", {
      method: "POST",
      json: { provider: "openai", model: "fake-model", workingDirectory: sub },
    });
    expect(chat.status).toBe(201);
    const chatId = ((await chat.json()) as { id: string }).id;
    const inChat = await execute({ arguments: args, workingDirectory: sub, chatId, approvalId });
    expect(inChat.body).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "approval_binding" } },
    });
    expect(existsSync(join(sub, "notes/bound.md"))).toBe(false);

    const run = await execute({ arguments: args, workingDirectory: sub, approvalId });
    expect(run.body).toMatchObject({ ok: true });
    expect(readFileSync(join(sub, "notes/bound.md"), "utf8")).toBe("bound\n");
  });

  it("refuses a URL web_fetch would refuse anyway at once, storing no approval", async () => {
    const setting = await server.api("/api/settings/tools/web_fetch", {
      method: "PUT",
      json: { parameters: { approval: "ask" } },
    });
    expect(setting.status).toBe(200);
    const fetchCall = async (url: string) => {
      const response = await server.api("/api/tools/web_fetch/execute", {
        method: "POST",
        json: { arguments: { url } },
      });
      return (await response.json()) as any;
    };
    const pendingFetches = async () =>
      (((await (await server.api("/api/approvals")).json()) as any).approvals as any[]).filter(
        (a) => a.tool === "web_fetch",
      );

    expect(await fetchCall("file:///etc/passwd")).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "ssrf", scheme: "file:" } },
    });
    expect(await fetchCall("not a url")).toMatchObject({
      ok: false,
      error: { code: "validation_failed", details: { argument: "url" } },
    });
    expect(await fetchCall("https://user:secret@example.com/")).toMatchObject({
      ok: false,
      error: { code: "access_denied" },
    });
    expect(await pendingFetches()).toEqual([]);

    // A URL the tool accepts is asked about as before.
    const valid = await fetchCall("https://example.com/page");
    expect(valid).toMatchObject({ ok: false, error: { code: "denied_by_policy" } });
    expect(await pendingFetches()).toHaveLength(1);
  });

  it("denies by rule without asking, and allows what no rule covers", async () => {
    mkdirSync(join(work, "secrets"), { recursive: true });
    const denied = await execute({ arguments: { path: "secrets/key", content: "k" } });
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({
      ok: false,
      error: { code: "denied_by_policy", details: { rule: { match: "secrets/**" } } },
    });
    expect(denied.body.error.message).toContain('deny "secrets/**"');
    const free = await execute({ arguments: { path: "free.md", content: "free" } });
    expect(free.body).toMatchObject({ ok: true });
  });

  it("with onAsk wait, runs the call when the ask is answered meanwhile", async () => {
    const waiting = execute({ arguments: { path: "notes/wait.md", content: "waited\n" }, onAsk: "wait" });
    let pending: any[] = [];
    while (pending.length === 0) {
      pending = (((await (await server.api("/api/approvals")).json()) as any).approvals as any[]).filter(
        (a) => a.tool === "write_file" && a.preview.includes("wait.md"),
      );
    }
    expect(
      (await server.api(`/api/approvals/${pending[0].id}`, { method: "POST", json: { decision: "allow_once" } }))
        .status,
    ).toBe(200);
    const done = await waiting;
    expect(done.body).toMatchObject({ ok: true });
    expect(readFileSync(join(work, "notes/wait.md"), "utf8")).toBe("waited\n");
  });
});

describe("the MCP server", () => {
  it("denies an ask with a message naming the rule when the client cannot be asked", async () => {
    const client = new Client({ name: "approvals-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.server.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${server.token}`, "Toolhost-Working-Directory": work } },
    });
    await client.connect(transport);
    try {
      const result = (await client.callTool({
        name: "write_file",
        arguments: { path: "notes/mcp.md", content: "from mcp" },
      })) as { isError?: boolean; content: { type: string; text: string }[] };
      expect(result.isError).toBe(true);
      const error = JSON.parse(result.content[0]!.text).error;
      expect(error.code).toBe("denied_by_policy");
      expect(error.message).toContain('ask "notes/**"');
      expect(existsSync(join(work, "notes/mcp.md"))).toBe(false);
    } finally {
      await client.close();
    }
  });
});
