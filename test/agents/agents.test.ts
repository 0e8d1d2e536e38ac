/**
 * Sub-agents end to end over a real SQLite file: chat turns with the scripted model spawn agents that run their
 * own tool loops on real tools; limits refuse at exactly their bound; cancellation reaches a grandchild's real
 * process; a restart marks running agents interrupted; users never reach each other's agents.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AgentStreamEvent } from "../../src/agents/service.js";
import type { ApprovalRequestView } from "../../src/app/approvals/service.js";
import { ChatService } from "../../src/app/chat-service.js";
import type { ChatTurnEvent } from "../../src/app/chat-types.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import type { AgentSpawnResult, AgentToolService } from "../../src/core/agents.js";
import { defaultRegistry, registerTool } from "../../src/core/registry.js";
import type { LoopEvent } from "../../src/loop/events.js";
import type { ProviderAdapter } from "../../src/providers/types.js";
import { AgentRepository } from "../../src/storage/agent-repository.js";
import { sendLimitsFrom } from "../../src/tools/builtin/agent-send.js";
import { spawnLimitsFrom } from "../../src/tools/builtin/agent-spawn.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { calls, hang, lastResult, type ModelCall, type TurnEvents, taskModel, text } from "./fake-model.js";

let root: string;
let ctx: AppContext;
let repo: AgentRepository;

// A tool that hands the test the calling agent's AgentToolService, so limits can be driven directly and in bulk.
const captured: AgentToolService[] = [];
registerTool({
  definition: {
    name: "test_capture_agents",
    description: "test only",
    parameters: { type: "object", properties: {}, additionalProperties: false },
  },
  settings: {
    title: "test",
    description: "test",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    defaultParameters: {},
    parameterDescriptors: [],
  },
  async execute(_args, context) {
    captured.push(context.services.agents as AgentToolService);
    return "captured";
  },
});

beforeAll(async () => {
  root = tempDir("toolhost-agents-");
  ctx = await createAppContext({
    dataDir: join(root, "data"),
    logger: recordingLogger(),
    env: { TOOLHOST_CONFIG: join(root, "no-config.json") },
    agentOptions: { heartbeatMs: 0, graceTurnMs: 5_000 },
  });
  repo = new AgentRepository(ctx.database.db);
});

afterAll(async () => {
  // The worker runs other test files next: leave the shared registry as it was.
  defaultRegistry.unregister("test_capture_agents");
  await ctx?.close();
  rmSync(root, { recursive: true, force: true });
});

let chatCounter = 0;

/** A chat service over the scripted model, and a fresh chat of `userId` bound to `dir`. */
async function newChat(model: ProviderAdapter, userId = "alice", dir: string | null = null) {
  const service = new ChatService({
    chats: ctx.chats,
    runtime: ctx.runtime,
    logger: ctx.logger,
    env: {},
    chatRoots: null,
    adapterFactory: () => model,
    agents: ctx.agents,
  });
  const chat = await service.createChat(userId, {
    id: `agents-chat-${++chatCounter}`,
    provider: "openai",
    model: "fake",
    workingDirectory: dir,
  });
  return { service, chat };
}

async function runTurn(
  service: ChatService,
  userId: string,
  chatId: string,
  content: string,
  signal?: AbortSignal,
  onEvent?: (event: ChatTurnEvent) => void,
): Promise<ChatTurnEvent[]> {
  const turn = await service.prepareTurn(userId, chatId, content);
  const events: ChatTurnEvent[] = [];
  for await (const event of turn.run(signal)) {
    events.push(event);
    onEvent?.(event);
  }
  return events;
}

const agentEvents = (events: ChatTurnEvent[]) => events.filter((e): e is AgentStreamEvent => "agent" in e);
const doneOf = (events: ChatTurnEvent[]) => events.at(-1) as Extract<LoopEvent, { type: "done" }>;
const finalText = (events: ChatTurnEvent[]) => {
  const last = doneOf(events).messages.at(-1);
  return last?.role === "assistant" ? last.content : "";
};

