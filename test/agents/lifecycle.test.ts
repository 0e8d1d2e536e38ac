/**
 * Agents across process lifetimes and users: a restart (another instance opening the database after this one
 * stopped) marks running agents interrupted with their partial result; a clean shutdown does the same; user B can
 * neither see, message, wait for nor cancel user A's agents (service and HTTP); templates load from the config
 * file and a directory with errors naming file and field, restrict a child's tools, and are listed by the API and
 * the CLI; spawns are counted in the metrics and audited like any call.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { GENERAL_TEMPLATE, loadAgentTemplates } from "../../src/agents/templates.js";
import { ChatService } from "../../src/app/chat-service.js";
import type { ChatTurnEvent } from "../../src/app/chat-types.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import type { AgentSpawnResult, AgentToolService } from "../../src/core/agents.js";
import { metricsRegistry } from "../../src/core/metrics.js";
import { defaultRegistry, registerTool } from "../../src/core/registry.js";
import type { ProviderAdapter } from "../../src/providers/types.js";
import { createServerApp } from "../../src/server/app.js";
import { sendLimitsFrom } from "../../src/tools/builtin/agent-send.js";
// `toolhost agents …` runs main(argv) in this process (command rules; the bin as a process is tested in test/cli/).
import { runCliInProcess as runCli } from "../helpers/cli.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { calls, hang, lastResult, type ModelCall, type TurnEvents, taskModel, text } from "./fake-model.js";

let root: string;
const contexts: AppContext[] = [];

const captured: AgentToolService[] = [];
registerTool({
  definition: {
    name: "test_capture_agents_lifecycle",
    description: "test only",
    parameters: { type: "object", properties: {}, additionalProperties: false },
  },
  async execute(_args, context) {
    captured.push(context.services.agents as AgentToolService);
    return "captured";
  },
});

beforeAll(() => {
  root = tempDir("toolhost-agents-life-");
  mkdirSync(join(root, "templates"));
  writeFileSync(
    join(root, "config.json"),
    JSON.stringify({
      agents: {
        lister: { description: "Lists directories only.", tools: ["list_directory"], maxTurns: 3 },
        hasty: { description: "Has one second.", timeSeconds: 1 },
      },
    }),
  );
  writeFileSync(
    join(root, "templates", "reviewer.md"),
    "---\ndescription: Reviews code and reports problems.\ntools: [read_file, grep, bash]\ntimeSeconds: 120\n---\nYou review code carefully.\n",
  );
});

afterAll(async () => {
  // The worker runs other test files next: leave the shared registry as it was.
  defaultRegistry.unregister("test_capture_agents_lifecycle");
  for (const ctx of contexts) await ctx.close().catch(() => {});
  rmSync(root, { recursive: true, force: true });
});

async function open(name: string, agentOptions: Record<string, unknown> = {}): Promise<AppContext> {
  const ctx = await createAppContext({
    dataDir: join(root, name),
    logger: recordingLogger(),
    env: { TOOLHOST_CONFIG: join(root, "config.json"), TOOLHOST_AGENT_TEMPLATES_DIR: join(root, "templates") },
    agentOptions: { heartbeatMs: 0, ...agentOptions },
  });
  contexts.push(ctx);
  return ctx;
}

function chatService(ctx: AppContext, model: ProviderAdapter) {
  return new ChatService({
    chats: ctx.chats,
    runtime: ctx.runtime,
    env: {},
    chatRoots: null,
    adapterFactory: () => model,
    agents: ctx.agents,
  });
}

async function start(ctx: AppContext, model: ProviderAdapter, userId: string, content: string, signal?: AbortSignal) {
  const service = chatService(ctx, model);
  const chat = await service.createChat(userId, { provider: "openai", model: "fake" });
  const turn = await service.prepareTurn(userId, chat.id, content);
  const events: ChatTurnEvent[] = [];
  const done = (async () => {
    for await (const event of turn.run(signal)) events.push(event);
    return events;
  })();
  return { chat, events, done };
}

/** A model where the root spawns one background child that reports progress, then hangs; the root hangs too. */
function partialThenHang(rootTask: string): ProviderAdapter & { requests: unknown[] } {
  return taskModel(({ task, turn, request }: ModelCall): TurnEvents | undefined => {
    if (task === rootTask) {
      if (turn === 0) {
        return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "work", wait: false } }]);
      }
      return hang(request.signal);
    }
    if (task === "work") {
      if (turn === 0) return calls([{ id: "t", name: "get_current_datetime", args: {} }], "Partial finding: 42.");
      return hang(request.signal);
    }
    return undefined;
  });
}

