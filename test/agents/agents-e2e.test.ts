/**
 * Sub-agents as a user meets them: a real `toolhost serve` and a real `toolhost chat` talking to a
 * protocol-faithful fake Anthropic server through the official SDK. The child's events arrive on the chat's SSE
 * stream tagged with its id and depth (agent_started, its tool events, agent_finished, then the parent's done),
 * and the CLI chat prints them indented.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { assertBuilt, cleanEnv, startCli } from "../e2e/chat-process.js";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
import { tempDir } from "../helpers/server.js";

vi.setConfig({ testTimeout: 90_000 });

let work: string;
let project: string;
let fake: FakeProvider;
const script: FakeTurn[] = [];

beforeAll(async () => {
  assertBuilt();
  work = tempDir("toolhost-agents-e2e-");
  project = join(work, "project");
  mkdirSync(project);
  writeFileSync(join(project, "README.md"), "# demo\n");
  writeFileSync(join(project, "main.ts"), "export {}\n");
  fake = await startFakeProvider("anthropic", script);
});

afterAll(async () => {
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

/** The four model turns of one delegated task: parent spawns, child lists, child answers, parent quotes. */
function delegation(): FakeTurn[] {
  return [
    {
      kind: "tools",
      calls: [{ name: "agent_spawn", arguments: { template: "general", message: `List ${project} for me.` } }],
    },
    { kind: "tools", calls: [{ name: "list_directory", arguments: { path: project } }] },
    { kind: "text", text: "The project holds README.md and main.ts." },
    { kind: "text", text: "My sub-agent reports: README.md and main.ts." },
  ];
}

const env = (dataDir: string) =>
  cleanEnv({
    TOOLHOST_DATA_DIR: dataDir,
    TOOLHOST_CONFIG: join(work, "no-config.json"),
    ANTHROPIC_API_KEY: "test-key",
    ANTHROPIC_BASE_URL: fake.baseURL,
    TOOLHOST_CHAT_ROOTS: work,
  });

interface SseEvent {
  event: string;
  data: any;
}

async function readSse(response: Response): Promise<SseEvent[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .map((frame) => {
      let event = "message";
      const data: string[] = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      return data.length ? { event, data: JSON.parse(data.join("\n")) } : undefined;
    })
    .filter((e): e is SseEvent => e !== undefined);
}

describe("sub-agents through the real server and CLI", () => {
  it("streams a child's events on the chat's SSE stream, tagged with its id and depth", async () => {
    script.push(...delegation());
    const server = startCli(["serve", "--port", "0"], env(join(work, "serve")));
    try {
      await server.waitFor((out) => /Toolhost (http:\/\/127\.0\.0\.1:\d+)/.test(out) && /^\s+(th_\S+)$/m.test(out));
      const url = /Toolhost (http:\/\/127\.0\.0\.1:\d+)/.exec(server.stdout())?.[1];
      const token = /^\s+(th_\S+)$/m.exec(server.stdout())?.[1];
      const api = (path: string, init: RequestInit = {}) =>
        fetch(`${url}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        });
      const chat = (await (
        await api("/api/chats", {
          method: "POST",
          body: JSON.stringify({ provider: "anthropic", model: "fake-model", workingDirectory: project }),
        })
      ).json()) as { id: string };
      const events = await readSse(
        await api(`/api/chats/${chat.id}/messages`, {
          method: "POST",
          body: JSON.stringify({ content: "What is in my project? Ask a sub-agent." }),
        }),
      );
      const started = events.find((e) => e.event === "agent_started");
      const childResult = events.find((e) => e.event === "tool_result" && e.data.agent);
      const finished = events.find((e) => e.event === "agent_finished");
      expect(started?.data.agent).toMatchObject({ depth: 1, template: "general" });
      expect(childResult?.data).toMatchObject({
        name: "list_directory",
        ok: true,
        agent: { id: started?.data.agent.id, depth: 1 },
      });
      expect(finished?.data).toMatchObject({
        status: "completed",
        response: "The project holds README.md and main.ts.",
      });
      const done = events.at(-1);
      expect(done?.event).toBe("done");
      expect(done?.data.messages.at(-1).content).toBe("My sub-agent reports: README.md and main.ts.");

      const agents = (await (await api(`/api/agents?chatId=${chat.id}`)).json()) as { agents: { id: string }[] };
      expect(agents.agents.map((a) => a.id)).toEqual([started?.data.agent.id]);
      const detail = (await (await api(`/api/agents/${started?.data.agent.id}`)).json()) as {
        transcript: { role: string }[];
        usage: { turns: number; toolCalls: number };
      };
      expect(detail.transcript.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
      expect(detail.usage).toMatchObject({ turns: 2, toolCalls: 1 });
      expect(fake.failures).toEqual([]);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });

  it("toolhost chat shows the child's work indented under the parent's", async () => {
    script.push(...delegation());
    const chat = startCli(
      ["chat", "--provider", "anthropic", "--model", "fake-model", "--cwd", project, "What is in my project?"],
      env(join(work, "cli")),
    );
    const code = await chat.exited;
    expect(code).toBe(0);
    expect(chat.stdout()).toContain("My sub-agent reports: README.md and main.ts.");
    const lines = chat.stderr().split("\n");
    expect(lines.find((l) => l.includes("↳ [general"))).toMatch(/^ {2}↳ \[general [0-9a-f]{8}\] started: List /);
    expect(lines.find((l) => l.includes("→ list_directory"))).toMatch(/^ {4}→ list_directory path=/);
    expect(lines.find((l) => l.includes("↲ [general"))).toMatch(
      /^ {2}↲ \[general [0-9a-f]{8}\] completed · 2 turns · 1 tool calls/,
    );
    expect(fake.failures).toEqual([]);
  });

  it("a killed toolhost chat leaves its running sub-agent interrupted, with its partial result, at the next start", async () => {
    script.push(
      {
        kind: "tools",
        calls: [{ name: "agent_spawn", arguments: { template: "general", message: "Work on it, slowly." } }],
      },
      { kind: "tools", text: "Partial finding: two files.", calls: [{ name: "get_current_datetime", arguments: {} }] },
      { kind: "stall" },
    );
    const dataDir = join(work, "crash");
    const before = fake.requests.length;
    const chat = startCli(
      ["chat", "--provider", "anthropic", "--model", "fake-model", "--cwd", project, "Delegate and wait."],
      env(dataDir),
    );
    // The child's second model turn is streaming (stalled) when the process dies.
    await new Promise<void>((resolve, reject) => {
      const timer = setInterval(() => {
        if (fake.requests.length >= before + 3) {
          clearInterval(timer);
          resolve();
        }
      }, 20);
      chat.exited.then(() => {
        clearInterval(timer);
        reject(new Error(`toolhost chat exited early: ${chat.stderr()}`));
      });
    });
    chat.child.kill("SIGKILL");
    await chat.exited.catch(() => {});
    const { createAppContext } = await import("../../src/app/context.js");
    const ctx = await createAppContext({ dataDir, env: { TOOLHOST_CONFIG: join(work, "no-config.json") } });
    try {
      const [agent] = await ctx.agents.list("local");
      expect(agent).toMatchObject({ status: "interrupted", result: "Partial finding: two files.", depth: 1 });
      expect(agent?.note).toContain("server stopped");
    } finally {
      await ctx.close();
    }
  });
});