async function setSettings(userId: string, tool: string, parameters: Record<string, unknown>) {
  await ctx.settings.update(userId, tool, { parameters }, { admin: true });
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Opens a turn whose root captures its AgentToolService and then waits (model hangs) until the signal aborts. */
async function capturedRoot(model: (call: ModelCall) => TurnEvents | undefined, userId = "alice") {
  const controller = new AbortController();
  const rootTask = `capture ${++chatCounter}`;
  const fake = taskModel((call) => {
    if (call.task === rootTask) {
      if (call.turn === 0) return calls([{ id: "c1", name: "test_capture_agents", args: {} }]);
      return hang(call.request.signal);
    }
    return model(call);
  });
  const { service, chat } = await newChat(fake, userId);
  const before = captured.length;
  const events: ChatTurnEvent[] = [];
  const running = runTurn(service, userId, chat.id, rootTask, controller.signal, (e) => events.push(e));
  await until(() => captured.length > before, "the root to capture its agent service");
  const scope = captured[captured.length - 1] as AgentToolService;
  return {
    scope,
    chat,
    events,
    fake,
    async end() {
      controller.abort();
      return running;
    },
  };
}

describe("agent_spawn: a general child does real work and the parent quotes it", () => {
  it("spawns a general child that lists a real directory; the parent quotes its answer", async () => {
    const dir = join(root, "project");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "alpha.txt"), "a");
    writeFileSync(join(dir, "beta.md"), "b");
    const childTask = `List the directory ${dir} and report the file names.`;
    const model = taskModel(({ task, turn, request }) => {
      if (task === "What is in my project?") {
        if (turn === 0) {
          return calls([{ id: "s1", name: "agent_spawn", args: { template: "general", message: childTask } }]);
        }
        const spawned = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`The sub-agent (depth ${spawned.depth}, ${spawned.status}) says: ${spawned.response}`);
      }
      if (task === childTask) {
        if (turn === 0) return calls([{ id: "l1", name: "list_directory", args: { path: dir } }]);
        const listing = lastResult(request.messages, "list_directory")?.value as { entries: { name: string }[] };
        return text(`Files: ${listing.entries.map((e) => e.name).join(", ")}`);
      }
      return undefined;
    });
    const { service, chat } = await newChat(model, "alice", dir);
    const events = await runTurn(service, "alice", chat.id, "What is in my project?");

    expect(doneOf(events).reason).toBe("text");
    expect(finalText(events)).toBe("The sub-agent (depth 1, completed) says: Files: alpha.txt, beta.md");

    const tagged = agentEvents(events);
    const started = tagged.find((e) => e.type === "agent_started");
    const finished = tagged.find((e) => e.type === "agent_finished");
    expect(started?.agent.depth).toBe(1);
    expect(started?.agent.template).toBe("general");
    expect(tagged.some((e) => e.type === "tool_result" && e.name === "list_directory" && e.ok)).toBe(true);
    expect(finished).toMatchObject({ type: "agent_finished", status: "completed" });
    // agent_finished precedes the parent's done, which is last.
    expect(events.indexOf(finished as ChatTurnEvent)).toBeLessThan(events.length - 1);

    const [agent] = await ctx.agents.list("alice", { chatId: chat.id });
    expect(agent).toMatchObject({
      status: "completed",
      depth: 1,
      template: "general",
      result: "Files: alpha.txt, beta.md",
    });
    expect(agent?.usage).toMatchObject({ turns: 2, toolCalls: 1, inputTokens: 20, outputTokens: 10 });
    const full = await ctx.agents.get("alice", agent?.id ?? "");
    expect(full?.transcript.length).toBe(4); // task, call, result, answer
    // The child was offered the parent's tools (general template), seen on its model request.
    const childRequest = model.requests.find(
      (r) => r.messages[0]?.role === "user" && r.messages[0].content === childTask,
    );
    expect(childRequest?.tools.map((t) => t.name)).toContain("list_directory");
    expect(childRequest?.system).toContain(`Your agent id is ${agent?.id} (depth 1)`);
  });
});

