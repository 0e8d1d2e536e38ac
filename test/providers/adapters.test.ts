/**
 * The four streaming adapters, each through its official SDK against a protocol-faithful fake server on 127.0.0.1: text
 * answers, two parallel tool calls whose arguments arrive in pieces, results fed back in the provider's own format
 * (checked by the fake), a stream cut mid-way, abort through the signal, HTTP errors.
 */

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { ToolDefinition } from "../../src/core/types.js";
import type { ChatCompletionUsageNumbers } from "../../src/providers/adapters/openai-chat.js";
import {
  type ConversationMessage,
  createProviderAdapter,
  isAbortError,
  ProviderError,
  type ProviderName,
  type ProviderStreamEvent,
  providerCredentials,
} from "../../src/providers/index.js";
import { type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
import { fakeProviders } from "../helpers/fake-providers.js";

const PROVIDERS: ProviderName[] = ["openai", "openai-chat", "gemini", "anthropic"];

/** The fakes' usage as each adapter normalizes it (Anthropic reports no separate reasoning count). */
const USAGE: Record<ProviderName, ProviderStreamEvent> = {
  openai: { type: "usage", inputTokens: 42, outputTokens: 17, reasoningTokens: 0 },
  "openai-chat": { type: "usage", inputTokens: 42, outputTokens: 17, reasoningTokens: 0 },
  gemini: { type: "usage", inputTokens: 42, outputTokens: 17, reasoningTokens: 0 },
  anthropic: { type: "usage", inputTokens: 42, outputTokens: 17 },
};

const TOOLS: ToolDefinition[] = [
  {
    name: "list_dir",
    description: "List a directory.",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, limit: { type: "integer" } },
      required: ["path"],
    },
  },
  {
    name: "read_file",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
];

const { setup, track } = fakeProviders();

async function collect(iterable: AsyncIterable<ProviderStreamEvent>): Promise<ProviderStreamEvent[]> {
  const events: ProviderStreamEvent[] = [];
  for await (const event of iterable) events.push(event);
  return events;
}

/** Runs the iterator to its end, returning the events seen and the error thrown (if any). */
async function collectUntilError(
  iterable: AsyncIterable<ProviderStreamEvent>,
): Promise<{ events: ProviderStreamEvent[]; error: unknown }> {
  const events: ProviderStreamEvent[] = [];
  try {
    for await (const event of iterable) events.push(event);
  } catch (error) {
    return { events, error };
  }
  return { events, error: undefined };
}

const ofType = <T extends ProviderStreamEvent["type"]>(events: ProviderStreamEvent[], type: T) =>
  events.filter((e): e is Extract<ProviderStreamEvent, { type: T }> => e.type === type);

const finishOf = (events: ProviderStreamEvent[]) => {
  const finish = events.at(-1);
  if (finish?.type !== "finish") throw new Error("the stream did not end with finish");
  return finish;
};

const text = (events: ProviderStreamEvent[]) =>
  ofType(events, "text_delta")
    .map((e) => e.delta)
    .join("");