const childSecondTurn = (model: { requests: unknown[] }) => () =>
  (model.requests as { messages: { role: string; content?: string }[] }[]).some(
    (r) => r.messages[0]?.content === "work" && r.messages.filter((m) => m.role === "assistant").length === 1,
  );

// The next two blocks run concurrently: each test opens its own context (own database) for its own users.
describe.concurrent("restart", () => {
  it("an instance that opens the database after another stopped marks its running agents interrupted, partial result kept", async () => {
    const first = await open("restart", { instanceId: "first" });
    const model = partialThenHang("crash me");
    const controller = new AbortController();
    const run = await start(first, model, "alice", "crash me", controller.signal);
    await until(childSecondTurn(model), "the child's second turn");
    const [child] = await first.agents.list("alice", { chatId: run.chat.id });
    expect(child?.status).toBe("running");

    // The first instance is gone as far as the database can tell (no heartbeat since): a second one starts.
    const second = await open("restart", { instanceId: "second", staleAfterMs: 0 });
    const seen = await second.agents.get("alice", child?.id ?? "");
    expect(seen).toMatchObject({ status: "interrupted", result: "Partial finding: 42." });
    expect(seen?.note).toContain("server stopped");
    expect(seen?.finishedAt).not.toBeNull();

    controller.abort();
    await run.done;
    // The first instance's own end of the run does not overwrite the verdict.
    expect((await second.agents.get("alice", child?.id ?? ""))?.status).toBe("interrupted");
  });

  it("a clean shutdown marks running agents interrupted and keeps what they produced", async () => {
    const ctx = await open("shutdown");
    const model = partialThenHang("stop me");
    const controller = new AbortController();
    const run = await start(ctx, model, "alice", "stop me", controller.signal);
    await until(childSecondTurn(model), "the child's second turn");
    const [child] = await ctx.agents.list("alice", { chatId: run.chat.id });
    await ctx.agents.shutdown();
    expect(await ctx.agents.get("alice", child?.id ?? "")).toMatchObject({
      status: "interrupted",
      result: "Partial finding: 42.",
    });
    controller.abort();
    await run.done;
  });
});

// Not concurrent: it moves this process's clock.
describe("clocks", () => {
  it("an instance whose clock runs minutes ahead marks no live agent interrupted: heartbeats are judged on the database's clock", async () => {
    const first = await open("skew", { instanceId: "first" });
    const model = partialThenHang("keep me");
    const controller = new AbortController();
    const run = await start(first, model, "alice", "keep me", controller.signal);
    await until(childSecondTurn(model), "the child's second turn");
    const [child] = await first.agents.list("alice", { chatId: run.chat.id });
    expect(child?.status).toBe("running");
    // Another instance starts (and sweeps) with its clock ten minutes ahead: the first one's heartbeat is seconds
    // old on the database's clock, so its agent stays running.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 10 * 60_000 });
    try {
      const second = await open("skew", { instanceId: "second", staleAfterMs: 60_000 });
      expect((await second.agents.get("alice", child?.id ?? ""))?.status).toBe("running");
    } finally {
      vi.useRealTimers();
    }
    controller.abort();
    await run.done;
  });
});

