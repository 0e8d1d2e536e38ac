/**
 * A whole agent tree moves with its chat turn: two application contexts (two instances) on one SQLite data
 * directory; instance A runs a turn whose sub-agent spawned a sub-agent of its own, which is running a `sleep` when
 * A hands the turn over (graceful shutdown). Instance B takes the turn over and resumes both agents from their
 * journals, parents before children: the grandchild's finished first call is not run again, its interrupted `sleep`
 * is reported to it, and each parent's waiting agent_spawn call, run again, waits for the agent it had spawned (no
 * second spawn) and answers with its result. The fake model is in-process; the tool calls and databases are real.
 */
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ChatService } from "../../src/app/chat-service.js";
import type { ChatTurnEvent } from "../../src/app/chat-types.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import type { AgentSpawnResult } from "../../src/core/agents.js";
import { sleeping } from "../helpers/processes.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { calls, lastResult, taskModel, text } from "./fake-model.js";

let root: string;
const contexts: AppContext[] = [];

beforeAll(async () => {
  root = tempDir("toolhost-handover-");
  for (let i = 0; i < 2; i++) {
    contexts.push(
      await createAppContext({
        dataDir: join(root, "data"),
        logger: recordingLogger(),
        // A long lease: nothing moves unless handed over (the test drives B's sweep itself).
        env: { TOOLHOST_CONFIG: join(root, "no-config.json"), TOOLHOST_TURN_LEASE_MS: "600000" },
        agentOptions: { heartbeatMs: 0 },
      }),
    );
  }
  for (const tool of ["bash", "agent_spawn"])
    await contexts[0]!.settings.update(
      "u",
      tool,
      { enabled: true, parameters: { approval: "allow" } },
      { admin: true },
    );
});

afterAll(async () => {
  for (const ctx of contexts) await ctx.close();
  rmSync(root, { recursive: true, force: true });
});

it("a turn handed over mid-grandchild: the other instance resumes the whole tree, nothing run twice, every parent answered", async () => {
  const [a, b] = contexts as [AppContext, AppContext];
  const marker = `${300 + Math.floor(Math.random() * 100)}.${process.pid}${Math.floor(Math.random() * 1e6)}`;
  const ran = join(root, `ran-${marker}`);
  const response = (request: Parameters<Parameters<typeof taskModel>[0]>[0]["request"]) =>
    (lastResult(request.messages, "agent_spawn")?.value as AgentSpawnResult | undefined)?.response;
  const model = taskModel(({ task, turn, request }) => {
    if (task === "go") {
      if (turn === 0) return calls([{ id: "s0", name: "agent_spawn", args: { template: "general", message: "L1" } }]);
      return text(`root: ${response(request)}`);
    }
    if (task === "L1") {
      if (turn === 0) return calls([{ id: "s1", name: "agent_spawn", args: { template: "general", message: "L2" } }]);
      return text(`L1 got ${response(request)}`);
    }
    if (task === "L2") {
      if (turn === 0) return calls([{ id: "m", name: "bash", args: { command: `mktemp ${ran}.XXXXXX` } }]);
      if (turn === 1) return calls([{ id: "z", name: "bash", args: { command: `sleep ${marker}` } }]);
      const slept = lastResult(request.messages, "bash")?.value as { error?: { code?: string } } | undefined;
      return text(`L2 resumed (${slept?.error?.code})`);
    }
    return undefined;
  });
  const service = (ctx: AppContext) =>
    new ChatService({
      chats: ctx.chats,
      runtime: ctx.runtime,
      logger: ctx.logger,
      env: {},
      chatRoots: null,
      adapterFactory: () => model,
      agents: ctx.agents,
      turns: ctx.turns,
    });
  const onA = service(a);
  service(b); // B's chat service takes over the turns B's coordinator claims.
  const chat = await onA.createChat("u", { provider: "openai", model: "fake", workingDirectory: root });
  const turn = await onA.prepareTurn("u", chat.id, "go");
  const seenOnA: ChatTurnEvent[] = [];
  const runningOnA = (async () => {
    for await (const event of turn.run()) seenOnA.push(event);
  })();
  await until(() => sleeping(marker).length > 0, "the grandchild's sleep");
  await a.turns.handOver();
  await runningOnA;
  expect(seenOnA.find((e) => e.type === "error")).toMatchObject({ code: "handed_over" });
  await until(() => sleeping(marker).length === 0, "A to stop the sleep it ran");
  await b.turns.tick();
  const messages = await until(async () => {
    const stored = await b.chats.messages(chat.id);
    return stored.length === 4 ? stored : undefined;
  }, "B to complete the turn");
  expect((messages.at(-1)!.content as { content?: string }).content).toBe("root: L1 got L2 resumed (interrupted)");
  expect(readdirSync(root).filter((f) => f.startsWith(`ran-${marker}.`))).toHaveLength(1);
  // A's stream leaves the calls the handover cut to the instance that goes on (it would have said "aborted" for a
  // call whose result the model gets as "interrupted", or gets when it runs again): each root call has exactly one
  // result, on the chat's stored stream.
  const cut = seenOnA.filter((e) => e.type === "tool_result" && !e.ok && e.error.code === "aborted");
  expect(cut).toEqual([]);
  const stored = (await b.turns.repository.eventsAfter(chat.id, 0, 10_000)).map((e) => JSON.parse(e.data));
  const rootResults = stored.filter((e) => e.type === "tool_result" && e.agent === undefined).map((e) => e.id);
  expect(rootResults).toEqual(["s0"]);
  // Two agents, no second spawn; both finished by B, which their rows name.
  const agents = await b.agents.list("u", { chatId: chat.id });
  expect(agents.map((x) => [x.depth, x.status, x.instanceId]).sort()).toEqual([
    [1, "completed", b.agents.instanceId],
    [2, "completed", b.agents.instanceId],
  ]);
});