describe.each(PROVIDERS)("%s adapter through its SDK", (name) => {
  it("streams a text answer as text deltas, usage and finish stop", async () => {
    const answer = "The directory holds three files.";
    const { fake, adapter } = await setup(name, [{ kind: "text", text: answer }]);
    const events = await collect(
      adapter.stream({
        model: "test-model",
        system: "You are terse.",
        messages: [{ role: "user", content: "What is in the directory?" }],
        tools: TOOLS,
      }),
    );
    expect(fake.failures).toEqual([]);
    expect(ofType(events, "text_delta").length).toBeGreaterThan(1);
    expect(text(events)).toBe(answer);
    expect(ofType(events, "usage")).toEqual([USAGE[name]]);
    const finish = events.at(-1);
    expect(finish).toMatchObject({ type: "finish", reason: "stop" });
    const request = fake.requests[0]!;
    expect(request.model).toBe("test-model");
    expect(request.system).toBe("You are terse.");
    expect(request.lastUserText).toBe("What is in the directory?");
    expect(request.tools.map((t) => t.name)).toEqual(["list_dir", "read_file"]);
    expect(request.tools[0]!.parameters).toMatchObject({ type: "object", properties: { path: { type: "string" } } });
  });

  it("normalizes two parallel tool calls whose arguments arrive in pieces, then feeds both results back", async () => {
    const { fake, adapter } = await setup(name, [
      {
        kind: "tools",
        text: "Let me look.",
        calls: [
          { name: "list_dir", arguments: { path: "src", limit: 10 } },
          { name: "read_file", arguments: { path: "README.md" } },
        ],
      },
      (request) => ({
        kind: "text",
        text: `Results: ${request.lastToolResults.map((r) => `${r.id}=${r.content}`).join(" | ")}`,
      }),
    ]);
    const messages: ConversationMessage[] = [{ role: "user", content: "Look around." }];
    const first = await collect(adapter.stream({ model: "m", messages, tools: TOOLS }));
    expect(fake.failures).toEqual([]);

    const started = ofType(first, "tool_call_started");
    const completed = ofType(first, "tool_call_completed");
    expect(started.map((e) => e.name)).toEqual(["list_dir", "read_file"]);
    expect(new Set(started.map((e) => e.id)).size).toBe(2);
    expect(completed.map((e) => [e.id, e.name])).toEqual(started.map((e) => [e.id, e.name]));
    expect(JSON.parse(completed[0]!.arguments)).toEqual({ path: "src", limit: 10 });
    expect(JSON.parse(completed[1]!.arguments)).toEqual({ path: "README.md" });
    for (const call of started) {
      const deltas = ofType(first, "tool_call_arguments_delta").filter((d) => d.id === call.id);
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.map((d) => d.delta).join("")).toBe(completed.find((c) => c.id === call.id)!.arguments);
      // Every delta of a call comes after its start and before its completion.
      const startAt = first.indexOf(call);
      const doneAt = first.findIndex((e) => e.type === "tool_call_completed" && e.id === call.id);
      for (const d of deltas) {
        expect(first.indexOf(d)).toBeGreaterThan(startAt);
        expect(first.indexOf(d)).toBeLessThan(doneAt);
      }
    }
    expect(text(first)).toBe("Let me look.");
    const finish = first.at(-1);
    expect(finish).toMatchObject({ type: "finish", reason: "tool_calls" });

    // Feed the results back: one success, one failure.
    messages.push({
      role: "assistant",
      content: text(first),
      toolCalls: completed.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })),
      ...(finish?.type === "finish" && finish.providerData ? { providerData: finish.providerData } : {}),
    });
    messages.push({
      role: "tool",
      results: [
        { id: completed[0]!.id, name: "list_dir", ok: true, content: '{"entries":["a.ts","b.ts"]}' },
        { id: completed[1]!.id, name: "read_file", ok: false, content: "not_found: README.md does not exist" },
      ],
    });
    const second = await collect(adapter.stream({ model: "m", messages, tools: TOOLS }));
    expect(fake.failures).toEqual([]);
    expect(second.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect(text(second)).toContain(`${completed[0]!.id}=`);

    const results = fake.requests[1]!.lastToolResults;
    expect(results.map((r) => r.id)).toEqual([completed[0]!.id, completed[1]!.id]);
    expect(results[0]!.content).toBe('{"entries":["a.ts","b.ts"]}');
    expect(results[1]!.content).toContain("not_found");
    if (name === "anthropic" || name === "gemini") {
      expect(results[0]!.isError).toBeUndefined();
      expect(results[1]!.isError).toBe(true);
    }
  });

  it("rejects a conversation whose results do not match the calls (the fake checks the format)", async () => {
    const { fake, adapter } = await setup(name, [
      { kind: "tools", calls: [{ name: "list_dir", arguments: { path: "." } }] },
    ]);
    const first = await collect(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: TOOLS }),
    );
    const call = ofType(first, "tool_call_completed")[0]!;
    const { error } = await collectUntilError(
      adapter.stream({
        model: "m",
        tools: TOOLS,
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: "", toolCalls: [{ id: call.id, name: call.name, arguments: call.arguments }] },
          { role: "tool", results: [{ id: "call_wrong", name: "list_dir", ok: true, content: "{}" }] },
        ],
      }),
    );
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status).toBe(400);
    expect(fake.failures.length).toBeGreaterThan(0);
  });

  it("throws a ProviderError from the iterator when the stream breaks mid-way", async () => {
    const { adapter } = await setup(name, [{ kind: "break", text: "Let me look" }]);
    const { events, error } = await collectUntilError(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: TOOLS }),
    );
    expect(error).toBeInstanceOf(ProviderError);
    expect(isAbortError(error)).toBe(false);
    expect(events.some((e) => e.type === "finish")).toBe(false);
    expect(ofType(events, "tool_call_completed")).toEqual([]);
  });

  it("stops the stream when the caller's signal aborts", async () => {
    const { fake, adapter } = await setup(name, [{ kind: "stall", text: "Thinking about it" }]);
    const controller = new AbortController();
    const events: ProviderStreamEvent[] = [];
    let error: unknown;
    try {
      for await (const event of adapter.stream({
        model: "m",
        messages: [{ role: "user", content: "go" }],
        tools: TOOLS,
        signal: controller.signal,
      })) {
        events.push(event);
        if (event.type === "text_delta") controller.abort();
      }
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(Error);
    expect(isAbortError(error)).toBe(true);
    expect(error).not.toBeInstanceOf(ProviderError);
    expect(events.some((e) => e.type === "finish")).toBe(false);
    await fake.stallClosed(); // the server saw the connection go away
  });

  it("turns an HTTP error into a ProviderError with the status", async () => {
    const { adapter } = await setup(name, [{ kind: "error", status: 401, message: "invalid api key" }]);
    const { error } = await collectUntilError(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [] }),
    );
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status).toBe(401);
    expect((error as Error).message).toMatch(/API key/);
  });

  it("maps a truncated answer to finish length", async () => {
    const { adapter } = await setup(name, [{ kind: "text", text: "Once upon a", finish: "length" }]);
    const events = await collect(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [] }),
    );
    expect(events.at(-1)).toMatchObject({ type: "finish", reason: "length" });
  });
});