describe.concurrent("users never reach each other's agents", () => {
  it("user B cannot see, message, wait for or cancel user A's agents (service and HTTP)", async () => {
    const ctx = await open("tenancy");
    const aliceModel = partialThenHang("alice's work");
    const aliceStop = new AbortController();
    const alice = await start(ctx, aliceModel, "alice", "alice's work", aliceStop.signal);
    await until(childSecondTurn(aliceModel), "alice's child");
    const [aliceChild] = await ctx.agents.list("alice", { chatId: alice.chat.id });
    const id = aliceChild?.id ?? "";

    // Service level.
    expect(await ctx.agents.list("bob")).toEqual([]);
    expect(await ctx.agents.get("bob", id)).toBeUndefined();
    await expect(ctx.agents.cancel("bob", id)).rejects.toMatchObject({ code: "not_found" });

    // From inside one of bob's own chat turns, through his agent tools' service.
    const bobModel = taskModel(({ task, turn, request }) => {
      if (task !== "bob's turn") return undefined;
      if (turn === 0) return calls([{ id: "c", name: "test_capture_agents_lifecycle", args: {} }]);
      return hang(request.signal);
    });
    const bobStop = new AbortController();
    const before = captured.length;
    const bob = await start(ctx, bobModel, "bob", "bob's turn", bobStop.signal);
    await until(() => captured.length > before, "bob's agent service");
    const bobScope = captured.at(-1) as AgentToolService;
    await expect(bobScope.send({ targetAgentId: id, message: "hi" }, sendLimitsFrom({}))).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(bobScope.close(id)).rejects.toMatchObject({ code: "not_found" });
    await expect(bobScope.wait({ agentIds: [id], timeoutMs: 10 }, new AbortController().signal)).rejects.toMatchObject({
      code: "not_found",
    });

    // HTTP.
    const app = createServerApp(ctx);
    const aliceToken = (await ctx.tokens.create("alice")).token;
    const bobToken = (await ctx.tokens.create("bob")).token;
    const as = (token: string, path: string, method = "GET") =>
      app.request(path, { method, headers: { authorization: `Bearer ${token}` } });
    expect((await as(bobToken, `/api/agents/${id}`)).status).toBe(404);
    expect((await as(bobToken, `/api/agents/${id}/cancel`, "POST")).status).toBe(404);
    expect(await (await as(bobToken, "/api/agents")).json()).toEqual({ agents: [] });

    // Nothing of alice's changed; alice herself sees and cancels it.
    expect((await ctx.agents.get("alice", id))?.status).toBe("running");
    const listed = (await (await as(aliceToken, `/api/agents?chatId=${alice.chat.id}`)).json()) as {
      agents: { id: string; status: string; depth: number }[];
    };
    expect(listed.agents).toEqual([expect.objectContaining({ id, status: "running", depth: 1 })]);
    const shown = (await (await as(aliceToken, `/api/agents/${id}`)).json()) as {
      transcript: unknown[];
      response: string;
    };
    expect(shown.response).toBe("Partial finding: 42.");
    const cancelled = await as(aliceToken, `/api/agents/${id}/cancel`, "POST");
    expect(await cancelled.json()).toEqual({ closed: true, agentId: id, cancelled: [id] });
    expect((await ctx.agents.get("alice", id))?.status).toBe("cancelled");

    aliceStop.abort();
    bobStop.abort();
    await Promise.all([alice.done, bob.done]);
  });
});

// On a fake clock for setTimeout, which arms the agents' time limits: the test need not wait out the template's
// second of real time. Not concurrent with other tests (they would share the clock).
describe("a parent's time limit", () => {
  it("cancels the parent's running sub-agents; the parent still answers in its grace turn", async () => {
    const ctx = await open("parent-timeout");
    let events: ChatTurnEvent[] = [];
    let chatId = "";
    const model = taskModel(({ task, turn, request }) => {
      if (task === "go") {
        if (turn === 0) return calls([{ id: "s", name: "agent_spawn", args: { template: "hasty", message: "A" } }]);
        const r = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`${r.status}: ${r.response}`);
      }
      if (task === "A") {
        const last = request.messages.at(-1);
        if (last?.role === "user" && last.content.startsWith("[Toolhost]")) return text("A ran out of time");
        if (turn === 0) {
          return calls([{ id: "b", name: "agent_spawn", args: { template: "general", message: "B", wait: false } }]);
        }
        return hang(request.signal);
      }
      if (task === "B") return hang(request.signal);
      return undefined;
    });
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const run = await start(ctx, model, "dave", "go");
      // A waits in its second turn, B runs: A's limit is armed (on the fake clock, which stands still).
      const asked = (task: string) =>
        (model.requests as { messages: { content?: string }[] }[]).filter((r) => r.messages[0]?.content === task)
          .length;
      await until(() => asked("A") >= 2 && asked("B") >= 1, "A and B to get under way");
      await vi.advanceTimersByTimeAsync(999);
      // No wait to prove the limit has not fired: when it fires, it aborts A's loop at once (stopRun), and with it
      // the signal of the model request A waits in (and, cancelling B, B's).
      const waiting = (task: string) =>
        (model.requests as { messages: { content?: string }[]; signal?: AbortSignal }[])
          .filter((r) => r.messages[0]?.content === task)
          .at(-1)?.signal?.aborted;
      expect([waiting("A"), waiting("B")], "stopped before the time limit").toEqual([false, false]);
      const early = await ctx.agents.list("dave", { chatId: run.chat.id });
      expect(
        early.map((x) => x.status),
        "stopped before the time limit",
      ).toEqual(["running", "running"]);
      await vi.advanceTimersByTimeAsync(1);
      events = await run.done;
      chatId = run.chat.id;
    } finally {
      // Timers armed on the fake clock (retries, leases, batched writes) would never fire after it is gone: run
      // them now, so the context's close does not wait out its backstops.
      await vi.runOnlyPendingTimersAsync();
      vi.useRealTimers();
    }
    const done = events.at(-1);
    expect(done?.type === "done" && done.messages.at(-1)).toMatchObject({ content: "timeout: A ran out of time" });
    const agents = await ctx.agents.list("dave", { chatId });
    const a = agents.find((x) => x.task === "A");
    const b = agents.find((x) => x.task === "B");
    expect(a?.status).toBe("timeout");
    expect(b).toMatchObject({ status: "cancelled", depth: 2, parentId: a?.id });
  });
});

