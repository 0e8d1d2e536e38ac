/**
 * Hostile but real wire shapes, replayed through the official SDKs against the loopback fakes: what providers and
 * OpenAI-compatible servers actually stream at the edges (arguments as objects, every call under index 0, calls
 * without ids, turns cut short inside a tool call, whole inputs on a block's start…). Each must give a correct
 * turn or a clear error — never a merged, lost or wrongly run tool call.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { type LoopEvent, runToolLoop } from "../../src/loop/index.js";
import {
  type ConversationMessage,
  createProviderAdapter,
  type ProviderAdapter,
  ProviderError,
  type ProviderName,
  type ProviderStreamEvent,
} from "../../src/providers/index.js";
import { fakeProviders } from "../helpers/fake-providers.js";
import { memoryRuntime } from "../helpers/runtime.js";

const TOOLS = [
  {
    name: "list_dir",
    description: "List a directory.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
  {
    name: "read_file",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
];

const { setup } = fakeProviders();

async function collect(adapter: ProviderAdapter, messages: ConversationMessage[] = [{ role: "user", content: "go" }]) {
  const events: ProviderStreamEvent[] = [];
  for await (const event of adapter.stream({ model: "m", messages, tools: TOOLS })) events.push(event);
  return events;
}

/** A chat whose earlier turn made one call, `id` to `name`, and got its result. */
function historyWithCall(id: string, name: string, args: string): ConversationMessage[] {
  return [
    { role: "user", content: "go" },
    { role: "assistant", content: "", toolCalls: [{ id, name, arguments: args }] },
    { role: "tool", results: [{ id, name, ok: true, content: "{}" }] },
  ];
}

const completed = (events: ProviderStreamEvent[]) =>
  events
    .filter((e) => e.type === "tool_call_completed")
    .map((e) => ({ id: e.id, name: e.name, arguments: e.arguments }));
const finish = (events: ProviderStreamEvent[]) => events.find((e) => e.type === "finish");

// --- wire builders -------------------------------------------------------------------------------------------

/** A Chat Completions stream: one `data:` line per chunk, then `[DONE]`. */
function chatBody(chunks: object[]): string {
  const frame = (c: object) =>
    `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", ...c })}\n\n`;
  return `${chunks.map(frame).join("")}data: [DONE]\n\n`;
}
const chatDelta = (delta: object, finish_reason: string | null = null) => ({
  choices: [{ index: 0, delta, logprobs: null, finish_reason }],
});

/** A Responses stream (`event:` + `data:` per event, sequence numbers in order). */
function responsesBody(events: [string, object][]): string {
  return events
    .map(([type, data], n) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, ...data })}\n\n`)
    .join("");
}
const RESPONSE = { id: "resp_1", object: "response", created_at: 1, model: "m", output: [], error: null, tools: [] };
const USAGE = { input_tokens: 5, output_tokens: 7, total_tokens: 12, output_tokens_details: { reasoning_tokens: 0 } };

/** An Anthropic Messages stream, message_start first. */
function anthropicBody(events: [string, object][], stop = true): string {
  const all: [string, object][] = [
    [
      "message_start",
      {
        message: {
          id: "msg_1",
          type: "message",
          role: "assistant",
          model: "claude",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 1 },
        },
      },
    ],
    ...events,
    ...(stop ? [["message_stop", {}] as [string, object]] : []),
  ];
  return all.map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`).join("");
}

