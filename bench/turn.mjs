#!/usr/bin/env node
/**
 * One agent turn with 5 tool calls, CPU per turn: Toolhost's tool loop (runToolLoop with the approval gate a chat
 * turn uses) vs the Vercel AI SDK's streamText driving the same tools through toolhost/ai-sdk (so each call runs the
 * same policy, executeTool and audit on both sides). Both read the same model stream from memory — step 1: five
 * read_file calls in parallel, step 2: a text answer — so the comparison is the loop's own cost: accumulating the
 * stream, dispatching the calls, feeding the results back. No network, no provider SDK on either side.
 *
 * Used by bench/run.mjs (group "turn"); run alone: `node bench/turn.mjs`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = (path) => import(join(ROOT, "dist", path));

/** Runs `turns` turns of each side per round, alternating, and returns CPU ms per turn of each (median of rounds). */
export async function measureTurns({ rounds = 5, turns = 60 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "toolhost-bench-turn-"));
  const project = join(dir, "project");
  mkdirSync(project);
  const names = [1, 2, 3, 4, 5].map((i) => `file-${i}.txt`);
  for (const name of names) writeFileSync(join(project, name), `${name}\n`.repeat(40));
  const { createAppContext } = await dist("app/context.js");
  const { runToolLoop } = await dist("loop/run-tool-loop.js");
  const { ApprovalGate } = await dist("app/approvals/gate.js");
  const { toolhostTools } = await dist("adapters/ai-sdk.js");
  const ai = await import("ai");
  const { MockLanguageModelV3 } = await import("ai/test");
  const ctx = await createAppContext({ dataDir: join(dir, "data") });
  const userId = "bench";
  const calls = names.map((name, i) => ({ id: `call_${i}`, name: "read_file", input: { path: name } }));

  // Toolhost: a ProviderAdapter yielding the normalized stream of each step.
  let turnNo = 0;
  const adapter = {
    name: "openai",
    async *stream(request) {
      const hasResults = request.messages.some((m) => m.role === "tool");
      if (!hasResults) {
        for (const c of calls) {
          const args = JSON.stringify(c.input);
          yield { type: "tool_call_started", id: c.id, name: c.name };
          yield { type: "tool_call_arguments_delta", id: c.id, delta: args };
          yield { type: "tool_call_completed", id: c.id, name: c.name, arguments: args };
        }
        yield { type: "usage", inputTokens: 10, outputTokens: 5 };
        yield { type: "finish", reason: "tool_calls" };
      } else {
        yield { type: "text_delta", delta: "Read all five." };
        yield { type: "usage", inputTokens: 10, outputTokens: 5 };
        yield { type: "finish", reason: "stop" };
      }
    },
  };
  const toolhostTurn = async () => {
    const chatId = `chat-th-${turnNo++}`;
    const gate = new ApprovalGate({
      service: ctx.approvals,
      runtime: ctx.runtime,
      userId,
      chatId,
      workingDirectory: project,
    });
    let done;
    let ran = 0;
    for await (const event of runToolLoop({
      adapter,
      model: "m",
      messages: [{ role: "user", content: "Read the five files." }],
      runtime: ctx.runtime,
      userId,
      chatId,
      workingDirectory: project,
      gate,
    })) {
      if (event.type === "done") done = event;
      if (event.type === "tool_result" && event.ok) ran++;
    }
    if (done?.reason !== "text" || ran !== 5)
      throw new Error(`toolhost turn ended with ${done?.reason}, ${ran} tools ran`);
  };

  // The AI SDK: a MockLanguageModelV3 (the SDK's own test model) streaming the same two steps.
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 5, text: 5, reasoning: undefined },
  };
  const model = new MockLanguageModelV3({
    doStream: async (options) => {
      const hasResults = options.prompt.some((m) => m.role === "tool");
      const chunks = [{ type: "stream-start", warnings: [] }];
      if (!hasResults) {
        for (const c of calls) {
          chunks.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.input) });
        }
        chunks.push({ type: "finish", finishReason: { unified: "tool-calls", raw: undefined }, usage });
      } else {
        chunks.push(
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "Read all five." },
          { type: "text-end", id: "t" },
          { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage },
        );
      }
      return { stream: ai.simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) };
    },
  });
  const aiTurn = async () => {
    const chatId = `chat-ai-${turnNo++}`;
    const tools = await toolhostTools(ctx, { userId, workingDirectory: project, chatId });
    const result = ai.streamText({
      model,
      tools,
      stopWhen: ai.stepCountIs(5),
      prompt: "Read the five files.",
    });
    const text = await result.text;
    if (text !== "Read all five.") throw new Error(`AI SDK turn answered ${JSON.stringify(text)}`);
    const steps = await result.steps;
    const results = (steps[0]?.toolResults ?? []).filter((r) => typeof r.output?.sha256 === "string");
    if (results.length !== 5) throw new Error(`AI SDK turn ran ${results.length} tools`);
  };

  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const perTurn = async (fn) => {
    const start = cpu();
    for (let i = 0; i < turns; i++) await fn();
    return (cpu() - start) / turns;
  };
  // Warm both (JIT, caches, the settings rows).
  await perTurn(toolhostTurn);
  await perTurn(aiTurn);
  const th = [];
  const ref = [];
  for (let r = 0; r < rounds; r++) {
    ref.push(await perTurn(aiTurn));
    th.push(await perTurn(toolhostTurn));
  }
  await ctx.close();
  rmSync(dir, { recursive: true, force: true });
  return { toolhost: th, reference: ref, turns, sdkVersion: ai.VERSION ?? "6" };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const { toolhost, reference } = await measureTurns();
  const t = median(toolhost);
  const r = median(reference);
  console.log(
    `turn with 5 tool calls, CPU per turn: toolhost loop ${t.toFixed(2)} ms [${Math.min(...toolhost).toFixed(2)}–${Math.max(...toolhost).toFixed(2)}], AI SDK streamText ${r.toFixed(2)} ms [${Math.min(...reference).toFixed(2)}–${Math.max(...reference).toFixed(2)}], ratio ${(t / r).toFixed(2)}x`,
  );
  process.exit(0);
}
