/**
 * OpenTelemetry spans and Prometheus metrics of tool calls, provider requests and sub-agents, recorded with the SDK's
 * in-memory exporter (what a host gets once it registers an SDK; without one every span is a no-op).
 */
import { context, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Counter, Histogram, Registry } from "prom-client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { metricsRegistry, recordToolExecution } from "../../src/core/metrics.js";
import { setTraceContentCapture, withAgentSpan, withToolSpan } from "../../src/core/tracing.js";
import { runToolLoop } from "../../src/loop/run-tool-loop.js";
import { createProviderAdapter } from "../../src/providers/index.js";
import { type FakeProvider, startFakeProvider } from "../fakes/provider-server.js";
import { memoryRuntime } from "../helpers/runtime.js";

const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});
afterAll(() => {
  trace.disable();
  context.disable();
});
let fake: FakeProvider | undefined;
afterEach(async () => {
  exporter.reset();
  setTraceContentCapture(undefined);
  await fake?.close();
  fake = undefined;
});

describe("execute_tool spans", () => {
  it("carry the GenAI attributes; a failure carries its error code as error.type", async () => {
    const { runtime } = memoryRuntime();
    const ok = await runtime.executeTool(
      "get_current_datetime",
      { timezone: "UTC" },
      { userId: "u", toolCallId: "call_1" },
    );
    expect(ok.ok).toBe(true);
    const bad = await runtime.executeTool(
      "get_current_datetime",
      { timezone: 42 },
      { userId: "u", toolCallId: "call_2" },
    );
    expect(bad.ok).toBe(false);
    const [first, second] = exporter.getFinishedSpans();
    expect(first?.name).toBe("execute_tool get_current_datetime");
    expect(first?.attributes).toEqual({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "get_current_datetime",
      "gen_ai.tool.type": "function",
      "gen_ai.tool.call.id": "call_1",
    });
    expect(first?.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(second?.attributes["error.type"]).toBe("validation_failed");
    expect(second?.attributes["gen_ai.tool.call.id"]).toBe("call_2");
    expect(second?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("record arguments and results only when capture is enabled", async () => {
    const { runtime } = memoryRuntime();
    await runtime.executeTool("get_current_datetime", { timezone: "UTC" }, { userId: "u" });
    setTraceContentCapture(true);
    await runtime.executeTool("get_current_datetime", { timezone: "UTC" }, { userId: "u" });
    const [quiet, loud] = exporter.getFinishedSpans();
    expect(Object.keys(quiet!.attributes)).not.toContain("gen_ai.tool.call.arguments");
    expect(Object.keys(quiet!.attributes)).not.toContain("gen_ai.tool.call.result");
    expect(loud?.attributes["gen_ai.tool.call.arguments"]).toBe('{"timezone":"UTC"}');
    expect(String(loud?.attributes["gen_ai.tool.call.result"])).toContain("UTC");
  });
});

describe("chat and invoke_agent spans", () => {
  it("a loop turn makes a chat span with token usage; an agent run nests chat and tool spans", async () => {
    fake = await startFakeProvider("openai", [
      { kind: "tools", calls: [{ name: "get_current_datetime", arguments: { timezone: "UTC" } }] },
      { kind: "text", text: "It is now." },
    ]);
    const adapter = createProviderAdapter("openai", { apiKey: "k", baseURL: fake.baseURL });
    const { runtime } = memoryRuntime();
    await withAgentSpan({ name: "general", id: "agent-1", provider: "openai", model: "gpt-test" }, async () => {
      for await (const _ of runToolLoop({
        adapter,
        model: "gpt-test",
        messages: [{ role: "user", content: "time?" }],
        runtime,
        userId: "u",
      })) {
        // drain
      }
    });
    const spans = exporter.getFinishedSpans();
    const agent = spans.find((s) => s.name === "invoke_agent general")!;
    expect(agent.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "general",
      "gen_ai.agent.id": "agent-1",
    });
    const chats = spans.filter((s) => s.name === "chat gpt-test");
    expect(chats).toHaveLength(2);
    expect(chats[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-test",
      "gen_ai.usage.input_tokens": 42,
      "gen_ai.usage.output_tokens": 17,
      "gen_ai.response.finish_reasons": ["tool_calls"],
    });
    const tool = spans.find((s) => s.name === "execute_tool get_current_datetime")!;
    const agentId = agent.spanContext().spanId;
    for (const child of [...chats, tool]) expect(child.parentSpanContext?.spanId).toBe(agentId);
  });

  it("a failing provider request ends its chat span with error.type", async () => {
    fake = await startFakeProvider("anthropic", [{ kind: "error", status: 401, message: "bad key" }]);
    const adapter = createProviderAdapter("anthropic", { apiKey: "k", baseURL: fake.baseURL });
    const { runtime } = memoryRuntime();
    for await (const _ of runToolLoop({
      adapter,
      model: "claude-x",
      messages: [{ role: "user", content: "hi" }],
      runtime,
      userId: "u",
    })) {
      // drain
    }
    // (The Anthropic SDK records a span of its own too.)
    const chat = exporter.getFinishedSpans().find((s) => s.name === "chat claude-x");
    expect(chat?.attributes["error.type"]).toBe("ProviderError");
    expect(chat?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("withToolSpan rethrows and records what fn throws", async () => {
    await expect(
      withToolSpan(
        { tool: "t" },
        async () => Promise.reject(Object.assign(new Error("x"), { code: "boom" })),
        () => ({ ok: true }),
      ),
    ).rejects.toThrow("x");
    expect(exporter.getFinishedSpans()[0]?.attributes["error.type"]).toBe("boom");
  });
});

describe("tool metrics", () => {
  it("share one label set (tool, status) and include a seconds histogram", async () => {
    const { runtime } = memoryRuntime();
    await runtime.executeTool("get_current_datetime", { timezone: "UTC" }, { userId: "u" });
    await runtime.executeTool("get_current_datetime", { timezone: 1 }, { userId: "u" });
    const text = await metricsRegistry.metrics();
    expect(text).toMatch(/tool_execution_total\{tool="get_current_datetime",status="success"\} \d+/);
    expect(text).toMatch(/tool_execution_total\{tool="get_current_datetime",status="failure"\} \d+/);
    expect(text).toMatch(/function_call_duration_ms_count\{tool="get_current_datetime",status="success"\} \d+/);
    expect(text).toMatch(
      /tool_execution_duration_seconds_bucket\{le="0.001",tool="get_current_datetime",status="failure"\} \d+/,
    );
    expect(text).toContain("# TYPE tool_execution_duration_seconds histogram");
  });
});

describe("tool metrics export", () => {
  it("prints exactly what prom-client's own Counter and Histograms print for the same observations", async () => {
    const tool = "metrics_parity_probe";
    const durations: [number, boolean][] = [
      [0.4, false],
      [1, false],
      [7.5, true],
      [1200, false],
      [700_000, true],
    ];
    for (const [ms, failed] of durations) recordToolExecution(tool, ms, failed);
    const reference = new Registry();
    const labelNames = ["tool", "status"] as const;
    const count = new Counter({ name: "tool_execution_total", help: "h", labelNames, registers: [reference] });
    const ms = new Histogram({
      name: "function_call_duration_ms",
      help: "h",
      labelNames,
      buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 600000],
      registers: [reference],
    });
    const seconds = new Histogram({
      name: "tool_execution_duration_seconds",
      help: "h",
      labelNames,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600],
      registers: [reference],
    });
    for (const [value, failed] of durations) {
      const labels = { tool, status: failed ? "failure" : "success" };
      count.inc(labels);
      ms.observe(labels, value);
      seconds.observe(labels, value / 1000);
    }
    const lines = (text: string) => text.split("\n").filter((line) => line.includes(`tool="${tool}"`));
    const ours = lines(await metricsRegistry.metrics());
    expect(ours.length).toBeGreaterThan(30);
    expect(ours).toEqual(lines(await reference.metrics()));
  });
});