describe("lineage comes from the server, never the model", () => {
  it("refuses a forged parentId, and omitting it keeps the real depth; agent tools vanish at the depth limit", async () => {
    await setSettings("lineage", "agent_spawn", { maxDepth: 2 });
    let depth2Tools: string[] = [];
    const model = taskModel(({ task, turn, request }) => {
      if (task === "start") {
        if (turn === 0) return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "A" } }]);
        return text("root done");
      }
      if (task === "A") {
        if (turn === 0) {
          // A forged parent (pretending to be the root, to reset depth) is refused.
          return calls([
            { id: "f", name: "agent_spawn", args: { template: "general", message: "B", parentId: "forged-root" } },
          ]);
        }
        if (turn === 1) return calls([{ id: "o", name: "agent_spawn", args: { template: "general", message: "B" } }]);
        const r = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`B at depth ${r.depth}`);
      }
      if (task === "B") {
        if (turn === 0) {
          depth2Tools = request.tools.map((t) => t.name);
          // B is at the depth limit: agent_spawn is not offered, and calling it anyway is refused.
          return calls([{ id: "x", name: "agent_spawn", args: { template: "general", message: "C" } }]);
        }
        return text(`refused: ${JSON.stringify(lastResult(request.messages)?.value)}`);
      }
      return undefined;
    });
    const { service, chat } = await newChat(model, "lineage");
    const events = await runTurn(service, "lineage", chat.id, "start");
    expect(doneOf(events).reason).toBe("text");

    const results = agentEvents(events).filter((e) => e.type === "tool_result");
    const forged = results.find((e) => e.type === "tool_result" && e.id === "f");
    expect(forged).toMatchObject({ ok: false, error: { code: "access_denied" } });

    const agents = await ctx.agents.list("lineage", { chatId: chat.id });
    const a = agents.find((x) => x.task === "A");
    const b = agents.find((x) => x.task === "B");
    expect(a?.depth).toBe(1);
    expect(b?.depth).toBe(2);
    expect(b?.parentId).toBe(a?.id);
    expect(a?.result).toBe("B at depth 2");
    expect(depth2Tools).not.toContain("agent_spawn");
    expect(depth2Tools).not.toContain("agent_send");
    expect(depth2Tools).toContain("list_directory");
    expect(b?.result).toContain("not_offered");
    expect(agents.some((x) => x.task === "C")).toBe(false);
  });

  it("MAX_AGENT_DEPTH refuses exactly past its bound, from the stored lineage", async () => {
    const limits = spawnLimitsFrom({ maxDepth: 2 });
    const rootAgent = await repo.createRoot({
      userId: "depth",
      chatId: null,
      provider: "openai",
      model: "m",
      task: "t",
      instanceId: "test",
    });
    const reserve = (parentId: string) =>
      repo.reserveChild({
        userId: "depth",
        parentId,
        template: "general",
        task: "t",
        provider: null,
        model: null,
        maxTurns: 1,
        timeMs: 1000,
        instanceId: "test",
        limits,
      });
    const d1 = await reserve(rootAgent.id);
    const d2 = await reserve(d1.id);
    expect([d1.depth, d2.depth]).toEqual([1, 2]);
    await expect(reserve(d2.id)).rejects.toMatchObject({
      code: "limit_exceeded",
      details: { limit: "MAX_AGENT_DEPTH", value: 2 },
    });
    // The refused reservation took nothing: no quota unit of the parent, no tree slot.
    expect((await repo.get("depth", d2.id))?.childrenCount).toBe(0);
    expect((await repo.list("depth", { rootId: rootAgent.id })).length).toBe(2);
  });
});