const FIXTURE_IDS: Record<ProviderName, [string, string]> = {
  openai: ["call_FtIo8VaeVlpA0Lx0f3dVIQ1R", "call_Zq2mK7Yv0bB4nW8sTt6uJx3E"],
  "openai-chat": ["call_7iNvM2LqT0sYkXe4R1pWcA9d", "call_Qe3hB8uVn5KjS2mZt0LyGf6o"],
  anthropic: ["toolu_01A09q90qw90lq917835lq9", "toolu_01T1x1fJ34qAmk2tNTrN7Up6"],
  gemini: ["k9m2x7qa", "p4t8w1zc"],
};

describe.each(PROVIDERS)("%s recorded stream fixture", (name) => {
  it("replays test/fixtures/streams/<provider>.txt through the SDK into the normalized events", async () => {
    const body = readFileSync(new URL(`../fixtures/streams/${name}.txt`, import.meta.url), "utf8");
    const { adapter } = await setup(name, [{ kind: "raw", body }]);
    const events = await collect(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: TOOLS }),
    );
    const [a, b] = FIXTURE_IDS[name];
    expect(text(events)).toBe("Let me check both.");
    expect(ofType(events, "tool_call_started")).toEqual([
      { type: "tool_call_started", id: a, name: "list_dir" },
      { type: "tool_call_started", id: b, name: "read_file" },
    ]);
    expect(ofType(events, "tool_call_arguments_delta").filter((d) => d.id === a).length).toBeGreaterThan(1);
    expect(ofType(events, "tool_call_completed")).toEqual([
      { type: "tool_call_completed", id: a, name: "list_dir", arguments: '{"path":"src","limit":10}' },
      { type: "tool_call_completed", id: b, name: "read_file", arguments: '{"path":"README.md"}' },
    ]);
    expect(ofType(events, "usage")).toEqual([USAGE[name]]);
    expect(events.at(-1)).toMatchObject({ type: "finish", reason: "tool_calls" });
    expect(events.filter((e) => e.type === "finish")).toHaveLength(1);
  });
});

