/**
 * Agent limits on PostgreSQL with two app instances sharing one throwaway database: the pair rate window, the
 * queue cap, the per-parent quota and the running-slot cap hold when both instances reserve at once, and a chat
 * turn spawns and finishes a sub-agent on PostgreSQL.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../src/app/chat-service.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import type { AgentSpawnResult } from "../../src/core/agents.js";
import { AgentRepository } from "../../src/storage/agent-repository.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";
import { calls, lastResult, taskModel, text } from "./fake-model.js";

const hasPg = findPgBin() !== undefined;
let databaseUrl: string;
let dir: string;
let a: AppContext;
let b: AppContext;
let repoA: AgentRepository;
let repoB: AgentRepository;

beforeAll(async () => {
  if (!hasPg) return;
  databaseUrl = await freshPostgresDatabase();
  dir = tempDir("toolhost-agents-pg-");
  const open = (name: string) =>
    createAppContext({
      dataDir: join(dir, name),
      databaseUrl,
      logger: recordingLogger(),
      env: { TOOLHOST_CONFIG: join(dir, "no-config.json") },
      agentOptions: { heartbeatMs: 0, instanceId: name },
    });
  a = await open("a");
  b = await open("b");
  repoA = new AgentRepository(a.database.db);
  repoB = new AgentRepository(b.database.db);
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const wide = { maxDepth: 5, maxSubAgents: 1000, maxTreeAgents: 1000, maxConcurrent: 1000, tokenBudget: 1e9 };

async function tree(userId: string) {
  return repoA.createRoot({ userId, chatId: null, provider: "openai", model: "m", task: "t", instanceId: "a" });
}

function reserve(repo: AgentRepository, userId: string, parentId: string, limits = wide) {
  return repo.reserveChild({
    userId,
    parentId,
    template: "general",
    task: "t",
    provider: null,
    model: null,
    maxTurns: 1,
    timeMs: 1000,
    instanceId: repo === repoA ? "a" : "b",
    limits,
  });
}

describe.skipIf(!hasPg)("agent limits across two instances sharing PostgreSQL", () => {
  it("AGENT_PAIR_RATE_LIMIT: 25 sends of one pair through both instances at once → exactly 10 in the window", async () => {
    const root = await tree("pair");
    const target = await reserve(repoA, "pair", root.id);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) =>
        (i % 2 === 0 ? repoA : repoB).enqueue({
          userId: "pair",
          rootId: root.id,
          senderId: root.id,
          targetId: target.id,
          body: `m${i}`,
          limits: { queueMax: 1000, pairRatePerMinute: 10 },
        }),
      ),
    );
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(10);
    for (const o of outcomes) {
      if (o.status === "rejected") {
        expect(o.reason).toMatchObject({
          code: "limit_exceeded",
          details: { limit: "AGENT_PAIR_RATE_LIMIT", value: 10 },
        });
      }
    }
    expect((await repoB.get("pair", target.id))?.queueDepth).toBe(10);
    // The other direction is its own pair.
    await expect(
      repoB.enqueue({
        userId: "pair",
        rootId: root.id,
        senderId: target.id,
        targetId: root.id,
        body: "back",
        limits: { queueMax: 1000, pairRatePerMinute: 10 },
      }),
    ).resolves.toMatchObject({ queueDepth: 1 });
  });

  it("MESSAGE_QUEUE_MAX: 30 senders at once to a queue of 5 → exactly 5 queued; reading frees the places", async () => {
    const root = await tree("queue");
    const target = await reserve(repoA, "queue", root.id);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) =>
        (i % 2 === 0 ? repoA : repoB).enqueue({
          userId: "queue",
          rootId: root.id,
          senderId: `sender-${i}`,
          targetId: target.id,
          body: `m${i}`,
          limits: { queueMax: 5, pairRatePerMinute: 10 },
        }),
      ),
    );
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(5);
    const refused = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ details: { limit: "MESSAGE_QUEUE_MAX", value: 5 } });
    expect(await repoB.consume(target.id)).toHaveLength(5);
    expect((await repoA.get("queue", target.id))?.queueDepth).toBe(0);
  });

  it("50 parallel spawns through both instances never exceed the running cap (4) nor the per-parent quota (7)", async () => {
    const root = await tree("spawn");
    const capped = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) =>
        reserve(i % 2 === 0 ? repoA : repoB, "spawn", root.id, { ...wide, maxConcurrent: 4 }),
      ),
    );
    expect(capped.filter((o) => o.status === "fulfilled")).toHaveLength(4);
    expect((await repoA.list("spawn", { rootId: root.id })).length).toBe(4);

    const root2 = await tree("spawn");
    const quota = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) =>
        reserve(i % 2 === 0 ? repoA : repoB, "spawn", root2.id, { ...wide, maxSubAgents: 7 }),
      ),
    );
    expect(quota.filter((o) => o.status === "fulfilled")).toHaveLength(7);
    for (const o of quota) {
      if (o.status === "rejected")
        expect(o.reason).toMatchObject({ details: { limit: "DEFAULT_MAX_SUB_AGENTS", value: 7 } });
    }
    expect((await repoB.get("spawn", root2.id))?.childrenCount).toBe(7);
  });

  it("a chat turn on PostgreSQL spawns a sub-agent and quotes it; finishing frees its slot", async () => {
    const model = taskModel(({ task, turn, request }) => {
      if (task === "ask") {
        if (turn === 0)
          return calls([{ id: "s", name: "agent_spawn", args: { template: "general", message: "helper" } }]);
        return text(
          `got: ${(lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult | undefined)?.response}`,
        );
      }
      if (task === "helper") return text("answer from postgres");
      return undefined;
    });
    const service = new ChatService({
      chats: a.chats,
      runtime: a.runtime,
      env: {},
      chatRoots: null,
      adapterFactory: () => model,
      agents: a.agents,
    });
    const chat = await service.createChat("pgchat", { provider: "openai", model: "fake" });
    const turn = await service.prepareTurn("pgchat", chat.id, "ask");
    const events = [];
    for await (const event of turn.run()) events.push(event);
    const done = events.at(-1);
    expect(done?.type === "done" && done.messages.at(-1)).toMatchObject({ content: "got: answer from postgres" });
    const [agent] = await b.agents.list("pgchat", { chatId: chat.id });
    expect(agent).toMatchObject({ status: "completed", depth: 1, result: "answer from postgres" });
    expect(agent?.usage.inputTokens).toBe(10);
  });
});