describe("limits refuse at exactly their bound", () => {
  it("DEFAULT_MAX_SUB_AGENTS: three parallel spawns with a quota of 2 → two children, one refusal naming the limit", async () => {
    await setSettings("quota", "agent_spawn", { maxSubAgents: 2 });
    const model = taskModel(({ task, turn, request }) => {
      if (task === "fan out") {
        if (turn === 0) {
          return calls(
            ["q1", "q2", "q3"].map((id) => ({
              id,
              name: "agent_spawn",
              args: { template: "general", message: "quick", wait: false },
            })),
          );
        }
        if (turn === 1) return calls([{ id: "w", name: "agent_wait", args: { timeoutMs: 10_000 } }]);
        const waited = lastResult(request.messages, "agent_wait")?.value as { agents: { status: string }[] };
        return text(`waited: ${waited.agents.map((a) => a.status).join(",")}`);
      }
      if (task === "quick") return text("ok");
      return undefined;
    });
    const { service, chat } = await newChat(model, "quota");
    const events = await runTurn(service, "quota", chat.id, "fan out");
    const spawnResults = events.filter(
      (e): e is Extract<LoopEvent, { type: "tool_result" }> =>
        e.type === "tool_result" && !("agent" in e) && e.name === "agent_spawn",
    );
    expect(spawnResults.filter((r) => r.ok)).toHaveLength(2);
    const refused = spawnResults.filter((r) => !r.ok);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({
      error: { code: "limit_exceeded", details: { limit: "DEFAULT_MAX_SUB_AGENTS", value: 2 } },
    });
    expect(finalText(events)).toBe("waited: completed,completed");
  });

  it("MAX_CONCURRENT_AGENTS: 50 parallel spawns never exceed the cap, and closing frees a slot", async () => {
    const t = await capturedRoot(({ task, request }) => (task === "hang" ? hang(request.signal) : undefined));
    const limits = spawnLimitsFrom({ maxConcurrent: 3 });
    const signal = new AbortController().signal;
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, () =>
        t.scope.spawn({ template: "general", message: "hang", wait: false }, limits, signal),
      ),
    );
    const ok = outcomes.filter((o): o is PromiseFulfilledResult<AgentSpawnResult> => o.status === "fulfilled");
    expect(ok).toHaveLength(3);
    for (const o of outcomes) {
      if (o.status === "rejected") {
        expect(o.reason).toMatchObject({
          code: "limit_exceeded",
          details: { limit: "MAX_CONCURRENT_AGENTS", value: 3 },
        });
      }
    }
    const running = (await ctx.agents.list("alice", { chatId: t.chat.id })).filter((a) => a.status === "running");
    expect(running).toHaveLength(3);

    // agent_wait is bounded: on hanging agents it returns timed_out with their current state.
    const waited = await t.scope.wait({ agentIds: [ok[1]?.value.agentId ?? ""], timeoutMs: 50 }, signal);
    expect(waited).toMatchObject({ status: "timed_out", timedOut: true, agents: [{ status: "running" }] });

    const closed = await t.scope.close(ok[0]?.value.agentId ?? "");
    expect(closed.cancelled).toEqual([ok[0]?.value.agentId]);
    expect((await repo.get("alice", ok[0]?.value.agentId ?? ""))?.status).toBe("cancelled");
    // The slot is free again: one more spawn fits, the next does not.
    await expect(
      t.scope.spawn({ template: "general", message: "hang", wait: false }, limits, signal),
    ).resolves.toMatchObject({
      status: "running",
    });
    await expect(
      t.scope.spawn({ template: "general", message: "hang", wait: false }, limits, signal),
    ).rejects.toMatchObject({
      details: { limit: "MAX_CONCURRENT_AGENTS" },
    });
    const events = await t.end();
    // Ending the turn cancels the children still running; none is left running.
    expect((await ctx.agents.list("alice", { chatId: t.chat.id })).filter((a) => a.status === "running")).toHaveLength(
      0,
    );
    expect(agentEvents(events).filter((e) => e.type === "agent_finished")).toHaveLength(4);
  });

  it("MAX_TREE_AGENTS: the fourth agent of a tree capped at 3 is refused even after the others finished", async () => {
    const t = await capturedRoot(({ task }) => (task === "quick" ? text("ok") : undefined));
    const limits = spawnLimitsFrom({ maxTreeAgents: 3 });
    const signal = new AbortController().signal;
    for (let i = 0; i < 3; i++) {
      await expect(
        t.scope.spawn({ template: "general", message: "quick", wait: true }, limits, signal),
      ).resolves.toMatchObject({
        status: "completed",
        response: "ok",
      });
    }
    await expect(
      t.scope.spawn({ template: "general", message: "quick", wait: true }, limits, signal),
    ).rejects.toMatchObject({
      code: "limit_exceeded",
      // The refusal says what to do instead.
      message: expect.stringMatching(/agent_send|do the work yourself/),
      details: { limit: "MAX_TREE_AGENTS", value: 3 },
    });
    await t.end();
  });

  it("MESSAGE_MAX_BYTES, MESSAGE_QUEUE_MAX and AGENT_PAIR_RATE_LIMIT refuse at their bound; reading lowers the queue", async () => {
    const gate = deferred();
    let delivered: string[] = [];
    const t = await capturedRoot(({ task, turn, request }) => {
      if (task !== "inbox") return undefined;
      if (turn === 0) {
        return (async function* () {
          await gate.promise;
          yield* calls([{ id: "t", name: "get_current_datetime", args: {} }]);
        })();
      }
      delivered = request.messages.filter((m) => m.role === "user").map((m) => (m as { content: string }).content);
      return text("read them");
    });
    const signal = new AbortController().signal;
    const child = await t.scope.spawn(
      { template: "general", message: "inbox", wait: false },
      spawnLimitsFrom({}),
      signal,
    );
    // Its first model turn has begun (and read its still-empty queue): what is sent now waits for the next turn.
    await until(
      () => t.fake.requests.some((r) => r.messages[0]?.role === "user" && r.messages[0].content === "inbox"),
      "the child's first turn",
    );

    const size = sendLimitsFrom({ messageMaxBytes: 10 });
    await expect(t.scope.send({ targetAgentId: child.agentId, message: "é".repeat(5) }, size)).resolves.toMatchObject({
      sent: true,
    });
    await expect(
      t.scope.send({ targetAgentId: child.agentId, message: `${"é".repeat(5)}x` }, size),
    ).rejects.toMatchObject({
      code: "limit_exceeded",
      details: { limit: "MESSAGE_MAX_BYTES", value: 10 },
    });

    const queue = sendLimitsFrom({ queueMax: 3 });
    await expect(t.scope.send({ targetAgentId: child.agentId, message: "two" }, queue)).resolves.toMatchObject({
      queueDepth: 2,
      delivery: "queued",
    });
    await expect(t.scope.send({ targetAgentId: child.agentId, message: "three" }, queue)).resolves.toMatchObject({
      queueDepth: 3,
    });
    await expect(t.scope.send({ targetAgentId: child.agentId, message: "four" }, queue)).rejects.toMatchObject({
      code: "limit_exceeded",
      details: { limit: "MESSAGE_QUEUE_MAX", value: 3 },
    });

    // The child's next model turn reads the three queued messages, and the count drops to zero.
    gate.resolve();
    await t.scope.wait({ agentIds: [child.agentId], timeoutMs: 10_000 }, signal);
    expect(delivered.slice(1)).toEqual([
      expect.stringContaining("éééé"),
      expect.stringContaining("two"),
      expect.stringContaining("three"),
    ]);
    expect((await repo.get("alice", child.agentId))?.queueDepth).toBe(0);

    // Pair rate: 3 sends a minute from the root to this child; the 4th in the window is refused.
    const rate = sendLimitsFrom({ pairRatePerMinute: 3 });
    const other = await t.scope.spawn(
      { template: "general", message: "inbox", wait: false },
      spawnLimitsFrom({}),
      signal,
    );
    // (4 messages from root to `child` already counted this minute under the default rate of 10.)
    for (let i = 0; i < 3; i++) {
      await expect(t.scope.send({ targetAgentId: other.agentId, message: `m${i}` }, rate)).resolves.toMatchObject({
        sent: true,
      });
    }
    await expect(t.scope.send({ targetAgentId: other.agentId, message: "m3" }, rate)).rejects.toMatchObject({
      code: "limit_exceeded",
      details: { limit: "AGENT_PAIR_RATE_LIMIT", value: 3 },
    });
    gate.resolve();
    await t.end();
  });

  it("the pair window slides: a send a minute after the oldest one fits again", async () => {
    const rootAgent = await repo.createRoot({
      userId: "window",
      chatId: null,
      provider: null,
      model: null,
      task: "t",
      instanceId: "test",
    });
    const limits = { queueMax: 1000, pairRatePerMinute: 2 };
    const send = (nowMs: number) =>
      repo.enqueue({
        userId: "window",
        rootId: rootAgent.id,
        senderId: "someone",
        targetId: rootAgent.id,
        body: "hi",
        limits,
        nowMs,
      });
    const t0 = Date.now();
    await send(t0);
    await send(t0 + 30_000);
    await expect(send(t0 + 59_999)).rejects.toMatchObject({ details: { limit: "AGENT_PAIR_RATE_LIMIT", value: 2 } });
    await expect(send(t0 + 60_000)).resolves.toMatchObject({ queueDepth: 3 });
  });
});

