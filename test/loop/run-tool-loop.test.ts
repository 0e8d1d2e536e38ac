import { describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { RegisteredTool } from "../../src/core/types.js";
import { type LoopEvent, runToolLoop } from "../../src/loop/index.js";
import type { ConversationMessage } from "../../src/providers/types.js";
import { recordingLogger } from "../helpers/runtime.js";
import { scriptedAdapter, textTurn, toolTurn } from "./scripted-adapter.js";

const settings = {
  title: "t",
  description: "test tool",
  category: "system" as const,
  enabledByDefault: true,
  canDisable: true,
  defaultParameters: {},
  parameterDescriptors: [],
};

/** A runtime over its own registry (built-ins untouched) holding the test tools. */
function testRuntime(extra: RegisteredTool[] = []) {
  const registry = new ToolRegistryStore();
  const started: string[] = [];
  const startedWaiters: (() => void)[] = [];
  const echo: RegisteredTool = {
    definition: {
      name: "echo",
      description: "Echoes text.",
      parameters: {
        type: "object",
        properties: { text: { type: "string" }, times: { type: "integer", default: 1 } },
        required: ["text"],
      },
    },
    settings,
    async execute(args) {
      const { text, times } = args as { text: string; times: number };
      return { echo: text.repeat(times) };
    },
  };
  let arrived = 0;
  let release: (() => void) | undefined;
  const allArrived = new Promise<void>((resolve) => {
    release = resolve;
  });
  const barrier: RegisteredTool = {
    definition: {
      name: "barrier",
      description: "Returns once two calls are running at the same time.",
      parameters: { type: "object", properties: { label: { type: "string" } }, required: ["label"] },
    },
    settings,
    timeoutMs: () => 10_000,
    async execute(args, context) {
      arrived += 1;
      context.emitProgress({ kind: "arrived", message: (args as { label: string }).label });
      if (arrived >= 2) release?.();
      await allArrived;
      return { label: (args as { label: string }).label, arrived };
    },
  };
  const slow: RegisteredTool = {
    definition: {
      name: "slow",
      description: "Runs until cancelled.",
      parameters: { type: "object", properties: {} },
    },
    settings,
    timeoutMs: () => 200,
    async execute(_args, context) {
      started.push("slow");
      for (const wake of startedWaiters.splice(0)) wake();
      await new Promise((_, reject) => {
        context.signal.addEventListener("abort", () => reject(context.signal.reason), { once: true });
      });
    },
  };
  for (const tool of [echo, barrier, slow, ...extra]) registry.register(tool);
  const runtime = new ToolRuntime({ registry, store: new MemoryToolSettingsStore(), logger: recordingLogger() });
  const slowStarted = () =>
    started.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => startedWaiters.push(resolve));
  return { runtime, registry, slowStarted };
}

async function collect(iterable: AsyncIterable<LoopEvent>): Promise<LoopEvent[]> {
  const events: LoopEvent[] = [];
  for await (const event of iterable) events.push(event);
  return events;
}

function doneOf(events: LoopEvent[]) {
  const done = events.at(-1);
  if (done?.type !== "done") throw new Error(`last event is ${done?.type}, not done`);
  expect(events.filter((e) => e.type === "done")).toHaveLength(1);
  return done;
}

/** Every assistant tool call is answered by the very next tool message, in order, and nothing is half-done. */
function expectConsistent(messages: ConversationMessage[]) {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === "assistant" && m.toolCalls?.length) {
      const next = messages[i + 1];
      expect(next?.role).toBe("tool");
      if (next?.role === "tool") expect(next.results.map((r) => r.id)).toEqual(m.toolCalls.map((c) => c.id));
    }
    if (m.role === "tool") expect(messages[i - 1]?.role).toBe("assistant");
  }
}

const user: ConversationMessage = { role: "user", content: "hi" };

