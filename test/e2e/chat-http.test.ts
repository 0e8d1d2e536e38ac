/**
 * The chat HTTP API end to end: the built server (`toolhost serve --port 0`) in its own process with SQLite in a
 * temporary data directory, the real SDKs of all four providers against the fake provider servers, SSE read by a
 * plain fetch client, as an API user would. One server reaches all four: the two OpenAI flavours through their own
 * entries of the config file (they would share OPENAI_BASE_URL), the others through the environment.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ProviderName } from "../../src/providers/types.js";
import { type FakeProvider, type FakeRequest, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
import { runCliInProcess } from "../helpers/cli.js";
import { until } from "../helpers/until.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "./chat-process.js";
import { makeProject, SECRET_FILE, SECRET_LINE, scenarioScript } from "./chat-scenario.js";

const KEY_ENV: Record<ProviderName, [string, string]> = {
  openai: ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
  "openai-chat": ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
  gemini: ["GEMINI_API_KEY", "GEMINI_BASE_URL"],
  anthropic: ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
};

interface SseEvent {
  event: string;
  id?: string;
  data: any;
}

/** Reads an SSE response to its end (or until `until` returns true, then aborts the request). */
async function readSse(
  response: Response,
  until?: (event: SseEvent) => boolean,
  controller?: AbortController,
): Promise<SseEvent[]> {
  expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  const reader = response.body!.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
        const event: SseEvent = { event: "message", data: "" };
        const data: string[] = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") event.event = value;
          else if (field === "id") event.id = value;
          else if (field === "data") data.push(value);
        }
        if (data.length === 0) continue;
        event.data = JSON.parse(data.join("\n"));
        events.push(event);
        if (until?.(event)) {
          controller?.abort();
          return events;
        }
      }
    }
  } catch (error) {
    if (!controller?.signal.aborted) throw error;
  }
  return events;
}

/** A running `toolhost serve` with its URL and first-start token. */
interface Server {
  process: CliProcess;
  url: string;
  token: string;
  env: NodeJS.ProcessEnv;
  api(path: string, init?: RequestInit & { token?: string }): Promise<Response>;
  stop(): Promise<void>;
}

async function startServer(env: NodeJS.ProcessEnv): Promise<Server> {
  const p = startCli(["serve", "--port", "0"], env);
  await p.waitFor((out) => /Toolhost (http:\/\/127\.0\.0\.1:\d+)/.test(out) && /^\s+(th_\S+)$/m.test(out));
  const url = /Toolhost (http:\/\/127\.0\.0\.1:\d+)/.exec(p.stdout())![1]!;
  const token = /^\s+(th_\S+)$/m.exec(p.stdout())![1]!;
  return {
    process: p,
    url,
    token,
    env,
    api: (path, init = {}) =>
      fetch(`${url}${path}`, {
        ...init,
        headers: {
          authorization: `Bearer ${init.token ?? token}`,
          "content-type": "application/json",
          ...(init.headers ?? {}),
        },
      }),
    async stop() {
      p.child.kill("SIGTERM");
      await p.exited;
    },
  };
}

let work: string;
let roots: string;
let project: string;
/** Mutable scripts: the fakes read the next turn at request time, so each test appends the turns it needs. */
const scripts: Record<ProviderName, FakeTurn[]> = { openai: [], "openai-chat": [], gemini: [], anthropic: [] };
const fakes = {} as Record<ProviderName, FakeProvider>;
/**
 * The server talks to all four fakes: gemini and anthropic through their environment variables, openai and
 * openai-chat (which would share OPENAI_BASE_URL) through their own entries of the config file.
 */
let main: Server;

beforeAll(async () => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), "toolhost-e2e-http-"));
  roots = join(work, "roots");
  mkdirSync(roots);
  mkdirSync(`${roots}-sibling`);
  project = makeProject(join(roots, "project-"));
  for (const provider of Object.keys(scripts) as ProviderName[]) {
    fakes[provider] = await startFakeProvider(provider, scripts[provider]);
  }
  const config = join(work, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      providers: {
        openai: { apiKey: "test-key", baseURL: fakes.openai.baseURL },
        "openai-chat": { apiKey: "test-key", baseURL: fakes["openai-chat"].baseURL },
      },
    }),
  );
  const extra: Record<string, string> = {
    TOOLHOST_DATA_DIR: join(work, "data-main"),
    TOOLHOST_CHAT_ROOTS: roots,
    TOOLHOST_CONFIG: config,
  };
  for (const provider of ["gemini", "anthropic"] as const) {
    const [key, url] = KEY_ENV[provider];
    extra[key] = "test-key";
    extra[url] = fakes[provider].baseURL;
  }
  main = await startServer(cleanEnv(extra));
});

afterAll(async () => {
  await main?.stop();
  await Promise.all(Object.values(fakes).map((fake) => fake.close()));
  rmSync(work, { recursive: true, force: true });
});

afterEach(() => {
  for (const fake of Object.values(fakes)) expect(fake.failures).toEqual([]);
});