describe("message order", () => {
  it("delivers messages queued in the same millisecond in the order they were queued", async () => {
    const rootAgent = await repo.createRoot({
      userId: "order",
      chatId: null,
      provider: null,
      model: null,
      task: "t",
      instanceId: "test",
    });
    const at = Date.now();
    for (let i = 0; i < 8; i++) {
      await repo.enqueue({
        userId: "order",
        rootId: rootAgent.id,
        senderId: `s${i}`,
        targetId: rootAgent.id,
        body: `m${i}`,
        limits: { queueMax: 100, pairRatePerMinute: 10 },
        nowMs: at,
      });
    }
    expect((await repo.consume(rootAgent.id)).map((m) => m.body)).toEqual([
      "m0",
      "m1",
      "m2",
      "m3",
      "m4",
      "m5",
      "m6",
      "m7",
    ]);
  });
});

// On a fake clock for setTimeout, which arms the agents' time limits: the test need not wait out the child's second
// of real time. Not concurrent with other tests (they would share the clock).
describe("runs cut short at their wall time are never reported completed", () => {
  it("timeout: a child that outlives its wall time answers in a grace turn and is marked timeout", async () => {
    await setSettings("slow", "agent_spawn", { timeSeconds: 1 });
    const model = taskModel(({ task, turn, request }) => {
      if (task === "go") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "slow" } }]);
        const r = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`${r.status}: ${r.response}`);
      }
      if (task === "slow") {
        const last = request.messages.at(-1);
        if (last?.role === "user" && last.content.startsWith("[Toolhost]")) return text("partial answer after timeout");
        return hang(request.signal);
      }
      return undefined;
    });
    const { service, chat } = await newChat(model, "slow");
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    let events: ChatTurnEvent[];
    try {
      const turn = runTurn(service, "slow", chat.id, "go");
      // The child waits in its first turn: its limit is armed (on the fake clock, which stands still).
      const asked = () =>
        model.requests.some((r) => {
          const first = r.messages.find((m) => m.role === "user");
          return first?.role === "user" && first.content === "slow";
        });
      await until(asked, "the child to get under way");
      await vi.advanceTimersByTimeAsync(999);
      // No wait to prove the limit has not fired: when it fires, it aborts the child's loop at once (stopRun), and
      // with it the signal of the model request the child waits in.
      const waiting = model.requests.filter((r) => r.messages.some((m) => m.role === "user" && m.content === "slow"));
      expect(
        waiting.map((r) => r.signal?.aborted),
        "stopped before its time limit",
      ).toEqual([false]);
      const early = await ctx.agents.list("slow", { chatId: chat.id });
      expect(
        early.map((a) => a.status),
        "stopped before its time limit",
      ).toEqual(["running"]);
      await vi.advanceTimersByTimeAsync(1);
      events = await turn;
    } finally {
      // Timers armed on the fake clock (retries, leases, batched writes) would never fire after it is gone: run
      // them now, so the context's close does not wait out its backstops.
      await vi.runOnlyPendingTimersAsync();
      vi.useRealTimers();
    }
    expect(finalText(events)).toBe("timeout: partial answer after timeout");
    const [agent] = await ctx.agents.list("slow", { chatId: chat.id });
    expect(agent?.status).toBe("timeout");
  });
});

