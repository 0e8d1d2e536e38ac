/**
 * A sub-agent never gains more than its lineage allows, however it is started: a run woken by a message gets the
 * tools its first run had (its template's intersected with every ancestor's), even when its parent's run is over;
 * mail, waits and replies stay within their documented bounds.
 */
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ChatService } from "../../src/app/chat-service.js";
import type { ChatTurnEvent } from "../../src/app/chat-types.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { type AgentSpawnResult, DEFAULT_AGENT_WAIT_MS, MESSAGE_MAX_BYTES } from "../../src/core/agents.js";
import { CUT_MARKER_PATTERN } from "../../src/core/cut-rules.js";
import type { EffectiveToolSettings } from "../../src/core/types.js";
import type { ConversationMessage, ProviderAdapter } from "../../src/providers/types.js";
import { AgentRepository } from "../../src/storage/agent-repository.js";
import { agentWaitTool } from "../../src/tools/builtin/agent-wait.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { calls, hang, lastResult, taskModel, text } from "./fake-model.js";

let root: string;
let ctx: AppContext;

beforeAll(async () => {
  root = tempDir("toolhost-agents-contain-");
  writeFileSync(
    join(root, "config.json"),
    JSON.stringify({
      agents: {
        spawner: { description: "Lists and delegates.", tools: ["list_directory", "agent_spawn"] },
      },
    }),
  );
  ctx = await createAppContext({
    dataDir: join(root, "data"),
    logger: recordingLogger(),
    env: { TOOLHOST_CONFIG: join(root, "config.json"), TOOLHOST_AGENT_TEMPLATES_DIR: join(root, "none") },
    agentOptions: { heartbeatMs: 0, graceTurnMs: 5_000 },
  });
});

afterAll(async () => {
  await ctx?.close();
  rmSync(root, { recursive: true, force: true });
});

/** The last agent_spawn result of a conversation (an empty object before one). */
function spawnedBy(messages: ConversationMessage[]): AgentSpawnResult {
  return (lastResult(messages, "agent_spawn")?.value ?? {}) as AgentSpawnResult;
}

async function runTurn(
  model: ProviderAdapter,
  userId: string,
  content: string,
  signal?: AbortSignal,
): Promise<ChatTurnEvent[]> {
  const service = new ChatService({
    chats: ctx.chats,
    runtime: ctx.runtime,
    env: {},
    chatRoots: null,
    adapterFactory: () => model,
    agents: ctx.agents,
  });
  const chat = await service.createChat(userId, { provider: "openai", model: "fake" });
  const turn = await service.prepareTurn(userId, chat.id, content);
  const events: ChatTurnEvent[] = [];
  for await (const event of turn.run(signal)) events.push(event);
  return events;
}

describe("a run woken by a message keeps its lineage's tools", () => {
  it("a grandchild woken after its parent finished gets no tool its parent lacked", async () => {
    const leafTools: string[][] = [];
    let leafId = "";
    const model = taskModel(({ task, turn, request }) => {
      if (task === "root") {
        if (turn === 0) return calls([{ id: "s", name: "agent_spawn", args: { template: "spawner", message: "mid" } }]);
        if (turn === 1) {
          const me = spawnedBy(request.messages).parentId;
          return calls([
            { id: "m", name: "agent_send", args: { agentId: me, targetAgentId: leafId, message: "more" } },
          ]);
        }
        if (turn === 2) return calls([{ id: "w", name: "agent_wait", args: { agentIds: [leafId] } }]);
        return text("done");
      }
      if (task === "mid") {
        if (turn === 0)
          return calls([{ id: "g", name: "agent_spawn", args: { template: "general", message: "leaf" } }]);
        leafId = spawnedBy(request.messages).agentId;
        return text("mid done");
      }
      if (task === "leaf") {
        leafTools.push(request.tools.map((t) => t.name).sort());
        return text(`leaf answer ${turn}`);
      }
      return undefined;
    });
    const events = await runTurn(model, "contain", "root");
    const sent = events.find((e) => e.type === "tool_result" && !("agent" in e) && e.name === "agent_send");
    expect(sent).toMatchObject({ ok: true, result: { delivery: "started" } });
    expect(leafTools).toHaveLength(2);
    expect(leafTools[0]).toEqual(["agent_spawn", "list_directory"]);
    expect(leafTools[1]).toEqual(leafTools[0]);
  });
});