describe("runToolLoop", () => {
  it("ends with done text after a plain answer, offering the runtime's enabled tools", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([textTurn("Hello there")]);
    const events = await collect(
      runToolLoop({ adapter, model: "m", system: "sys", messages: [user], runtime, userId: "u1" }),
    );
    expect(events[0]).toEqual({ type: "iteration", n: 1 });
    const done = doneOf(events);
    expect(done.reason).toBe("text");
    expect(done.messages).toEqual([{ role: "assistant", content: "Hello there" }]);
    expect(adapter.requests[0]!.tools.map((t) => t.name)).toEqual(["barrier", "echo", "slow"]);
    expect(adapter.requests[0]!.system).toBe("sys");
    expect(adapter.requests[0]!.messages).toEqual([user]);
  });

  it("does not offer a tool the user disabled", async () => {
    const { runtime } = testRuntime();
    await runtime.store.save("u1", "slow", { enabled: false, parameters: {} });
    const adapter = scriptedAdapter([textTurn("ok")]);
    await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    expect(adapter.requests[0]!.tools.map((t) => t.name)).toEqual(["barrier", "echo"]);
  });

  it("executes a call, feeds its result back, and yields the events in order", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      toolTurn([{ id: "c1", name: "echo", arguments: '{"text":"ab","times":null}' }]),
      (request) => {
        const last = request.messages.at(-1);
        if (last?.role !== "tool") throw new Error("expected the tool results last");
        return textTurn(`result was ${last.results[0]!.content}`)(request);
      },
    ]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    const types = events.map((e) => e.type);
    expect(types).toEqual([
      "iteration",
      "tool_call_started",
      "tool_call_arguments_delta",
      "tool_call_arguments_delta",
      "tool_call_completed",
      "finish",
      "tool_result",
      "iteration",
      "text_delta",
      "text_delta",
      "usage",
      "finish",
      "done",
    ]);
    const result = events.find((e) => e.type === "tool_result");
    expect(result).toMatchObject({ id: "c1", name: "echo", ok: true, result: { echo: "ab" } });
    expect(typeof (result as { durationMs: number }).durationMs).toBe("number");
    const done = doneOf(events);
    expect(done.reason).toBe("text");
    expect(done.iterations).toBe(2);
    expect(done.messages).toEqual([
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"ab","times":null}' }],
        providerData: { turn: "c1" },
      },
      { role: "tool", results: [{ id: "c1", name: "echo", ok: true, content: '{"echo":"ab"}' }] },
      { role: "assistant", content: 'result was {"echo":"ab"}' },
    ]);
    // The second request carries the whole history, including the echoed provider data.
    expect(adapter.requests[1]!.messages).toEqual([user, ...done.messages.slice(0, 2)]);
  });

  it("runs the calls of one turn concurrently and answers them in call order", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      toolTurn([
        { id: "a", name: "barrier", arguments: '{"label":"first"}' },
        { id: "b", name: "barrier", arguments: '{"label":"second"}' },
      ]),
      textTurn("both done"),
    ]);
    // Each barrier call returns only once both are running: sequential execution would time out instead.
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    const results = events.filter((e) => e.type === "tool_result");
    expect(results).toHaveLength(2);
    for (const r of results) expect(r.ok).toBe(true);
    const progress = events.filter((e) => e.type === "tool_progress");
    expect(progress.map((p) => (p.type === "tool_progress" ? p.progress.kind : ""))).toEqual(["arrived", "arrived"]);
    const done = doneOf(events);
    const toolMessage = done.messages[1];
    expect(toolMessage?.role === "tool" && toolMessage.results.map((r) => r.id)).toEqual(["a", "b"]);
    expectConsistent(done.messages);
  });

  it("reports a tool that exceeds its budget as a timeout result the model sees, and continues", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      toolTurn([
        { id: "s", name: "slow", arguments: "{}" },
        { id: "e", name: "echo", arguments: '{"text":"x"}' },
      ]),
      textTurn("the slow one timed out"),
    ]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    const slow = events.find((e) => e.type === "tool_result" && e.id === "s");
    expect(slow).toMatchObject({ ok: false, error: { code: "timeout" } });
    expect(events.find((e) => e.type === "tool_result" && e.id === "e")).toMatchObject({ ok: true });
    const done = doneOf(events);
    expect(done.reason).toBe("text");
    const fedBack = adapter.requests[1]!.messages.at(-1);
    expect(fedBack?.role).toBe("tool");
    if (fedBack?.role === "tool") {
      expect(fedBack.results[0]).toMatchObject({ id: "s", name: "slow", ok: false });
      expect(JSON.parse(fedBack.results[0]!.content)).toMatchObject({ error: { code: "timeout" } });
      expect(fedBack.results[1]).toMatchObject({ id: "e", ok: true });
    }
  });

  it("turns malformed JSON arguments into a validation_failed result the model can correct", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      toolTurn([{ id: "bad", name: "echo", arguments: '{"text": "unterminated' }]),
      toolTurn([{ id: "bad2", name: "echo", arguments: '{"text":"ok","times":"2"}' }]),
      toolTurn([{ id: "good", name: "echo", arguments: '{"text":"ok","times":2}' }]),
      textTurn("fixed"),
    ]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    const results = events.filter((e) => e.type === "tool_result");
    expect(results[0]).toMatchObject({ id: "bad", ok: false, error: { code: "validation_failed" } });
    expect(results[1]).toMatchObject({ id: "bad2", ok: false, error: { code: "validation_failed" } });
    expect(JSON.stringify(results[1])).toContain("times");
    expect(results[2]).toMatchObject({ id: "good", ok: true, result: { echo: "okok" } });
    expect(doneOf(events).reason).toBe("text");
  });

  it("answers a call to an unknown tool with not_found instead of failing", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      toolTurn([{ id: "x", name: "no_such_tool", arguments: "{}" }]),
      textTurn("sorry"),
    ]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(doneOf(events).reason).toBe("text");
  });

  it("stops at the iteration limit with a clear error event and a consistent history", async () => {
    const { runtime } = testRuntime();
    const forever = toolTurn([{ id: "again", name: "echo", arguments: '{"text":"x"}' }]);
    const adapter = scriptedAdapter([forever, forever, forever, forever]);
    const events = await collect(
      runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1", maxIterations: 3 }),
    );
    expect(adapter.requests).toHaveLength(3);
    expect(events.filter((e) => e.type === "iteration").map((e) => (e.type === "iteration" ? e.n : 0))).toEqual([
      1, 2, 3,
    ]);
    const error = events.at(-2);
    expect(error).toMatchObject({ type: "error", code: "max_iterations" });
    expect(error?.type === "error" && error.message).toContain("3");
    const done = doneOf(events);
    expect(done.reason).toBe("max_iterations");
    expect(done.iterations).toBe(3);
    expect(done.messages).toHaveLength(6);
    expectConsistent(done.messages);
  });

  it("aborts a running tool when the caller cancels, and keeps the call answered", async () => {
    const { runtime, slowStarted } = testRuntime();
    const controller = new AbortController();
    const adapter = scriptedAdapter([toolTurn([{ id: "s", name: "slow", arguments: "{}" }]), textTurn("never")]);
    void slowStarted().then(() => controller.abort());
    const events = await collect(
      runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1", signal: controller.signal }),
    );
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      id: "s",
      ok: false,
      error: { code: "aborted" },
    });
    const done = doneOf(events);
    expect(done.reason).toBe("aborted");
    expect(adapter.requests).toHaveLength(1);
    expect(done.messages.map((m) => m.role)).toEqual(["assistant", "tool"]);
    expectConsistent(done.messages);
  });

  it("aborts mid-stream and drops the half-streamed turn", async () => {
    const { runtime } = testRuntime();
    const controller = new AbortController();
    const adapter = scriptedAdapter([
      async function* () {
        yield { type: "text_delta", delta: "partial " };
        controller.abort();
        yield { type: "text_delta", delta: "never seen" };
        yield { type: "finish", reason: "stop" };
      },
    ]);
    const events = await collect(
      runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1", signal: controller.signal }),
    );
    const done = doneOf(events);
    expect(done.reason).toBe("aborted");
    expect(done.messages).toEqual([]);
    expect(events.filter((e) => e.type === "text_delta")).toHaveLength(1);
  });

  it("reports a provider stream that breaks mid-way as an error and keeps only complete steps", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      toolTurn([{ id: "c1", name: "echo", arguments: '{"text":"a"}' }]),
      async function* () {
        yield { type: "text_delta", delta: "half an ans" };
        yield { type: "tool_call_started", id: "c2", name: "echo" };
        throw Object.assign(new Error("socket hang up"), { status: 502 });
      },
    ]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    const error = events.at(-2);
    expect(error).toMatchObject({ type: "error", code: "provider_error" });
    expect(error?.type === "error" && error.message).toContain("socket hang up");
    expect(error?.type === "error" && error.message).toContain("502");
    const done = doneOf(events);
    expect(done.reason).toBe("error");
    expect(done.messages.map((m) => m.role)).toEqual(["assistant", "tool"]);
    expect(JSON.stringify(done.messages)).not.toContain("half an ans");
    expectConsistent(done.messages);
  });

  it("reports a stream that fails before any event as an error with no messages", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([
      // biome-ignore lint/correctness/useYield: a stream that fails before its first event
      async function* () {
        throw new Error("401 invalid api key");
      },
    ]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    expect(events.map((e) => e.type)).toEqual(["iteration", "error", "done"]);
    expect(doneOf(events)).toMatchObject({ reason: "error", messages: [] });
  });

  it("translates a sanitized tool name back to the registered one", async () => {
    const { runtime } = testRuntime();
    const adapter = scriptedAdapter([toolTurn([{ id: "c", name: "ECHO", arguments: '{"text":"z"}' }]), textTurn("ok")]);
    const events = await collect(runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1" }));
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({ name: "echo", ok: true });
  });

  describe("resuming a step", () => {
    const calls = [
      { id: "r1", name: "echo", arguments: '{"text":"known"}' },
      { id: "r2", name: "echo", arguments: '{"text":"run"}' },
    ];
    const step = {
      iterations: 2,
      added: [],
      assistant: { role: "assistant" as const, content: "", toolCalls: calls },
      results: [{ id: "r1", name: "echo", ok: true, content: '{"echo":"known"}' }, null],
    };

    it("yields no second iteration event for the step, runs only what has no result, and counts on", async () => {
      const { runtime } = testRuntime();
      const adapter = scriptedAdapter([textTurn("done")]);
      const events = await collect(
        runToolLoop({ adapter, model: "m", messages: [user], runtime, userId: "u1", resume: step }),
      );
      expect(events.filter((e) => e.type === "iteration")).toEqual([{ type: "iteration", n: 3 }]);
      expect(events.filter((e) => e.type === "tool_result").map((e) => e.type === "tool_result" && e.id)).toEqual([
        "r2",
      ]);
      expect(doneOf(events)).toMatchObject({ reason: "text", iterations: 3 });
    });

    it("already cancelled: runs nothing, gives each call without a result an aborted one, keeps the step", async () => {
      const { runtime } = testRuntime();
      const adapter = scriptedAdapter([]);
      const events = await collect(
        runToolLoop({
          adapter,
          model: "m",
          messages: [user],
          runtime,
          userId: "u1",
          resume: step,
          signal: AbortSignal.abort(),
        }),
      );
      expect(adapter.requests).toHaveLength(0);
      expect(events.map((e) => e.type)).toEqual(["tool_result", "done"]);
      expect(events[0]).toMatchObject({ id: "r2", ok: false, error: { code: "aborted" } });
      const done = doneOf(events);
      expect(done.reason).toBe("aborted");
      expect(done.messages.map((m) => m.role)).toEqual(["assistant", "tool"]);
      expectConsistent(done.messages);
    });
  });
});