// The blocks from here on run concurrently (each test has users and chats of its own; none counts the instance's
// agents).
describe.concurrent("runs cut short are never reported completed", () => {
  it("max_turns: after the turn limit, one grace turn without tools produces the answer", async () => {
    await setSettings("turns", "agent_spawn", { maxTurns: 2 });
    let graceTools: string[] | undefined;
    const model = taskModel(({ task, turn, request }) => {
      if (task === "go") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "loop" } }]);
        const r = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`${r.status}: ${r.response}`);
      }
      if (task === "loop") {
        const last = request.messages.at(-1);
        if (last?.role === "user" && last.content.startsWith("[Toolhost]")) {
          graceTools = request.tools.map((t) => t.name);
          return text("final report from the grace turn");
        }
        return calls([{ id: `t${turn}`, name: "get_current_datetime", args: {} }], `step ${turn}. `);
      }
      return undefined;
    });
    const { service, chat } = await newChat(model, "turns");
    const events = await runTurn(service, "turns", chat.id, "go");
    expect(finalText(events)).toBe("max_turns: final report from the grace turn");
    expect(graceTools).toEqual([]);
    const [agent] = await ctx.agents.list("turns", { chatId: chat.id });
    expect(agent?.status).toBe("max_turns");
    expect(agent?.note).toContain("turn limit (2 model turns)");
    expect(agent?.usage.turns).toBe(3);
  });

  it("budget_exhausted: agents stop when the tree's tokens reach its budget, keeping what they produced", async () => {
    // Every turn reports 15 tokens: the root's first turn (15) and the child's first (30) reach a budget of 30.
    await setSettings("budget", "agent_spawn", { tokenBudget: 30 });
    const model = taskModel(({ task, turn, request }) => {
      if (task === "go") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "spend" } }]);
        const r = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult;
        return text(`${r.status}: ${r.response}`);
      }
      if (task === "spend")
        return calls([{ id: `t${turn}`, name: "get_current_datetime", args: {} }], `spent ${turn}.`);
      return undefined;
    });
    const { service, chat } = await newChat(model, "budget");
    const events = await runTurn(service, "budget", chat.id, "go");
    expect(finalText(events)).toBe("budget_exhausted: spent 0.");
    const [agent] = await ctx.agents.list("budget", { chatId: chat.id });
    expect(agent?.status).toBe("budget_exhausted");
    expect(agent?.usage.turns).toBe(1);
  });
});