describe("mail to an agent that ended", () => {
  it("refuses a message to a cancelled agent, which would never read it, and says what to do instead", async () => {
    let sent: unknown;
    let childId = "";
    let rootId = "";
    const model = taskModel(({ task, turn, request }) => {
      if (task === "root") {
        if (turn === 0)
          return calls([
            { id: "s", name: "agent_spawn", args: { template: "general", message: "sleeper", wait: false } },
          ]);
        if (turn === 1) {
          ({ agentId: childId, parentId: rootId } = spawnedBy(request.messages));
          return calls([{ id: "c", name: "agent_close", args: { agentId: childId } }]);
        }
        if (turn === 2) {
          return calls([
            { id: "m", name: "agent_send", args: { agentId: rootId, targetAgentId: childId, message: "still there?" } },
          ]);
        }
        sent = lastResult(request.messages, "agent_send");
        return text("done");
      }
      if (task === "sleeper") return hang(request.signal);
      return undefined;
    });
    await runTurn(model, "ended", "root");
    expect(sent).toMatchObject({
      ok: false,
      value: { error: { code: "access_denied", message: expect.stringContaining("cancelled") } },
    });
    expect((sent as { value: { error: { message: string } } }).value.error.message).toMatch(/agent_spawn/);
    const child = await ctx.agents.get("ended", childId);
    expect(child).toMatchObject({ status: "cancelled", queueDepth: 0 });
  });
});

describe("a woken agent's reply stays within the message size", () => {
  it("cuts a reply larger than MESSAGE_MAX_BYTES by bytes (multi-byte text too), with the cut marker", async () => {
    let inbox: string[] = [];
    let helperId = "";
    const huge = "€".repeat(60_000); // 180,000 bytes of UTF-8 in 60,000 UTF-16 units
    const model = taskModel(({ task, turn, request }) => {
      if (task === "root") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "helper" } }]);
        if (turn === 1) {
          const spawned = spawnedBy(request.messages);
          helperId = spawned.agentId;
          return calls([
            {
              id: "m",
              name: "agent_send",
              args: { agentId: spawned.parentId, targetAgentId: helperId, message: "more" },
            },
          ]);
        }
        if (turn === 2) return calls([{ id: "w", name: "agent_wait", args: { agentIds: [helperId] } }]);
        inbox = request.messages
          .filter((m) => m.role === "user")
          .map((m) => (m as { content: string }).content)
          .slice(1);
        return text("done");
      }
      if (task === "helper") return text(turn === 0 ? "first" : huge);
      return undefined;
    });
    await runTurn(model, "bigreply", "root");
    expect(inbox).toHaveLength(1);
    const reply = inbox[0] as string;
    const body = reply.slice(reply.indexOf("\n") + 1);
    expect(body.startsWith("[Reply] €€€")).toBe(true);
    expect(Buffer.byteLength(body, "utf8")).toBeLessThanOrEqual(MESSAGE_MAX_BYTES);
    expect(body).toMatch(CUT_MARKER_PATTERN);
    expect(body).not.toContain("\uFFFD");
  });
});

describe("agent_wait's budget covers the wait it makes", () => {
  it("a short timeoutMs raised by the user's minTimeoutMs still gets a budget for the whole wait", () => {
    const budget = agentWaitTool.timeoutMs?.({ timeoutMs: 0 }, {
      values: { minTimeoutMs: 30_000 },
    } as unknown as EffectiveToolSettings);
    // The wait lasts 30 s (the user's minimum); a budget of 5 s cut it off with a timeout error.
    expect(budget).toBeGreaterThanOrEqual(30_000);
    expect(agentWaitTool.timeoutMs?.({}, { values: {} } as unknown as EffectiveToolSettings)).toBeGreaterThanOrEqual(
      DEFAULT_AGENT_WAIT_MS,
    );
  });
});

describe("a spent token budget holds for runs woken by a message", () => {
  it("a message to an idle agent of a tree over its budget does not start a model turn", async () => {
    await ctx.settings.update("spent", "agent_spawn", { parameters: { tokenBudget: 40 } }, { admin: true });
    let helperTurns = 0;
    let sent: unknown;
    let refused: unknown;
    let ids = { agentId: "", parentId: "" };
    const model = taskModel(({ task, turn, request }) => {
      if (task === "root") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "helper" } }]);
        if (turn === 1) {
          ids = spawnedBy(request.messages);
          // After this turn the tree has used 15 + 15 + 15 = 45 tokens of its 40.
          return calls([
            {
              id: "m",
              name: "agent_send",
              args: { agentId: ids.parentId, targetAgentId: ids.agentId, message: "more" },
            },
          ]);
        }
        if (turn === 2) {
          sent = lastResult(request.messages, "agent_send");
          return calls([{ id: "s2", name: "agent_spawn", args: { template: "general", message: "helper" } }]);
        }
        refused = lastResult(request.messages, "agent_spawn");
        return text("done");
      }
      if (task === "helper") {
        helperTurns++;
        return text(`answer ${turn}`);
      }
      return undefined;
    });
    await runTurn(model, "spent", "root");
    expect(sent).toMatchObject({ ok: true, value: { delivery: "queued" } });
    expect(helperTurns).toBe(1);
    // Spawning is refused too, saying what to do instead.
    expect(refused).toMatchObject({
      ok: false,
      value: {
        error: {
          code: "limit_exceeded",
          message: expect.stringMatching(/yourself/),
          details: { limit: "TREE_TOKEN_BUDGET", value: 40 },
        },
      },
    });
  });
});

