/**
 * Classes of real provider behaviour, replayed through the official SDKs against the loopback fakes: recorded-stream
 * fixtures written from the providers' documented stream events (test/fixtures/streams/*), and scripted turns.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { runToolLoop } from "../../src/loop/run-tool-loop.js";
import { toResponsesInput } from "../../src/providers/adapters/openai-responses.js";
import {
  type ConversationMessage,
  createProviderAdapter,
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
];

const { setup } = fakeProviders();

const fixture = (file: string) => readFileSync(new URL(`../fixtures/streams/${file}`, import.meta.url), "utf8");

async function run(iterable: AsyncIterable<ProviderStreamEvent>) {
  const events: ProviderStreamEvent[] = [];
  try {
    for await (const event of iterable) events.push(event);
  } catch (error) {
    return { events, error: error as Error };
  }
  return { events, error: undefined };
}

const request = (messages: ConversationMessage[] = [{ role: "user", content: "go" }]) => ({
  model: "m",
  messages,
  tools: TOOLS,
});

describe("Chat Completions reasoning_content (thinking mode)", () => {
  it("streams the reasoning apart from the answer and keeps it for the next request", async () => {
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body: fixture("openai-chat-reasoning.txt") }]);
    const { events, error } = await run(adapter.stream(request()));
    expect(error).toBeUndefined();
    const reasoning = events.filter((e) => e.type === "reasoning_delta").map((e) => (e as { delta: string }).delta);
    expect(reasoning.join("")).toBe("The user wants the listing; call list_dir.");
    expect(events.filter((e) => e.type === "text_delta")).toEqual([]);
    expect(events.find((e) => e.type === "usage")).toEqual({
      type: "usage",
      inputTokens: 42,
      outputTokens: 25,
      reasoningTokens: 18,
    });
    expect(events.at(-1)).toMatchObject({
      type: "finish",
      reason: "tool_calls",
      providerData: { reasoningContent: "The user wants the listing; call list_dir." },
    });
  });

  it("sends the reasoning back on the assistant message that carries the calls, so the server accepts the history", async () => {
    const { fake, adapter } = await setup("openai-chat", [
      { kind: "tools", thinking: "I should list src.", calls: [{ name: "list_dir", arguments: { path: "src" } }] },
      { kind: "text", text: "src holds two files." },
    ]);
    const { runtime } = memoryRuntime();
    const seen: string[] = [];
    for await (const event of runToolLoop({
      adapter,
      model: "deepseek-reasoner",
      messages: [{ role: "user", content: "what is in src?" }],
      runtime,
      userId: "u",
      tools: TOOLS,
      services: {},
    })) {
      seen.push(event.type);
      if (event.type === "error") throw new Error(event.message);
    }
    expect(fake.failures).toEqual([]);
    expect(seen).toContain("reasoning_delta");
    const echoed = fake.requests[1]!.body.messages.find((m: any) => m.role === "assistant");
    expect(echoed.reasoning_content).toBe("I should list src.");
  });

  it("a history without the reasoning is refused by such a server with its own message, named once", async () => {
    const { fake, adapter } = await setup("openai-chat", [
      { kind: "tools", thinking: "Plan.", calls: [{ id: "call_x1", name: "list_dir", arguments: { path: "." } }] },
      { kind: "text", text: "never" },
    ]);
    await run(adapter.stream(request()));
    // The same conversation stored before reasoning was kept: no reasoning on the assistant message.
    const stale: ConversationMessage[] = [
      { role: "user", content: "go" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_x1", name: "list_dir", arguments: '{"path":"."}' }] },
      { role: "tool", results: [{ id: "call_x1", name: "list_dir", ok: true, content: "[]" }] },
    ];
    const { error } = await run(adapter.stream(request(stale)));
    expect(fake.failures.at(-1)).toMatch(/reasoning_content in the thinking mode must be passed back/);
    expect(error?.message).toMatch(
      /^openai-chat request failed \(HTTP 400\): .*reasoning_content in the thinking mode must be passed back to the API\. The provider refused the request as sent \(for a chat, possibly its stored history\)\.$/,
    );
    expect(error?.message).not.toMatch(/\.\./);
  });
});

describe("a chat whose stored history the provider rejects", () => {
  it("goes on: the earlier turns are sent again as plain text, once, and the new turn is stored normally", async () => {
    const { fake, adapter } = await setup("openai-chat", [
      { kind: "tools", thinking: "Plan.", calls: [{ id: "call_old1", name: "list_dir", arguments: { path: "." } }] },
      // The refused request does not consume a turn: this answers the rewritten retry.
      {
        kind: "text",
        text: "Still here.",
        expect: (req) => {
          if (req.body.messages.some((m: any) => m.tool_calls || m.role === "tool")) throw new Error("not rewritten");
        },
      },
    ]);
    await run(adapter.stream(request()));
    const stale: ConversationMessage[] = [
      { role: "user", content: "go" },
      { role: "assistant", content: "", toolCalls: [{ id: "call_old1", name: "list_dir", arguments: '{"path":"."}' }] },
      { role: "tool", results: [{ id: "call_old1", name: "list_dir", ok: true, content: '["a.txt"]' }] },
      { role: "assistant", content: "One file." },
      { role: "user", content: "and now?" },
    ];
    const { runtime } = memoryRuntime();
    const events = [];
    for await (const event of runToolLoop({
      adapter,
      model: "m",
      messages: stale,
      runtime,
      userId: "u",
      tools: TOOLS,
    })) {
      events.push(event);
    }
    const rewritten = events.find((e) => e.type === "history_rewritten");
    expect(rewritten?.type === "history_rewritten" && rewritten.message).toMatch(
      /refused this chat's earlier turns \(.*reasoning_content in the thinking mode must be passed back.*\); they were sent again as plain text\.$/,
    );
    const done = events.at(-1);
    expect(done).toMatchObject({ type: "done", reason: "text" });
    expect(done?.type === "done" && done.messages).toEqual([{ role: "assistant", content: "Still here." }]);
    expect(fake.failures).toHaveLength(1);
    const sent = fake.requests.at(-1)!.body.messages;
    expect(sent.map((m: any) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(sent[1].content).toBe('[called list_dir {"path":"."}]\n[list_dir returned: ["a.txt"]]\nOne file.');
  });
});

describe("Responses message items", () => {
  it("keeps commentary and final answer distinct in the stream and in the stored message", async () => {
    const { adapter } = await setup("openai", [{ kind: "raw", body: fixture("openai-message-phases.txt") }]);
    const { events, error } = await run(adapter.stream(request()));
    expect(error).toBeUndefined();
    const deltas = events.filter((e) => e.type === "text_delta") as { delta: string; itemId?: string }[];
    expect(deltas.map((d) => d.delta).join("")).toBe("Got it\n\nHere are the files.");
    expect(new Set(deltas.map((d) => d.itemId))).toEqual(
      new Set(["msg_00000000000000000000000000000011", "msg_00000000000000000000000000000012"]),
    );
    const finish = events.at(-1) as Extract<ProviderStreamEvent, { type: "finish" }>;
    expect(finish.providerData?.openaiMessages).toEqual([
      { id: "msg_00000000000000000000000000000011", text: "Got it", phase: "commentary" },
      { id: "msg_00000000000000000000000000000012", text: "Here are the files.", phase: "final_answer" },
    ]);
    expect(events.find((e) => e.type === "usage")).toMatchObject({ outputTokens: 30, reasoningTokens: 12 });
    // The next request carries both items back, with their ids and phases.
    const input = toResponsesInput([
      { role: "user", content: "go" },
      { role: "assistant", content: "Got it\n\nHere are the files.", providerData: finish.providerData },
    ]);
    expect(input.slice(1)).toMatchObject([
      { type: "message", role: "assistant", id: "msg_00000000000000000000000000000011", phase: "commentary" },
      { type: "message", role: "assistant", id: "msg_00000000000000000000000000000012", phase: "final_answer" },
    ]);
  });
});

describe("provider errors say what happened", () => {
  it("an in-stream error event (Responses) is reported as the provider's error, not as a connection problem", async () => {
    const { adapter } = await setup("openai", [{ kind: "raw", body: fixture("openai-error-event.txt") }]);
    const { error } = await run(adapter.stream(request()));
    expect(error?.message).toBe(
      "openai reported an error during the response (invalid_tool_call): The model produced an invalid tool call. The turn stopped there; retry it, or rephrase the request if it fails again.",
    );
    expect(error?.message).not.toMatch(/base URL|connection/i);
  });

  it("an error object inside a Chat Completions stream is reported with its code", async () => {
    const { adapter } = await setup("openai-chat", [{ kind: "raw", body: fixture("openai-chat-error-chunk.txt") }]);
    const { error } = await run(adapter.stream(request()));
    expect(error?.message).toMatch(
      /^openai-chat reported an error during the response \(tool_use_failed\): Tool call validation failed: list_dir arguments are not valid JSON\. The turn stopped there/,
    );
  });

  it("an Anthropic error event mid-stream is reported as such", async () => {
    const { adapter } = await setup("anthropic", [{ kind: "raw", body: fixture("anthropic-error-event.txt") }]);
    const { error } = await run(adapter.stream(request()));
    expect(error?.message).toMatch(/^anthropic reported an error during the response \(overloaded_error\): /);
    expect(error?.message).not.toMatch(/base URL/);
  });

  it.each(["openai", "openai-chat", "gemini", "anthropic"] as ProviderName[])(
    "%s: a refused connection names the URL tried",
    async (name) => {
      const port = await new Promise<number>((resolve) => {
        const server = createServer();
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as { port: number };
          server.close(() => resolve(port));
        });
      });
      const baseURL = `http://127.0.0.1:${port}/v1`;
      const adapter = createProviderAdapter(name, { apiKey: "k", baseURL });
      const { error } = await run(adapter.stream(request()));
      expect(error?.message).toContain(`Could not reach ${name} at ${baseURL} (ECONNREFUSED)`);
      expect(error?.message).not.toMatch(/\.\./);
    },
  );

  it.each(["openai", "openai-chat", "gemini", "anthropic"] as ProviderName[])(
    "%s: a server that accepts the connection and closes it is not called unreachable",
    async (name) => {
      // Reads the request's first bytes, then closes the connection without answering.
      const server = createServer((socket) => socket.once("data", () => socket.destroy()));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      try {
        const baseURL = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
        const adapter = createProviderAdapter(name, { apiKey: "k", baseURL });
        const { error } = await run(adapter.stream(request()));
        expect(error?.message).not.toMatch(/Could not reach/);
        expect(error?.message).toContain(`${name} at ${baseURL} closed the connection`);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    },
  );

  it("the loop's provider_error message has no doubled punctuation", async () => {
    const { adapter } = await setup("openai", [{ kind: "error", status: 400, message: "Bad history." }]);
    const { runtime } = memoryRuntime();
    let message = "";
    for await (const event of runToolLoop({
      adapter,
      model: "m",
      messages: [{ role: "user", content: "x" }],
      runtime,
      userId: "u",
      tools: TOOLS,
    })) {
      if (event.type === "error") message = event.message;
    }
    expect(message).toMatch(/Bad history\. The provider refused the request as sent/);
    expect(message).not.toMatch(/\.\.|\.\s*\./);
  });
});