describe.concurrent("agent_send wakes an idle agent, and its answer comes back to the sender", () => {
  it("delivers a follow-up to a finished child, runs a turn for it, and queues the reply to the parent", async () => {
    let rootInbox: string[] = [];
    let helperSaw: string[] = [];
    const model = taskModel(({ task, turn, request }) => {
      if (task === "converse") {
        const spawned = lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult | undefined;
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "helper" } }]);
        if (turn === 1) {
          return calls([
            {
              id: "m",
              name: "agent_send",
              args: { agentId: spawned?.parentId, targetAgentId: spawned?.agentId, message: "and the second part?" },
            },
          ]);
        }
        if (turn === 2) {
          const first = request.messages.find((m) => m.role === "tool" && m.results[0]?.name === "agent_spawn");
          const id =
            first?.role === "tool" ? (JSON.parse(first.results[0]?.content ?? "{}") as AgentSpawnResult).agentId : "";
          return calls([{ id: "w", name: "agent_wait", args: { agentIds: [id] } }]);
        }
        rootInbox = request.messages
          .filter((m) => m.role === "user")
          .map((m) => (m as { content: string }).content)
          .slice(1);
        return text("thanks");
      }
      if (task === "helper") {
        helperSaw = request.messages.filter((m) => m.role === "user").map((m) => (m as { content: string }).content);
        return text(turn === 0 ? "first part" : "second part");
      }
      return undefined;
    });
    const { service, chat } = await newChat(model, "mail");
    const events = await runTurn(service, "mail", chat.id, "converse");
    expect(finalText(events)).toBe("thanks");
    const sent = events.find((e) => e.type === "tool_result" && !("agent" in e) && e.name === "agent_send");
    expect(sent).toMatchObject({ ok: true, result: { sent: true, delivery: "started", queueDepth: 1 } });
    expect(helperSaw.at(-1)).toMatch(/^\[Message from agent [0-9a-f-]+\]\nand the second part\?$/);
    expect(rootInbox).toEqual([expect.stringMatching(/\[Reply\] second part$/)]);
    const [helper] = await ctx.agents.list("mail", { chatId: chat.id });
    expect(helper).toMatchObject({ status: "completed", result: "second part", queueDepth: 0 });
    // Two runs: two agent_started/agent_finished pairs on the stream.
    expect(agentEvents(events).filter((e) => e.type === "agent_finished")).toHaveLength(2);
  });
});