describe("replies do not answer replies", () => {
  it("two agents that messaged each other settle: a reply wakes its reader but is not answered back", async () => {
    const controller = new AbortController();
    let a = "";
    let b = "";
    let root = "";
    let bRuns = 0;
    const model = taskModel(({ task, turn, request }) => {
      if (task === "root") {
        if (turn === 0)
          return calls([{ id: "a", name: "agent_spawn", args: { template: "general", message: "pinger" } }]);
        if (turn === 1) {
          ({ agentId: a, parentId: root } = spawnedBy(request.messages));
          return calls([{ id: "b", name: "agent_spawn", args: { template: "general", message: "ponger" } }]);
        }
        if (turn === 2) {
          b = spawnedBy(request.messages).agentId;
          return calls([
            { id: "m", name: "agent_send", args: { agentId: root, targetAgentId: a, message: "greet B" } },
          ]);
        }
        return hang(request.signal);
      }
      if (task === "pinger") {
        if (turn === 0) return text("A ready");
        if (turn === 1)
          return calls([{ id: "h", name: "agent_send", args: { agentId: a, targetAgentId: b, message: "hello B" } }]);
        return text(`A ${turn}`);
      }
      if (task === "ponger") {
        if (turn > 0) bRuns++;
        return text(`B ${turn}`);
      }
      return undefined;
    });
    const done = runTurn(model, "pingpong", "root", controller.signal);
    const settled = async () => {
      if (!a || !b || ctx.agents.isRunningHere(a) || ctx.agents.isRunningHere(b)) return false;
      const [ra, rb] = await Promise.all([ctx.agents.get("pingpong", a), ctx.agents.get("pingpong", b)]);
      return ra?.status === "completed" && rb?.status === "completed" && ra.queueDepth === 0 && rb.queueDepth === 0;
    };
    try {
      await until(settled, "A and B to settle with empty queues");
    } finally {
      controller.abort();
      await done;
    }
    expect(bRuns).toBeLessThanOrEqual(2);
  });
});

describe("errors quote a long argument briefly", () => {
  it("each agent tool's refusal of an unknown or forged id quotes at most ~100 characters of it", async () => {
    const long = `${"z".repeat(5000)}-end`;
    const results: Record<string, { ok: boolean; value: unknown }> = {};
    const model = taskModel(({ task, turn, request }) => {
      if (task !== "root") return undefined;
      if (turn === 0) {
        return calls([
          { id: "t", name: "agent_spawn", args: { template: long, message: "m" } },
          { id: "p", name: "agent_spawn", args: { template: "general", message: "m", parentId: long } },
          { id: "s", name: "agent_send", args: { agentId: long, targetAgentId: long, message: "m" } },
          { id: "w", name: "agent_wait", args: { agentIds: [long] } },
          { id: "c", name: "agent_close", args: { agentId: long } },
        ]);
      }
      const tool = request.messages.at(-1);
      if (tool?.role === "tool") {
        for (const r of tool.results) results[r.id] = { ok: r.ok, value: JSON.parse(r.content) };
      }
      return text("done");
    });
    await runTurn(model, "longids", "root");
    expect(Object.keys(results).sort()).toEqual(["c", "p", "s", "t", "w"]);
    for (const [id, result] of Object.entries(results)) {
      const message = (result.value as { error: { message: string } }).error.message;
      expect(result.ok, id).toBe(false);
      expect(message.length, `${id}: ${message.slice(0, 80)}`).toBeLessThan(400);
    }
  });
});

describe("a wake that fails before its run starts", () => {
  it("ends the woken agent as error and frees its running slot", async () => {
    await ctx.settings.update("wakefail", "agent_spawn", { parameters: { maxConcurrent: 1 } }, { admin: true });
    let helperId = "";
    let respawn: unknown;
    const original = AgentRepository.prototype.transcript;
    const spy = vi.spyOn(AgentRepository.prototype, "transcript").mockImplementation(async function (
      this: AgentRepository,
      userId: string,
      id: string,
    ) {
      if (id === helperId) throw new Error("disk unreadable");
      return original.call(this, userId, id);
    });
    const model = taskModel(({ task, turn, request }) => {
      if (task === "root") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "helper" } }]);
        if (turn === 1) {
          const ids = spawnedBy(request.messages);
          helperId = ids.agentId;
          return calls([
            { id: "m", name: "agent_send", args: { agentId: ids.parentId, targetAgentId: helperId, message: "more" } },
          ]);
        }
        if (turn === 2)
          return calls([{ id: "s2", name: "agent_spawn", args: { template: "general", message: "second" } }]);
        respawn = lastResult(request.messages, "agent_spawn");
        return text("done");
      }
      if (task === "helper" || task === "second") return text("ok");
      return undefined;
    });
    try {
      await runTurn(model, "wakefail", "root");
    } finally {
      spy.mockRestore();
    }
    // The slot the failed wake took is free again: the next spawn (maxConcurrent 1) runs.
    expect(respawn).toMatchObject({ ok: true, value: { status: "completed" } });
    expect(await ctx.agents.get("wakefail", helperId)).toMatchObject({
      status: "error",
      note: expect.stringContaining("disk unreadable"),
    });
  });
});