describe("tool definitions on the wire", () => {
  const ODD: ToolDefinition = {
    name: "files/list",
    description: "A registered name no provider accepts as is.",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, depth: { type: "integer" } },
      required: ["path"],
    },
  };

  it.each(PROVIDERS)("%s: sanitized tool names go out and come back as the registered name", async (name) => {
    const { fake, adapter } = await setup(name, [
      (req) => ({ kind: "tools", calls: [{ name: req.tools[0]!.name, arguments: { path: "." } }] }),
      { kind: "text", text: "done" },
    ]);
    const messages: ConversationMessage[] = [{ role: "user", content: "go" }];
    const first = await collect(adapter.stream({ model: "m", messages, tools: [ODD] }));
    const wireName = fake.requests[0]!.tools[0]!.name;
    expect(wireName).not.toBe("files/list");
    const call = ofType(first, "tool_call_completed")[0]!;
    expect(call.name).toBe("files/list");
    messages.push({
      role: "assistant",
      content: "",
      toolCalls: [{ id: call.id, name: call.name, arguments: call.arguments }],
      providerData: finishOf(first).providerData,
    });
    messages.push({ role: "tool", results: [{ id: call.id, name: call.name, ok: true, content: "[]" }] });
    await collect(adapter.stream({ model: "m", messages, tools: [ODD] }));
    expect(fake.failures).toEqual([]); // the fake checked that the echoed call uses the wire name it issued
  });

  it("openai sends strict schemas (optional keys nullable and required); openai-chat on a local server does not", async () => {
    const responses = await setup("openai", [{ kind: "text", text: "ok" }]);
    await collect(responses.adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [ODD] }));
    const strictTool = responses.fake.requests[0]!.tools[0]!;
    expect(strictTool.strict).toBe(true);
    expect(strictTool.parameters).toMatchObject({
      additionalProperties: false,
      required: ["path", "depth"],
      properties: { depth: { type: ["integer", "null"] } },
    });

    const chat = await setup("openai-chat", [{ kind: "text", text: "ok" }]);
    await collect(chat.adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [ODD] }));
    const plain = chat.fake.requests[0]!.tools[0]!;
    expect(plain.strict).toBeUndefined();
    expect(plain.parameters).toEqual(ODD.parameters);

    const fake = await startFakeProvider("openai-chat", [{ kind: "text", text: "ok" }]);
    track(fake);
    const strictChat = createProviderAdapter("openai-chat", { apiKey: "k", baseURL: fake.baseURL, chatStrict: true });
    await collect(strictChat.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [ODD] }));
    expect(fake.requests[0]!.tools[0]!.strict).toBe(true);
  });

  it.each(PROVIDERS)(
    "%s: malformed arguments reach the caller verbatim and the turn can still be answered",
    async (name) => {
      const { fake, adapter } = await setup(name, [
        { kind: "tools", calls: [{ name: "list_dir", arguments: '{"path": "src", limit: }' }] },
        { kind: "text", text: "fixed" },
      ]);
      const messages: ConversationMessage[] = [{ role: "user", content: "go" }];
      const first = await collect(adapter.stream({ model: "m", messages, tools: TOOLS }));
      const call = ofType(first, "tool_call_completed")[0]!;
      expect(call.arguments).toBe('{"path": "src", limit: }');
      messages.push({
        role: "assistant",
        content: "",
        toolCalls: [{ id: call.id, name: call.name, arguments: call.arguments }],
        providerData: finishOf(first).providerData,
      });
      messages.push({
        role: "tool",
        results: [
          { id: call.id, name: call.name, ok: false, content: "validation_failed: arguments are not valid JSON" },
        ],
      });
      const second = await collect(adapter.stream({ model: "m", messages, tools: TOOLS }));
      expect(fake.failures).toEqual([]);
      expect(text(second)).toBe("fixed");
    },
  );
});