describe.concurrent("approvals", () => {
  it("a child's call goes through the chat's approval gate; the ask reaches the chat's surface tagged with its path", async () => {
    await ctx.settings.update("gated", "bash", { enabled: true }, { admin: true });
    const asks: ApprovalRequestView[] = [];
    const model = taskModel(({ task, turn, request }) => {
      if (task === "delegate a command") {
        if (turn === 0) return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "run" } }]);
        return text(
          (lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult | undefined)?.response ?? "",
        );
      }
      if (task === "run") {
        if (turn === 0) return calls([{ id: "b", name: "bash", args: { command: "echo approved-output" } }]);
        return text(`bash said: ${JSON.stringify(lastResult(request.messages, "bash")?.value)}`);
      }
      return undefined;
    });
    const service = new ChatService({
      chats: ctx.chats,
      runtime: ctx.runtime,
      env: {},
      chatRoots: null,
      adapterFactory: () => model,
      agents: ctx.agents,
      approvals: ctx.approvals,
    });
    const chat = await service.createChat("gated", { provider: "openai", model: "fake", workingDirectory: root });
    const turn = await service.prepareTurn("gated", chat.id, "delegate a command", {
      responder: {
        async answer(request) {
          asks.push(request);
          return { decision: "allow_once", decidedBy: "test" };
        },
      },
    });
    const events: ChatTurnEvent[] = [];
    for await (const event of turn.run()) events.push(event);
    const [child] = await ctx.agents.list("gated", { chatId: chat.id });
    expect(asks).toHaveLength(1);
    // One path representation: the agent's own path, on the ask, its event's tag and the stored approval.
    expect(child?.path).toMatch(new RegExp(`/${child?.id}$`));
    expect(asks[0]).toMatchObject({ tool: "bash", agentPath: child?.path });
    const requested = events.find((e) => e.type === "approval_requested");
    expect(requested).toMatchObject({ agent: { id: child?.id, depth: 1, path: child?.path }, agentPath: child?.path });
    const stored = await ctx.approvals.repository.get((requested as { approvalId: string }).approvalId);
    expect(stored?.agentPath).toBe(child?.path);
    expect(finalText(events)).toContain("approved-output");
  });
});

describe.concurrent("cancellation follows the tree", () => {
  it("a chat cancel kills a grandchild's running sleep process within 2 s", async () => {
    await ctx.settings.update("cancel", "bash", { enabled: true }, { admin: true });
    // A unique duration marks the grandchild's process; it is found by its command line in /proc (host pids,
    // whether or not the shell sandbox renumbers pids inside its namespace).
    const marker = "29.4173";
    const model = taskModel(({ task, turn }) => {
      if (task === "delegate") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "child" } }]);
        return text("done");
      }
      if (task === "child") {
        if (turn === 0)
          return calls([{ id: "g", name: "agent_spawn", args: { template: "general", message: "grandchild" } }]);
        return text("child done");
      }
      if (task === "grandchild") {
        if (turn === 0) {
          return calls([{ id: "b", name: "bash", args: { command: `exec sleep ${marker}` } }]);
        }
        return text("grandchild done");
      }
      return undefined;
    });
    const { service, chat } = await newChat(model, "cancel", root);
    const controller = new AbortController();
    const turn = runTurn(service, "cancel", chat.id, "delegate", controller.signal);
    let pid = 0;
    await until(() => {
      pid = sleepPid(marker);
      return pid > 0;
    }, "the grandchild's sleep");
    expect(alive(pid)).toBe(true);

    controller.abort();
    await until(() => !alive(pid), "the sub-agent's process to be gone", { timeoutMs: 2_000, intervalMs: 20 });
    expect(alive(pid)).toBe(false);

    const events = await turn;
    expect(doneOf(events).reason).toBe("aborted");
    const agents = await ctx.agents.list("cancel", { chatId: chat.id });
    expect(agents.map((a) => [a.depth, a.status]).sort()).toEqual([
      [1, "cancelled"],
      [2, "cancelled"],
    ]);
  });
});

/** The host pid of the running `sleep <marker>`, or 0. */
function sleepPid(marker: string): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv[0]?.endsWith("sleep") && argv[1] === marker) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return 0;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
