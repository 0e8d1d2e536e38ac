/**
 * The shell sandbox through the real server (`toolhost serve` in its own process, the OpenAI SDK against the fake
 * provider): where bwrap works, a chat's bash call runs sandboxed without an ask and the audit records it; where
 * it does not (TOOLHOST_BWRAP points at nothing), `sandbox: "preferred"` makes the approval gate ask with the
 * probe's reason, and the command runs unconfined only once allowed.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeSandbox } from "../../src/tools/shell/sandbox/probe.js";
import { type ServerProcess, SseReader, startServerProcess } from "../approvals/helpers.js";
import { assertBuilt, cleanEnv } from "../e2e/chat-process.js";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";

const probe = await probeSandbox();
let work: string;
let roots: string;
const script: FakeTurn[] = [];
let fake: FakeProvider;
const servers: ServerProcess[] = [];

beforeAll(async () => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), "toolhost-sandbox-e2e-"));
  roots = join(work, "roots");
  mkdirSync(roots);
  fake = await startFakeProvider("openai", script);
});

afterAll(async () => {
  for (const s of servers) await s.stop();
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

async function start(name: string, extra: Record<string, string> = {}) {
  const server = await startServerProcess(
    cleanEnv({
      OPENAI_API_KEY: "test-key",
      OPENAI_BASE_URL: fake.baseURL,
      TOOLHOST_CHAT_ROOTS: roots,
      TOOLHOST_DATA_DIR: join(work, name),
      ...extra,
    }),
  );
  servers.push(server);
  // approval "allow": only the tool's own say (the sandbox) can turn the call into an ask.
  const put = await server.api("/api/settings/tools/bash", {
    method: "PUT",
    json: { enabled: true, parameters: { approval: "allow" } },
  });
  expect(put.status).toBe(200);
  const dir = mkdtempSync(join(roots, "project-"));
  const chat = await server.api("/api/chats", {
    method: "POST",
    json: { provider: "openai", model: "fake-model", workingDirectory: dir },
  });
  expect(chat.status).toBe(201);
  return { server, dir, chatId: ((await chat.json()) as { id: string }).id };
}

function bashThenAnswer(command: string) {
  script.push({ kind: "tools", calls: [{ name: "bash", arguments: { command } }] }, (request) => ({
    kind: "text",
    text: `Tool said: ${request.lastToolResults[0]?.content ?? "nothing"}`,
  }));
}

async function send(server: ServerProcess, chatId: string): Promise<SseReader> {
  const response = await server.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content: "go" } });
  expect(response.status).toBe(200);
  return new SseReader(response);
}

async function auditedCall(server: ServerProcess, chatId: string) {
  const audit = (await (await server.api("/api/admin/audit?tool=bash&limit=20")).json()) as {
    entries: { kind: string; chatId: string; sandboxed: boolean | null; approval: string | null }[];
  };
  return audit.entries.find((e) => e.kind === "tool_call" && e.chatId === chatId);
}

describe("the shell sandbox in a chat", () => {
  it.skipIf(!probe.available)("runs a chat's bash call sandboxed without asking; the audit says so", async () => {
    const { server, chatId } = await start("data-working");
    bashThenAnswer("grep '^Seccomp:' /proc/self/status");
    const stream = await send(server, chatId);
    const events = await stream.rest();
    expect(events.some((e) => e.event === "approval_requested")).toBe(false);
    const result = events.find((e) => e.event === "tool_result")?.data;
    expect(result).toMatchObject({ name: "bash", ok: true });
    expect(JSON.stringify(result)).toMatch(/Seccomp:\\t2/);
    expect(await auditedCall(server, chatId)).toMatchObject({ sandboxed: true });
  });

  it("without a working sandbox, 'preferred' asks with the reason and runs unconfined only once allowed", async () => {
    const { server, chatId } = await start("data-missing", { TOOLHOST_BWRAP: join(work, "no-such-bwrap") });
    bashThenAnswer("echo unconfined");
    const stream = await send(server, chatId);
    const ask = (await stream.until((e) => e.event === "approval_requested")).data;
    expect(ask).toMatchObject({ tool: "bash" });
    expect(ask.reason).toMatch(/sandbox is unavailable.*unconfined.*bubblewrap/is);
    const allowed = await server.api(`/api/approvals/${ask.approvalId}`, {
      method: "POST",
      json: { decision: "allow_once" },
    });
    expect(allowed.status).toBe(200);
    const events = await stream.rest();
    const result = events.find((e) => e.event === "tool_result")?.data;
    expect(result).toMatchObject({ name: "bash", ok: true });
    expect(JSON.stringify(result)).toContain("unconfined");
    expect(await auditedCall(server, chatId)).toMatchObject({ sandboxed: false, approval: "allow_once" });
  });
});