async function createChat(server: Server, provider: ProviderName, body: Record<string, unknown> = {}) {
  const response = await server.api("/api/chats", {
    method: "POST",
    body: JSON.stringify({ provider, model: "fake-model", workingDirectory: project, ...body }),
  });
  return { response, chat: (await response.json()) as any };
}

async function send(server: Server, chatId: string, content: string, signal?: AbortSignal) {
  return server.api(`/api/chats/${chatId}/messages`, { method: "POST", body: JSON.stringify({ content }), signal });
}

describe.each(["openai", "openai-chat", "gemini", "anthropic"] as const)("chat API with %s", (provider) => {
  it("streams the scenario as SSE and stores the whole turn", async () => {
    scripts[provider].push(...scenarioScript(provider, project));
    const server = main;
    const { response, chat } = await createChat(server, provider, { title: "e2e" });
    expect(response.status).toBe(201);
    expect(chat).toMatchObject({ provider, model: "fake-model", workingDirectory: project, title: "e2e" });

    const sse = await send(server, chat.id, "Find the launch code in this project.");
    expect(sse.status).toBe(200);
    const events = await readSse(sse);
    for (const e of events) expect(e.event).toBe(e.data.type);
    expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 1));
    const results = events.filter((e) => e.event === "tool_result").map((e) => e.data);
    expect(results.map((r) => [r.name, r.ok])).toEqual([
      ["list_directory", true],
      ["grep", true],
      ["read_file", true],
    ]);
    const text = events
      .filter((e) => e.event === "text_delta")
      .map((e) => e.data.delta)
      .join("");
    expect(text).toContain(SECRET_LINE);
    expect(events.filter((e) => e.event === "iteration").map((e) => e.data.n)).toEqual([1, 2, 3, 4]);
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "text", iterations: 4 });

    const stored = (await (await server.api(`/api/chats/${chat.id}`)).json()) as any;
    expect(stored.messages.map((m: any) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "assistant",
    ]);
    expect(stored.messages[2].results[0]).toMatchObject({ name: "list_directory", ok: true });
    expect(stored.messages[4].results[0].content).toContain(SECRET_FILE);
    expect(stored.messages[7].content).toContain(SECRET_LINE);
  });
});

describe.each(["openai", "openai-chat", "gemini", "anthropic"] as const)("parallel calls with %s", (provider) => {
  it("runs two calls of one turn and feeds back a malformed-arguments call as a correctable failure", async () => {
    let fedBack: FakeRequest | undefined;
    scripts[provider].push(
      {
        kind: "tools",
        calls: [
          { name: "list_directory", arguments: { path: "." } },
          { name: "read_file", arguments: '{"path": "README.md"' },
        ],
      },
      (request) => {
        fedBack = request;
        return { kind: "text", text: "One worked, one I must fix." };
      },
    );
    const server = main;
    const { chat } = await createChat(server, provider);
    const events = await readSse(await send(server, chat.id, "Do two things at once."));
    const results = events.filter((e) => e.event === "tool_result").map((e) => e.data);
    expect(results.map((r) => [r.name, r.ok]).sort()).toEqual([
      ["list_directory", true],
      ["read_file", false],
    ]);
    expect(results.find((r) => r.name === "read_file").error.code).toBe("validation_failed");
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "text" });
    // Both results went back in the provider's format, in call order; the failure is flagged where the format can.
    expect(fedBack?.lastToolResults).toHaveLength(2);
    const [listed, failed] = fedBack!.lastToolResults;
    expect(listed!.content).toContain("README.md");
    expect(JSON.parse(failed!.content).error.code).toBe("validation_failed");
    if (provider === "anthropic" || provider === "gemini") expect(failed!.isError).toBe(true);
  });
});