/** A Gemini Interactions stream, interaction.created first and interaction.completed with `status` last. */
function geminiBody(events: [string, object][], status: string, errors?: object[]): string {
  const all: [string, object][] = [
    ["interaction.created", { interaction: { id: "v1_1", status: "in_progress", object: "interaction" } }],
    ...events,
    [
      "interaction.completed",
      {
        interaction: {
          id: "v1_1",
          status,
          object: "interaction",
          usage: { total_input_tokens: 4, total_output_tokens: 3, total_tokens: 7 },
          ...(errors ? { errors } : {}),
        },
      },
    ],
  ];
  return all
    .map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ event_type: type, ...data })}\n\n`)
    .join("");
}

// --- Chat Completions --------------------------------------------------------------------------------------------

describe("Chat Completions servers", () => {
  it("reads arguments sent as an already-parsed object", async () => {
    const body = chatBody([
      chatDelta({
        role: "assistant",
        tool_calls: [
          { index: 0, id: "call_1", type: "function", function: { name: "list_dir", arguments: { path: "." } } },
        ],
      }),
      chatDelta({}, "tool_calls"),
    ]);
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    const events = await collect(adapter);
    expect(completed(events)).toEqual([{ id: "call_1", name: "list_dir", arguments: '{"path":"."}' }]);
    for (const event of events)
      if (event.type === "tool_call_arguments_delta") expect(typeof event.delta).toBe("string");
  });

  it("keeps calls apart when the server numbers every call index 0", async () => {
    const body = chatBody([
      chatDelta({
        tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "list_dir", arguments: "" } }],
      }),
      chatDelta({ tool_calls: [{ index: 0, function: { arguments: '{"path":"a"}' } }] }),
      chatDelta({
        tool_calls: [{ index: 0, id: "call_b", type: "function", function: { name: "read_file", arguments: "" } }],
      }),
      chatDelta({ tool_calls: [{ index: 0, function: { arguments: '{"path":"b"}' } }] }),
      chatDelta({}, "tool_calls"),
    ]);
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    expect(completed(await collect(adapter))).toEqual([
      { id: "call_a", name: "list_dir", arguments: '{"path":"a"}' },
      { id: "call_b", name: "read_file", arguments: '{"path":"b"}' },
    ]);
  });

  it("still joins pieces that repeat the call's id and name on every chunk, without `type`", async () => {
    const piece = (args: string) => ({ index: 0, id: "call_1", function: { name: "list_dir", arguments: args } });
    const body = chatBody([
      chatDelta({ tool_calls: [piece("")] }),
      chatDelta({ tool_calls: [piece('{"pa')] }),
      chatDelta({ tool_calls: [piece('th":"x"}')] }),
      chatDelta({}, "tool_calls"),
    ]);
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    expect(completed(await collect(adapter))).toEqual([{ id: "call_1", name: "list_dir", arguments: '{"path":"x"}' }]);
  });

  it("gives calls streamed without an id ids of their own, unique across turns", async () => {
    const turn = () =>
      chatBody([
        chatDelta({ tool_calls: [{ index: 0, function: { name: "list_dir", arguments: '{"path":"a"}' } }] }),
        chatDelta({ tool_calls: [{ index: 1, function: { name: "read_file", arguments: '{"path":"b"}' } }] }),
        chatDelta({}, "tool_calls"),
      ]);
    const { adapter } = await setup("openai-chat", [
      { kind: "raw", body: turn() },
      { kind: "raw", body: turn() },
    ]);
    const ids = [...completed(await collect(adapter)), ...completed(await collect(adapter))].map((c) => c.id);
    expect(new Set(ids).size).toBe(4);
  });

  it("gives a call whose id the server used before (in the chat, or in the same turn) an id of its own", async () => {
    // Some compatible servers number every turn's calls from call_0: a chat turn's journal, approvals and
    // sub-agent links are keyed by call id, so a repeated id would be taken for the earlier call.
    const first = chatBody([
      chatDelta({ tool_calls: [{ index: 0, id: "call_0", type: "function", function: { name: "list_dir" } }] }),
      chatDelta({ tool_calls: [{ index: 0, function: { arguments: "{}" } }] }),
      chatDelta({}, "tool_calls"),
    ]);
    const second = chatBody([
      chatDelta({ tool_calls: [{ index: 0, id: "call_0", type: "function", function: { name: "list_dir" } }] }),
      chatDelta({ tool_calls: [{ index: 0, function: { arguments: '{"path":"a"}' } }] }),
      chatDelta({ tool_calls: [{ index: 1, id: "call_1", type: "function", function: { name: "read_file" } }] }),
      chatDelta({ tool_calls: [{ index: 1, function: { arguments: '{"path":"b"}' } }] }),
      chatDelta({ tool_calls: [{ index: 2, id: "call_1", type: "function", function: { name: "list_dir" } }] }),
      chatDelta({ tool_calls: [{ index: 2, function: { arguments: '{"path":"c"}' } }] }),
      chatDelta({}, "tool_calls"),
    ]);
    const { adapter } = await setup("openai-chat", [
      { kind: "raw", body: first, issues: [{ id: "call_0", name: "list_dir" }] },
      { kind: "raw", body: second },
    ]);
    expect(completed(await collect(adapter)).map((c) => c.id)).toEqual(["call_0"]);
    const events = await collect(adapter, historyWithCall("call_0", "list_dir", "{}"));
    const calls = completed(events);
    expect(calls.map((c) => c.arguments)).toEqual(['{"path":"a"}', '{"path":"b"}', '{"path":"c"}']);
    const ids = calls.map((c) => c.id);
    expect(ids[0]).not.toBe("call_0");
    expect(ids[1]).toBe("call_1");
    expect(new Set(ids).size).toBe(3);
    // Every event of a call carries the id its completion has.
    for (const e of events) {
      if ("id" in e && typeof e.id === "string") expect(ids).toContain(e.id);
    }
  });

  it("a finish_reason `length` inside a tool call finishes as length", async () => {
    const body = chatBody([
      chatDelta({
        tool_calls: [
          { index: 0, id: "call_1", type: "function", function: { name: "list_dir", arguments: '{"path":"sr' } },
        ],
      }),
      chatDelta({}, "length"),
    ]);
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    const events = await collect(adapter);
    expect(finish(events)).toMatchObject({ reason: "length", providerReason: "length" });
    expect(completed(events)).toEqual([{ id: "call_1", name: "list_dir", arguments: '{"path":"sr' }]);
  });
});

// --- The loop on a turn cut short inside a tool call -----------------------------------------------------------

async function loop(adapter: ProviderAdapter) {
  const { runtime } = memoryRuntime();
  const events: LoopEvent[] = [];
  for await (const event of runToolLoop({
    adapter,
    model: "m",
    messages: [{ role: "user", content: "go" }],
    runtime,
    userId: "u",
    tools: TOOLS,
    services: {},
  })) {
    events.push(event);
  }
  return events;
}

describe("a turn cut short inside a tool call", () => {
  const cutChat = chatBody([
    chatDelta({
      tool_calls: [
        { index: 0, id: "call_ok", type: "function", function: { name: "list_dir", arguments: '{"path":"."}' } },
      ],
    }),
    chatDelta({
      tool_calls: [
        { index: 1, id: "call_cut", type: "function", function: { name: "read_file", arguments: '{"path":"REA' } },
      ],
    }),
    chatDelta({}, "length"),
  ]);

  it("does not run the cut call: the model is told it was cut off, the complete call runs, history stays whole", async () => {
    const { fake, adapter } = await setup("openai-chat", [
      {
        kind: "raw",
        body: cutChat,
        issues: [
          { id: "call_ok", name: "list_dir" },
          { id: "call_cut", name: "read_file" },
        ],
      },
      { kind: "text", text: "I will write less." },
    ]);
    const events = await loop(adapter);
    const results = events.filter((e) => e.type === "tool_result");
    const cut = results.find((e) => e.id === "call_cut");
    expect(cut).toMatchObject({ ok: false, error: { code: "validation_failed", details: { rule: "cut_off" } } });
    expect(cut?.type === "tool_result" && !cut.ok && cut.error.message).toMatch(
      /^The call to read_file was cut off: the response reached the output token limit before its arguments were complete, so it was not run\. Call read_file again with shorter arguments/,
    );
    // The complete call went to the runtime (whatever the tool answered, it was not refused as cut off).
    const ok = results.find((e) => e.id === "call_ok");
    expect(ok && !ok.ok ? ok.error.details?.rule : undefined).not.toBe("cut_off");
    expect(fake.failures).toEqual([]);
    expect(fake.requests[1]!.lastToolResults.map((r) => r.id)).toEqual(["call_ok", "call_cut"]);
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "text" });
  });

  it("Responses: a call still streaming when the response went incomplete is answered, not lost", async () => {
    const fc = {
      id: "fc_1",
      type: "function_call",
      status: "in_progress",
      call_id: "call_r1",
      name: "read_file",
      arguments: "",
    };
    const body = responsesBody([
      ["response.created", { response: { ...RESPONSE, status: "in_progress" } }],
      ["response.output_item.added", { output_index: 0, item: fc }],
      ["response.function_call_arguments.delta", { item_id: "fc_1", output_index: 0, delta: '{"path":"REA' }],
      [
        "response.incomplete",
        {
          response: {
            ...RESPONSE,
            status: "incomplete",
            incomplete_details: { reason: "max_output_tokens" },
            usage: USAGE,
          },
        },
      ],
    ]);
    const { adapter } = await setup("openai", [{ kind: "raw", body }]);
    const events = await collect(adapter);
    expect(completed(events)).toEqual([{ id: "call_r1", name: "read_file", arguments: '{"path":"REA' }]);
    expect(finish(events)).toMatchObject({ reason: "length", providerReason: "max_output_tokens" });
  });

  it("Gemini: an incomplete interaction with a call finishes as length", async () => {
    const body = geminiBody(
      [
        ["step.start", { index: 0, step: { type: "function_call", id: "g1", name: "read_file", arguments: {} } }],
        ["step.delta", { index: 0, delta: { type: "arguments_delta", arguments: '{"pa' } }],
        ["step.stop", { index: 0 }],
      ],
      "incomplete",
    );
    const { adapter } = await setup("gemini", [{ kind: "raw", body }]);
    expect(finish(await collect(adapter))).toMatchObject({ reason: "length", providerReason: "incomplete" });
  });
});

// --- Responses ---------------------------------------------------------------------------------------------------

describe("Responses streams", () => {
  it("a call announced only by its done event starts before it completes", async () => {
    const item = {
      id: "fc_1",
      type: "function_call",
      status: "completed",
      call_id: "call_1",
      name: "list_dir",
      arguments: "{}",
    };
    const body = responsesBody([
      ["response.created", { response: { ...RESPONSE, status: "in_progress" } }],
      ["response.output_item.done", { output_index: 0, item }],
      ["response.completed", { response: { ...RESPONSE, status: "completed", output: [item], usage: USAGE } }],
    ]);
    const { adapter } = await setup("openai", [{ kind: "raw", body }]);
    const events = await collect(adapter);
    expect(events.slice(0, 2).map((e) => e.type)).toEqual(["tool_call_started", "tool_call_completed"]);
  });
});

// --- Gemini ------------------------------------------------------------------------------------------------------

describe("Gemini Interactions streams", () => {
  it("calls without an id (or with a repeated one) stay separate calls", async () => {
    const body = geminiBody(
      [
        ["step.start", { index: 0, step: { type: "function_call", name: "list_dir", arguments: { path: "a" } } }],
        ["step.stop", { index: 0 }],
        ["step.start", { index: 1, step: { type: "function_call", name: "read_file", arguments: { path: "b" } } }],
        ["step.stop", { index: 1 }],
        [
          "step.start",
          { index: 2, step: { type: "function_call", id: "dup", name: "list_dir", arguments: { path: "c" } } },
        ],
        ["step.stop", { index: 2 }],
        [
          "step.start",
          { index: 3, step: { type: "function_call", id: "dup", name: "read_file", arguments: { path: "d" } } },
        ],
        ["step.stop", { index: 3 }],
      ],
      "requires_action",
    );
    const { adapter } = await setup("gemini", [{ kind: "raw", body }]);
    const calls = completed(await collect(adapter));
    expect(calls.map((c) => c.arguments)).toEqual(['{"path":"a"}', '{"path":"b"}', '{"path":"c"}', '{"path":"d"}']);
    expect(new Set(calls.map((c) => c.id)).size).toBe(4);
    expect(calls.every((c) => c.id && c.id !== "undefined")).toBe(true);
  });
});

describe("Gemini Interactions streams, across turns", () => {
  it("a call with the id of a call earlier in the chat gets an id of its own", async () => {
    const turn = (path: string) =>
      geminiBody(
        [
          [
            "step.start",
            { index: 0, step: { type: "function_call", id: "fc_0", name: "list_dir", arguments: { path } } },
          ],
          ["step.stop", { index: 0 }],
        ],
        "requires_action",
      );
    const { adapter } = await setup("gemini", [
      { kind: "raw", body: turn("a"), issues: [{ id: "fc_0", name: "list_dir" }] },
      { kind: "raw", body: turn("b") },
    ]);
    expect(completed(await collect(adapter)).map((c) => c.id)).toEqual(["fc_0"]);
    const [call] = completed(await collect(adapter, historyWithCall("fc_0", "list_dir", '{"path":"a"}')));
    expect(call?.arguments).toBe('{"path":"b"}');
    expect(call?.id).not.toBe("fc_0");
    expect(call?.id).toMatch(/^fc_/);
  });
});

// --- Anthropic -----------------------------------------------------------------------------------------------------

describe("Anthropic streams", () => {
  it("reads a tool_use input sent whole on content_block_start (no input_json_delta)", async () => {
    const body = anthropicBody([
      [
        "content_block_start",
        { index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "list_dir", input: { path: "src" } } },
      ],
      ["content_block_stop", { index: 0 }],
      ["message_delta", { delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 5 } }],
    ]);
    const { adapter } = await setup("anthropic", [{ kind: "raw", body }]);
    expect(completed(await collect(adapter))).toEqual([
      { id: "toolu_1", name: "list_dir", arguments: '{"path":"src"}' },
    ]);
  });

  it("completes a tool_use block the message stopped inside", async () => {
    const body = anthropicBody([
      [
        "content_block_start",
        { index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "read_file", input: {} } },
      ],
      ["content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: "" } }],
      ["content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: '{"path": "RE' } }],
      ["message_delta", { delta: { stop_reason: "max_tokens", stop_sequence: null }, usage: { output_tokens: 5 } }],
    ]);
    const { adapter } = await setup("anthropic", [{ kind: "raw", body }]);
    const events = await collect(adapter);
    expect(completed(events)).toEqual([{ id: "toolu_1", name: "read_file", arguments: '{"path": "RE' }]);
    expect(finish(events)).toMatchObject({ reason: "length", providerReason: "max_tokens" });
  });
});

describe("Responses reasoning sent back", () => {
  it("each reasoning item goes back right before the item that followed it, with that item's id", async () => {
    const { fake, adapter } = await setup("openai", [
      {
        kind: "tools",
        thinking: "List, then read.",
        text: "Looking.",
        calls: [
          { name: "list_dir", arguments: { path: "." } },
          { name: "read_file", arguments: { path: "a.txt" } },
        ],
      },
      { kind: "text", text: "Done." },
    ]);
    const events = await loop(adapter);
    expect(events.filter((e) => e.type === "history_rewritten")).toEqual([]);
    expect(fake.failures).toEqual([]);
    const input: any[] = fake.requests[1]!.body.input;
    const at = input.findIndex((i) => i.type === "reasoning");
    expect(input.slice(at, at + 4).map((i) => [i.type, i.id?.slice(0, 3)])).toEqual([
      ["reasoning", "rs_"],
      ["message", "msg"],
      ["function_call", "fc_"],
      ["function_call", "fc_"],
    ]);
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "text" });
  });
});

describe("HTTP errors", () => {
  // Each provider's real error body for a rate limit, answered with `retry-after: 17`.
  const bodies: Record<ProviderName, object> = {
    openai: {
      error: { message: "Rate limit reached for requests", type: "requests", param: null, code: "rate_limit_exceeded" },
    },
    "openai-chat": {
      error: { message: "Rate limit reached for requests", type: "requests", param: null, code: "rate_limit_exceeded" },
    },
    anthropic: {
      type: "error",
      error: { type: "rate_limit_error", message: "Rate limit reached for requests" },
      request_id: "req_1",
    },
    gemini: { error: { code: 429, message: "Rate limit reached for requests", status: "RESOURCE_EXHAUSTED" } },
  };

  it.each(Object.keys(bodies) as ProviderName[])(
    "%s: a 429 names the provider's message (not its JSON body) and the retry-after wait",
    async (name) => {
      const server = createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          res.writeHead(429, { "content-type": "application/json", "retry-after": "17" });
          res.end(JSON.stringify(bodies[name]));
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as AddressInfo).port;
      const baseURL = name.startsWith("openai") ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`;
      let error: unknown;
      try {
        await collect(createProviderAdapter(name, { apiKey: "k", baseURL }));
      } catch (e) {
        error = e;
      } finally {
        server.close();
      }
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).status).toBe(429);
      expect((error as Error).message).toBe(
        `${name} request failed (HTTP 429): Rate limit reached for requests. Rate limited: retry in 17 s (the provider's retry-after).`,
      );
    },
  );
});