describe("providerCredentials", () => {
  it("reads each provider's key and base URL", () => {
    const env = {
      OPENAI_API_KEY: "sk-o",
      OPENAI_BASE_URL: "http://127.0.0.1:8080/v1",
      ANTHROPIC_API_KEY: "sk-a",
      GEMINI_API_KEY: "g",
      GEMINI_BASE_URL: "http://127.0.0.1:9090",
    };
    expect(providerCredentials("openai", env)).toEqual({ apiKey: "sk-o", baseURL: "http://127.0.0.1:8080/v1" });
    expect(providerCredentials("openai-chat", env)).toEqual({ apiKey: "sk-o", baseURL: "http://127.0.0.1:8080/v1" });
    expect(providerCredentials("anthropic", env)).toEqual({ apiKey: "sk-a" });
    expect(providerCredentials("gemini", env)).toEqual({ apiKey: "g", baseURL: "http://127.0.0.1:9090" });
    expect(providerCredentials("gemini", { GOOGLE_API_KEY: "gg" })).toEqual({ apiKey: "gg" });
  });

  it("names the missing variable", () => {
    expect(() => providerCredentials("openai", {})).toThrow(/OPENAI_API_KEY/);
    expect(() => providerCredentials("anthropic", {})).toThrow(/ANTHROPIC_API_KEY/);
    expect(() => providerCredentials("gemini", {})).toThrow(/GEMINI_API_KEY/);
    expect(() => providerCredentials("openai-chat", {})).toThrow(/OPENAI_API_KEY.*OPENAI_BASE_URL/);
  });

  it("lets openai-chat talk to a keyless local server", () => {
    expect(providerCredentials("openai-chat", { OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" })).toEqual({
      apiKey: "not-needed",
      baseURL: "http://127.0.0.1:11434/v1",
    });
  });

  it("rejects an unknown provider name", () => {
    expect(() => createProviderAdapter("mistral" as ProviderName)).toThrow(/Unknown provider/);
  });
});

const ERROR_STREAMS: Record<ProviderName, string> = {
  openai:
    'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}\n\n' +
    'event: error\ndata: {"type":"error","sequence_number":1,"code":"server_error","message":"The server had an error while processing your request","param":null}\n\n',
  "openai-chat":
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n' +
    'data: {"error":{"message":"The server had an error while processing your request","type":"server_error"}}\n\n',
  anthropic:
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n' +
    'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"The server had an error while processing your request"}}\n\n',
  gemini:
    'event: interaction.created\ndata: {"interaction":{"id":"v1_1","status":"in_progress"},"event_type":"interaction.created"}\n\n' +
    'event: error\ndata: {"error":{"code":"500","message":"The server had an error while processing your request"},"event_type":"error"}\n\n',
};

describe.each(PROVIDERS)("%s error handling", (name) => {
  it("throws an error event inside the stream as a ProviderError carrying the provider's message", async () => {
    const { adapter } = await setup(name, [{ kind: "raw", body: ERROR_STREAMS[name] }]);
    const { events, error } = await collectUntilError(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [] }),
    );
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toContain("The server had an error while processing your request");
    expect(events.some((e) => e.type === "finish")).toBe(false);
  });

  it("throws an AbortError without a request when the signal is already aborted", async () => {
    const { fake, adapter } = await setup(name, [{ kind: "text", text: "never" }]);
    const controller = new AbortController();
    controller.abort();
    const { events, error } = await collectUntilError(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [], signal: controller.signal }),
    );
    expect(isAbortError(error)).toBe(true);
    expect(events).toEqual([]);
    expect(fake.remaining()).toBe(1);
  });
});