describe("chat API rules", () => {
  it("validates bodies, binds only directories within TOOLHOST_CHAT_ROOTS, and hides other users' chats", async () => {
    const server = main;
    expect((await server.api("/api/chats", { method: "POST", body: "{" })).status).toBe(400);
    expect((await createChat(server, "mistral" as ProviderName)).response.status).toBe(400);
    expect((await createChat(server, "anthropic", { model: "" })).response.status).toBe(400);
    expect((await createChat(server, "anthropic", { extra: 1 })).response.status).toBe(400);
    const missing = await createChat(server, "anthropic", { workingDirectory: join(project, "nope") });
    expect(missing.response.status).toBe(400);
    expect(missing.chat.error.message).toMatch(/does not exist/);
    const outside = await createChat(server, "anthropic", { workingDirectory: work });
    expect(outside.response.status).toBe(403);
    expect(outside.chat.error.code).toBe("access_denied");
    const sibling = await createChat(server, "anthropic", { workingDirectory: `${roots}-sibling` });
    expect(sibling.response.status).toBe(403);
    expect((await createChat(server, "anthropic", { workingDirectory: undefined })).response.status).toBe(403);
    expect((await server.api("/api/chats", { method: "POST", body: "{}", token: "th_wrong" })).status).toBe(401);

    const { chat } = await createChat(server, "anthropic");
    // Another process (this test's, through main(argv)) makes bob's token on the server's database.
    const bob = await runCliInProcess(["token", "create", "--user", "bob"], server.env as Record<string, string>);
    expect(bob.code, bob.stderr).toBe(0);
    const bobToken = bob.stdout.trim();
    expect((await server.api(`/api/chats/${chat.id}`, { token: bobToken })).status).toBe(404);
    const post = await server.api(`/api/chats/${chat.id}/messages`, {
      method: "POST",
      body: JSON.stringify({ content: "hi" }),
      token: bobToken,
    });
    expect(post.status).toBe(404);
    expect(((await (await server.api("/api/chats", { token: bobToken })).json()) as any).chats).toEqual([]);
    expect((await send(server, chat.id, "")).status).toBe(400);

    const doc = (await (await fetch(`${server.url}/api/openapi.json`)).json()) as any;
    expect(doc.paths["/api/chats"].post.requestBody).toBeDefined();
    expect(doc.paths["/api/chats/{id}/messages"].post).toBeDefined();
  });

  it("reports a provider stream that breaks mid-turn as an error event and keeps the history consistent", async () => {
    scripts.openai.push(
      { kind: "tools", calls: [{ name: "list_directory", arguments: { path: "." } }] },
      { kind: "break", text: "The directory contains" },
      { kind: "text", text: "Recovered." },
    );
    const { chat } = await createChat(main, "openai");
    const events = await readSse(await send(main, chat.id, "What is here?"));
    expect(events.at(-2)?.data).toMatchObject({ type: "error", code: "provider_error" });
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "error" });
    const stored = (await (await main.api(`/api/chats/${chat.id}`)).json()) as any;
    expect(stored.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(JSON.stringify(stored.messages)).not.toContain("The directory contains");
    // The next turn sends that history and the provider accepts it (the fake checks every call is answered).
    const next = await readSse(await send(main, chat.id, "Go on."));
    expect(next.at(-1)?.data).toMatchObject({ type: "done", reason: "text" });
  });

  it("kills a running tool when the client disconnects", async () => {
    const dir = join(roots, "shell-project");
    mkdirSync(dir);
    scripts.anthropic.push({
      kind: "tools",
      calls: [{ name: "bash", arguments: { command: "touch started.marker; sleep 30; touch finished.marker" } }],
    });
    const enable = await main.api("/api/settings/tools/bash", {
      method: "PUT",
      // Shell tools ask before each command by default; this user allows them.
      body: JSON.stringify({ enabled: true, parameters: { approval: "allow" } }),
    });
    expect(enable.status).toBe(200);
    const { chat } = await createChat(main, "anthropic", { workingDirectory: dir });
    const controller = new AbortController();
    const response = await send(main, chat.id, "Run the long job.", controller.signal);
    await readSse(response, (e) => e.event === "tool_call_completed");
    await until(() => existsSync(join(dir, "started.marker")), "the long job to start", {
      timeoutMs: 25_000,
      intervalMs: 25,
    });
    controller.abort();
    // The shell tool records its outcome in the audit log once its process group is gone.
    let entry: any;
    while (!entry) {
      const audit = (await (await main.api("/api/admin/audit")).json()) as any;
      entry = audit.entries.find((e: any) => e.tool === "bash" && e.chatId === chat.id);
      if (!entry) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(entry.termination).toBe("aborted");
    expect(existsSync(join(dir, "finished.marker"))).toBe(false);
    let stored: any;
    do {
      stored = await (await main.api(`/api/chats/${chat.id}`)).json();
    } while (stored.messages.length === 0);
    expect(stored.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(stored.messages[2].results[0]).toMatchObject({ name: "bash", ok: false });
    expect(JSON.parse(stored.messages[2].results[0].content).error.code).toBe("aborted");
  });

  it("aborts the turn when the client disconnects, and the chat stays usable", async () => {
    scripts.gemini.push({ kind: "stall", text: "Thinking" }, { kind: "text", text: "Fresh answer." });
    const { chat } = await createChat(main, "gemini");
    const controller = new AbortController();
    const response = await send(main, chat.id, "Think hard.", controller.signal);
    const seen = await readSse(response, (e) => e.event === "text_delta", controller);
    expect(seen.at(-1)?.event).toBe("text_delta");
    // The server noticed the disconnect and cancelled its request to the provider.
    await fakes.gemini.stallClosed();
    // The chat is released: the next message runs (a busy chat would answer 409).
    let events: SseEvent[] = [];
    for (;;) {
      const next = await send(main, chat.id, "Again.");
      if (next.status === 409) {
        await next.body?.cancel();
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      events = await readSse(next);
      break;
    }
    expect(events.at(-1)?.data).toMatchObject({ type: "done", reason: "text" });
    const stored = (await (await main.api(`/api/chats/${chat.id}`)).json()) as any;
    expect(stored.messages.map((m: any) => [m.role, m.content])).toEqual([
      ["user", "Again."],
      ["assistant", "Fresh answer."],
    ]);
  });
});