describe("a server that keeps the stream open after its terminal event", () => {
  it.each([
    ["openai", "openai.txt"],
    ["openai-chat", "openai-chat.txt"],
    ["anthropic", "anthropic.txt"],
    ["gemini", "gemini.txt"],
  ] as const)("%s: the turn ends at the terminal event", async (name, file) => {
    const body = readFileSync(new URL(`../fixtures/streams/${file}`, import.meta.url), "utf8");
    // Everything is written, the response is never ended.
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    const baseURL = name.startsWith("openai") ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`;
    try {
      const events = await collect(createProviderAdapter(name, { apiKey: "k", baseURL }));
      expect(events.at(-1)).toMatchObject({ type: "finish", reason: "tool_calls" });
      expect(completed(events)).toHaveLength(2);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("errors reported inside a stream", () => {
  it("Gemini: a failed interaction names its own recorded error", async () => {
    const body = geminiBody([["step.start", { index: 0, step: { type: "model_output" } }]], "failed", [
      { code: "resource_exhausted", message: "The model is overloaded" },
    ]);
    const { adapter } = await setup("gemini", [{ kind: "raw", body }]);
    await expect(collect(adapter)).rejects.toThrow(
      /^gemini reported an error during the response \(resource_exhausted\): The model is overloaded\. /,
    );
  });

  it("Chat Completions: an error chunk with a numeric code (a gateway's upstream status) names the code", async () => {
    const body = `${chatBody([chatDelta({ content: "Hi" })]).replace("data: [DONE]\n\n", "")}data: ${JSON.stringify({ error: { message: "Provider returned error", code: 502 } })}\n\n`;
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body }]);
    await expect(collect(adapter)).rejects.toThrow(
      /^openai-chat reported an error during the response \(502\): Provider returned error\. /,
    );
  });
});