describe("templates", () => {
  it("loads the config map and Markdown files; errors name the file and the field", () => {
    const options = { providers: ["openai", "anthropic"], tools: new Set(["read_file", "grep", "list_directory"]) };
    const dir = join(root, "bad-templates");
    mkdirSync(dir, { recursive: true });
    const load = (agents: unknown, files: Record<string, string> = {}) => {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir);
      for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, name), body);
      return loadAgentTemplates({ config: { file: "/etc/toolhost.json", agents }, directory: dir }, options);
    };
    const ok = load(
      { lister: { description: "Lists.", tools: ["list_directory"] } },
      { "reviewer.md": "---\ndescription: Reviews.\nprovider: anthropic\nmodel: claude-x\n---\nBe careful.\n" },
    );
    expect(ok.map((t) => t.id)).toEqual(["general", "lister", "reviewer"]);
    expect(ok.find((t) => t.id === "reviewer")).toMatchObject({
      provider: "anthropic",
      model: "claude-x",
      systemPrompt: "Be careful.",
      tools: null,
      source: join(dir, "reviewer.md"),
    });
    expect(ok[0]).toBe(GENERAL_TEMPLATE);

    const failure = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        return error as { code: string; message: string; details: { file: string; field: string } };
      }
      throw new Error("expected a template error");
    };
    expect(failure(() => load({ x: { description: "d", tool: ["grep"] } }))).toMatchObject({
      code: "invalid_settings",
      details: { file: "/etc/toolhost.json (agents.x)", field: "tool" },
    });
    expect(failure(() => load({ x: { description: "d", tools: ["grep", "rm_rf"] } })).details).toEqual({
      file: "/etc/toolhost.json (agents.x)",
      field: "tools[1]",
    });
    const md = failure(() => load({}, { "a.md": "---\ndescription: ok\nmaxTurns: 0\n---\nhi" }));
    expect(md.details).toEqual({ file: join(dir, "a.md"), field: "maxTurns" });
    expect(md.message).toContain(join(dir, "a.md"));
    expect(failure(() => load({}, { "b.md": "no front matter" })).details.field).toBe("(front matter)");
    expect(failure(() => load({}, { "c.md": "---\ndescription: [unclosed\n---\n" })).details.field).toBe(
      "(front matter)",
    );
    expect(failure(() => load({}, { "d.md": "---\ntools: [grep]\n---\n" })).details.field).toBe("description");
    expect(failure(() => load({ y: { description: "d", provider: "mystery" } })).details.field).toBe("provider");
    // A Markdown template's id is its file name: front matter cannot take another template's id (general's).
    const renamed = failure(() => load({}, { "evil.md": "---\nid: general\ndescription: d\n---\nAnything.\n" }));
    expect(renamed).toMatchObject({ code: "invalid_settings", details: { file: join(dir, "evil.md"), field: "id" } });
    expect(renamed.message).toContain("file name");
    // An entry that cannot be read is reported with its file, classified, like an invalid one.
    const unreadable = failure(() => {
      load({});
      mkdirSync(join(dir, "folder.md"));
      return loadAgentTemplates({ directory: dir }, options);
    });
    expect(unreadable).toMatchObject({ code: "invalid_settings", details: { file: join(dir, "folder.md") } });
  });

  it("a template's tools are intersected with the parent's; agent_spawn lists the templates to the model", async () => {
    const ctx = await open("templates");
    // bash is off for this user: the reviewer template names it, but the child cannot gain it.
    let reviewerTools: string[] = [];
    let listerTools: string[] = [];
    let spawnDescription = "";
    const model = taskModel(({ task, turn, request }) => {
      if (task === "review") {
        if (turn === 0) {
          spawnDescription = request.tools.find((t) => t.name === "agent_spawn")?.description ?? "";
          return calls([
            { id: "r", name: "agent_spawn", args: { template: "reviewer", message: "rev" } },
            { id: "l", name: "agent_spawn", args: { template: "lister", message: "lst" } },
          ]);
        }
        const r = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`done ${r.status}`);
      }
      if (task === "rev") {
        reviewerTools = request.tools.map((t) => t.name);
        expect(request.system).toContain("You review code carefully.");
        return text("reviewed");
      }
      if (task === "lst") {
        listerTools = request.tools.map((t) => t.name);
        return text("listed");
      }
      return undefined;
    });
    const run = await start(ctx, model, "carol", "review");
    await run.done;
    expect(reviewerTools.sort()).toEqual(["grep", "read_file"]);
    expect(listerTools).toEqual(["list_directory"]);
    expect(spawnDescription).toContain("- general:");
    expect(spawnDescription).toContain("- reviewer: Reviews code and reports problems.");
    expect(spawnDescription).toContain("- lister: Lists directories only.");
    const agents = await ctx.agents.list("carol", { chatId: run.chat.id });
    expect(agents.map((a) => a.template).sort()).toEqual(["lister", "reviewer"]);

    // Unknown templates are refused naming the ones that exist.
    const scopeModel = taskModel(({ task, turn, request }) => {
      if (task !== "bad") return undefined;
      if (turn === 0) return calls([{ id: "x", name: "agent_spawn", args: { template: "nope", message: "m" } }]);
      return text(JSON.stringify(lastResult(request.messages)?.value));
    });
    const bad = await start(ctx, scopeModel, "carol", "bad");
    const events = await bad.done;
    const last = events.at(-1);
    expect(last?.type === "done" && last.messages.at(-1)).toMatchObject({
      content: expect.stringContaining('No agent template \\"nope\\". Use one of: general, lister, hasty, reviewer.'),
    });

    // The API and metrics.
    const app = createServerApp(ctx);
    const token = (await ctx.tokens.create("carol")).token;
    const res = await app.request("/api/agents/templates", { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { templates: { id: string; tools: string[] | null; source: string }[] };
    expect(body.templates.map((t) => t.id)).toEqual(["general", "lister", "hasty", "reviewer"]);
    expect(body.templates[3]).toMatchObject({
      tools: ["read_file", "grep", "bash"],
      source: join(root, "templates", "reviewer.md"),
    });
    const metrics = await metricsRegistry.getSingleMetricAsString("agent_spawns_total");
    expect(metrics).toMatch(/agent_spawns_total\{outcome="completed"\} \d+/);
    expect(await metricsRegistry.getSingleMetricAsString("agents_active")).toMatch(/agents_active \d+/);
    // Audit: the spawn calls and the children's calls are recorded like any tool call.
    const audited = await ctx.audit.list({ userId: "carol", tool: "agent_spawn" });
    expect(audited.length).toBeGreaterThanOrEqual(3);
  });

  it("toolhost agents templates|list|show|cancel work from the CLI", async () => {
    const dataDir = join(root, "cli");
    const env = {
      TOOLHOST_DATA_DIR: dataDir,
      TOOLHOST_CONFIG: join(root, "config.json"),
      TOOLHOST_AGENT_TEMPLATES_DIR: join(root, "templates"),
    };
    const templates = await runCli(["agents", "templates", "--json"], env);
    expect(templates.code).toBe(0);
    expect((JSON.parse(templates.stdout) as { templates: { id: string }[] }).templates.map((t) => t.id)).toEqual([
      "general",
      "lister",
      "hasty",
      "reviewer",
    ]);
    // An agent made by a chat turn in the same data directory.
    const ctx = await createAppContext({ dataDir, logger: recordingLogger(), env, agentOptions: { heartbeatMs: 0 } });
    const model = taskModel(({ task, turn }) => {
      if (task === "cli") {
        return turn === 0
          ? calls([{ id: "s", name: "agent_spawn", args: { template: "lister", message: "child" } }])
          : text("ok");
      }
      return task === "child" ? text("child answer") : undefined;
    });
    await (await start(ctx, model, "local", "cli")).done;
    const [agent] = await ctx.agents.list("local");
    await ctx.close();
    const list = await runCli(["agents", "list"], env);
    expect(list.stdout).toContain(agent?.id ?? "?");
    expect(list.stdout).toContain("completed");
    const show = await runCli(["agents", "show", agent?.id ?? ""], env);
    expect(JSON.parse(show.stdout)).toMatchObject({ id: agent?.id, result: "child answer", template: "lister" });
    const missing = await runCli(["agents", "show", "nope"], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('No agent "nope"');
    // A prefix shorter than 6 characters is not looked up: the message says so, not just "no agent".
    const short = await runCli(["agents", "show", agent?.id.slice(0, 4) ?? ""], env);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain("first 6+ characters");
    expect(short.stderr).toContain("toolhost agents list");
    const cancel = await runCli(["agents", "cancel", agent?.id ?? ""], env);
    expect(JSON.parse(cancel.stdout)).toEqual({ closed: true, agentId: agent?.id, cancelled: [] });
  });
});