describe("openai-chat with OpenAI-compatible servers", () => {
  it("handles whole tool calls without index, finish_reason stop and no usage chunk", async () => {
    const chunk = (delta: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "local", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const body =
      chunk({
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_a", type: "function", function: { name: "list_dir", arguments: '{"path":"src"}' } }],
      }) +
      chunk({
        tool_calls: [{ id: "call_b", type: "function", function: { name: "read_file", arguments: '{"path":' } }],
      }) +
      chunk({ tool_calls: [{ function: { arguments: '"a.txt"}' } }] }) +
      chunk({}, "stop") +
      "data: [DONE]\n\n";
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    const events = await collect(
      adapter.stream({ model: "local", messages: [{ role: "user", content: "go" }], tools: TOOLS }),
    );
    expect(ofType(events, "tool_call_completed")).toEqual([
      { type: "tool_call_completed", id: "call_a", name: "list_dir", arguments: '{"path":"src"}' },
      { type: "tool_call_completed", id: "call_b", name: "read_file", arguments: '{"path":"a.txt"}' },
    ]);
    expect(ofType(events, "usage")).toEqual([]);
    expect(events.at(-1)).toEqual({ type: "finish", reason: "tool_calls", providerReason: "stop" });
  });
});

describe("openai-chat usage: reasoning inside or beside completion_tokens, decided from the response's numbers", () => {
  it.each([
    [
      "OpenAI: reasoning inside completion_tokens",
      {
        prompt_tokens: 10,
        completion_tokens: 50,
        total_tokens: 60,
        completion_tokens_details: { reasoning_tokens: 30 },
      },
      50,
    ],
    [
      "a vendor counting reasoning beside completion_tokens",
      {
        prompt_tokens: 10,
        completion_tokens: 20,
        total_tokens: 60,
        completion_tokens_details: { reasoning_tokens: 30 },
      },
      50,
    ],
    [
      "no total, reasoning larger than completion_tokens",
      { prompt_tokens: 10, completion_tokens: 20, completion_tokens_details: { reasoning_tokens: 30 } },
      50,
    ],
    [
      "no total, reasoning within completion_tokens",
      { prompt_tokens: 10, completion_tokens: 50, completion_tokens_details: { reasoning_tokens: 30 } },
      50,
    ],
    ["no reasoning reported", { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 }, 20],
  ])("%s", async (_label, numbers, outputTokens) => {
    const frame = (body: unknown) => `data: ${JSON.stringify(body)}\n\n`;
    const base = { id: "c1", object: "chat.completion.chunk", created: 1, model: "local" };
    const body =
      frame({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "hi" }, finish_reason: null }] }) +
      frame({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) +
      frame({ ...base, choices: [], usage: numbers }) +
      "data: [DONE]\n\n";
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    const events = await collect(
      adapter.stream({ model: "local", messages: [{ role: "user", content: "go" }], tools: TOOLS }),
    );
    const reasoning = (numbers as ChatCompletionUsageNumbers).completion_tokens_details?.reasoning_tokens;
    expect(ofType(events, "usage")).toEqual([
      {
        type: "usage",
        inputTokens: 10,
        outputTokens,
        ...(reasoning === undefined ? {} : { reasoningTokens: reasoning }),
      },
    ]);
  });
});

describe.each(PROVIDERS)("%s retries", (name) => {
  it("retries a failed request when maxRetries is set, and not by default", async () => {
    // The server says when to retry (10 ms), as APIs do; the SDK's own backoff would wait about half a second.
    const fake = await startFakeProvider(name, [
      { kind: "error", status: 503, message: "overloaded", retryAfterMs: 10 },
      { kind: "text", text: "second time lucky" },
    ]);
    track(fake);
    const retrying = createProviderAdapter(name, { apiKey: "k", baseURL: fake.baseURL, maxRetries: 1 });
    const events = await collect(
      retrying.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [] }),
    );
    expect(text(events)).toBe("second time lucky");
    expect(fake.requests).toHaveLength(2);

    const once = await setup(name, [{ kind: "error", status: 503, message: "overloaded" }]);
    const { error } = await collectUntilError(
      once.adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [] }),
    );
    expect((error as ProviderError).status).toBe(503);
    expect(once.fake.requests).toHaveLength(1);
  });
});

describe.each(["openai", "anthropic", "gemini"] as const)("%s reasoning echoed with the calls", (name) => {
  it("keeps the turn's reasoning in providerData and sends it back before the calls; without it the API refuses", async () => {
    const script: FakeTurn[] = [
      { kind: "tools", thinking: "The user wants a listing.", calls: [{ name: "list_dir", arguments: { path: "." } }] },
      { kind: "text", text: "done" },
      { kind: "text", text: "never" },
    ];
    const { fake, adapter } = await setup(name, script);
    const first = await collect(
      adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: TOOLS }),
    );
    expect(text(first)).toBe(""); // reasoning is not answer text
    const finish = finishOf(first);
    expect(finish.providerData).toBeDefined();
    const call = ofType(first, "tool_call_completed")[0]!;
    const history = (providerData?: Record<string, unknown>): ConversationMessage[] => [
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: call.id, name: call.name, arguments: call.arguments }],
        providerData,
      },
      { role: "tool", results: [{ id: call.id, name: call.name, ok: true, content: "[]" }] },
    ];
    const second = await collect(adapter.stream({ model: "m", messages: history(finish.providerData), tools: TOOLS }));
    expect(fake.failures).toEqual([]);
    expect(text(second)).toBe("done");

    const { error } = await collectUntilError(
      adapter.stream({ model: "m", messages: history(undefined), tools: TOOLS }),
    );
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).status).toBe(400);
  });
});

describe("refusals", () => {
  const REFUSAL = "I can't help with that.";
  const bodies: Partial<Record<ProviderName, string>> = {
    openai: [
      ["response.created", { response: { id: "resp_r", object: "response", status: "in_progress", output: [] } }],
      [
        "response.output_item.added",
        {
          output_index: 0,
          item: { id: "msg_r", type: "message", role: "assistant", status: "in_progress", content: [] },
        },
      ],
      [
        "response.content_part.added",
        { item_id: "msg_r", output_index: 0, content_index: 0, part: { type: "refusal", refusal: "" } },
      ],
      ["response.refusal.delta", { item_id: "msg_r", output_index: 0, content_index: 0, delta: "I can't " }],
      ["response.refusal.delta", { item_id: "msg_r", output_index: 0, content_index: 0, delta: "help with that." }],
      ["response.refusal.done", { item_id: "msg_r", output_index: 0, content_index: 0, refusal: REFUSAL }],
      [
        "response.completed",
        {
          response: {
            id: "resp_r",
            object: "response",
            status: "completed",
            output: [],
            usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 },
          },
        },
      ],
    ]
      .map(
        ([type, data], i) =>
          `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: i, ...(data as object) })}\n\n`,
      )
      .join(""),
    "openai-chat": [{ role: "assistant", content: null, refusal: "I can't " }, { refusal: "help with that." }]
      .map(
        (delta) =>
          `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`,
      )
      .join("")
      .concat(
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`,
      ),
  };

  it.each(["openai", "openai-chat"] as const)(
    "%s: a refusal streams as text and finishes as content_filter",
    async (name) => {
      const { adapter } = await setup(name, [{ kind: "raw", body: bodies[name]! }]);
      const events = await collect(
        adapter.stream({ model: "m", messages: [{ role: "user", content: "go" }], tools: [] }),
      );
      expect(text(events)).toBe(REFUSAL);
      expect(events.at(-1)).toMatchObject({ type: "finish", reason: "content_filter" });
    },
  );
});
