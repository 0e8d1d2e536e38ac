import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../src/app/chat-service.js";
import { ChatBusyError, ChatConfigError, type ChatTurnEvent, chatSystemPrompt } from "../../src/app/chat-types.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import type { LoopEvent } from "../../src/loop/events.js";
import type { ProviderAdapter } from "../../src/providers/types.js";
import { type ScriptedTurn, scriptedAdapter, textTurn, toolTurn } from "./scripted-adapter.js";

let root: string;
let ctx: AppContext;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "toolhost-chat-service-"));
  mkdirSync(join(root, "data"));
  mkdirSync(join(root, "allowed", "project"), { recursive: true });
  mkdirSync(join(root, "outside"));
  mkdirSync(join(root, "allowed-evil"));
  writeFileSync(join(root, "allowed", "project", "notes.txt"), "hello\n");
  symlinkSync(join(root, "outside"), join(root, "allowed", "escape"));
  ctx = await createAppContext({ dataDir: join(root, "data") });
});

afterAll(async () => {
  await ctx?.close();
  rmSync(root, { recursive: true, force: true });
});

function service(adapter: ProviderAdapter | (() => ProviderAdapter), extra: { chatRoots?: string[] | null } = {}) {
  return new ChatService({
    chats: ctx.chats,
    runtime: ctx.runtime,
    logger: ctx.logger,
    env: {},
    chatRoots: extra.chatRoots ?? null,
    adapterFactory: typeof adapter === "function" ? adapter : () => adapter,
  });
}

async function collect(iterable: AsyncIterable<ChatTurnEvent>): Promise<LoopEvent[]> {
  const events: LoopEvent[] = [];
  for await (const event of iterable) if (!("agent" in event)) events.push(event as LoopEvent);
  return events;
}

describe("ChatService: binding a working directory", () => {
  const s = () => service(scriptedAdapter([]), { chatRoots: [join(root, "allowed")] });

  it("refuses a directory outside the chat roots, also through a symlink", async () => {
    await expect(
      s().createChat("u1", { provider: "openai", model: "m", workingDirectory: join(root, "outside") }),
    ).rejects.toMatchObject({ code: "access_denied" });
    await expect(
      s().createChat("u1", { provider: "openai", model: "m", workingDirectory: join(root, "allowed", "escape") }),
    ).rejects.toMatchObject({ code: "access_denied" });
    await expect(
      s().createChat("u1", { provider: "openai", model: "m", workingDirectory: `${join(root, "allowed")}-evil` }),
    ).rejects.toMatchObject({ code: "access_denied" });
  });

  it("requires a directory when roots are configured", async () => {
    await expect(s().createChat("u1", { provider: "openai", model: "m" })).rejects.toMatchObject({
      code: "access_denied",
    });
  });

  it("refuses a missing path and a file, naming the problem", async () => {
    await expect(
      s().createChat("u1", { provider: "openai", model: "m", workingDirectory: join(root, "allowed", "nope") }),
    ).rejects.toThrow(/does not exist/);
    await expect(
      s().createChat("u1", {
        provider: "openai",
        model: "m",
        workingDirectory: join(root, "allowed", "project", "notes.txt"),
      }),
    ).rejects.toThrow(/not a directory/);
  });

  it("refuses an unknown provider and an empty model", async () => {
    await expect(
      s().createChat("u1", { provider: "mistral", model: "m", workingDirectory: join(root, "allowed") }),
    ).rejects.toThrow(/Unknown provider "mistral"/);
    await expect(
      s().createChat("u1", { provider: "openai", model: " ", workingDirectory: join(root, "allowed") }),
    ).rejects.toMatchObject({ code: "validation_failed" });
  });

  it("binds a directory within a root, and any directory when no roots are set", async () => {
    const chat = await s().createChat("u1", {
      provider: "anthropic",
      model: "m",
      workingDirectory: join(root, "allowed", "project"),
    });
    expect(chat).toMatchObject({
      workingDirectory: join(root, "allowed", "project"),
      provider: "anthropic",
      model: "m",
    });
    const free = await service(scriptedAdapter([])).createChat("u1", {
      provider: "gemini",
      model: "m",
      workingDirectory: join(root, "outside"),
    });
    expect(free.workingDirectory).toBe(join(root, "outside"));
  });

  it("announces the working directory in the system prompt", () => {
    expect(chatSystemPrompt("/srv/project")).toContain("/srv/project");
    expect(chatSystemPrompt(null)).toContain("absolute paths");
  });
});

describe("ChatService: turns", () => {
  const project = () => join(root, "allowed", "project");

  it("runs a turn with real tools, stores it, and sends the history on the next turn", async () => {
    const adapter = scriptedAdapter([
      toolTurn([{ id: "c1", name: "list_directory", arguments: '{"path":"."}' }]),
      textTurn("There is notes.txt."),
      textTurn("Still there."),
    ]);
    const s = service(adapter);
    const chat = await s.createChat("u1", { provider: "openai", model: "m1", workingDirectory: project() });
    const events = await collect((await s.prepareTurn("u1", chat.id, "What is here?")).run());
    const result = events.find((e) => e.type === "tool_result");
    expect(result).toMatchObject({ ok: true, name: "list_directory" });
    expect(JSON.stringify(result)).toContain("notes.txt");
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "text" });
    expect(adapter.requests[0]!.system).toContain(project());
    expect(adapter.requests[0]!.model).toBe("m1");

    const stored = await s.getChat("u1", chat.id);
    expect(stored?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(stored?.title).toBe("What is here?");

    await collect((await s.prepareTurn("u1", chat.id, "And now?")).run());
    expect(adapter.requests[2]!.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
    expect((await s.getChat("u1", chat.id))?.messages).toHaveLength(6);
  });

  it("keeps another user's chat invisible", async () => {
    const s = service(scriptedAdapter([]));
    const chat = await s.createChat("alice", { provider: "openai", model: "m", workingDirectory: project() });
    expect(await s.getChat("mallory", chat.id)).toBeUndefined();
    await expect(s.prepareTurn("mallory", chat.id, "hi")).rejects.toMatchObject({ code: "not_found" });
  });

  it("stores only complete steps when the provider stream breaks mid-turn", async () => {
    const broken: ScriptedTurn = async function* () {
      yield { type: "text_delta", delta: "I will now rea" };
      throw new Error("stream ended without a terminal event");
    };
    const adapter = scriptedAdapter([
      toolTurn([{ id: "c1", name: "list_directory", arguments: '{"path":"."}' }]),
      broken,
    ]);
    const s = service(adapter);
    const chat = await s.createChat("u1", { provider: "openai", model: "m", workingDirectory: project() });
    const events = await collect((await s.prepareTurn("u1", chat.id, "Look around")).run());
    expect(events.at(-2)).toMatchObject({ type: "error", code: "provider_error" });
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "error" });
    const stored = await s.getChat("u1", chat.id);
    expect(stored?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(JSON.stringify(stored?.messages)).not.toContain("I will now rea");
  });

  it("stores nothing when the first model turn fails, so a retry does not double the user message", async () => {
    // biome-ignore lint/correctness/useYield: fails before its first event
    const failing: ScriptedTurn = async function* () {
      throw new Error("connection refused");
    };
    const s = service(scriptedAdapter([failing, textTurn("ok now")]));
    const chat = await s.createChat("u1", { provider: "openai", model: "m", workingDirectory: project() });
    await collect((await s.prepareTurn("u1", chat.id, "first try")).run());
    expect((await s.getChat("u1", chat.id))?.messages).toEqual([]);
    await collect((await s.prepareTurn("u1", chat.id, "first try")).run());
    expect((await s.getChat("u1", chat.id))?.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
  });

  it("refuses a second concurrent turn of the same chat and releases the chat afterwards", async () => {
    let release: (() => void) | undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow: ScriptedTurn = async function* () {
      await gate;
      yield { type: "text_delta", delta: "done" };
      yield { type: "finish", reason: "stop" };
    };
    const s = service(scriptedAdapter([slow, textTurn("again")]));
    const chat = await s.createChat("u1", { provider: "openai", model: "m", workingDirectory: project() });
    const first = await s.prepareTurn("u1", chat.id, "one");
    const running = collect(first.run());
    await expect(s.prepareTurn("u1", chat.id, "two")).rejects.toBeInstanceOf(ChatBusyError);
    release?.();
    await running;
    await collect((await s.prepareTurn("u1", chat.id, "two")).run());
  });

  it("reports an unconfigured provider as ChatConfigError with the factory's message", async () => {
    let configured = true;
    const s = service(() => {
      if (configured) return scriptedAdapter([]);
      throw new Error("OPENAI_API_KEY is not set.");
    });
    const chat = await s.createChat("u1", { provider: "openai", model: "m", workingDirectory: project() });
    // The key went away after the chat was created: the turn reports it.
    configured = false;
    const error = await s.prepareTurn("u1", chat.id, "hi").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatConfigError);
    expect((error as Error).message).toContain("OPENAI_API_KEY");
    // Creating a chat with an unconfigured provider fails at once, and stores nothing.
    const refused = await s
      .createChat("u1", { id: "never-made", provider: "openai", model: "m", workingDirectory: project() })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ChatConfigError);
    expect(await s.getChat("u1", "never-made")).toBeUndefined();
  });

  it("cancels a running turn and keeps its completed steps", async () => {
    const controller = new AbortController();
    const adapter = scriptedAdapter([
      toolTurn([{ id: "c1", name: "list_directory", arguments: '{"path":"."}' }]),
      (request) => {
        controller.abort();
        return textTurn("never")(request);
      },
    ]);
    const s = service(adapter);
    const chat = await s.createChat("u1", { provider: "openai", model: "m", workingDirectory: project() });
    const events = await collect((await s.prepareTurn("u1", chat.id, "go")).run(controller.signal));
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "aborted" });
    expect(events.some((e) => e.type === "text_delta")).toBe(false);
    expect((await s.getChat("u1", chat.id))?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
  });

  it("names the missing API key variable with the real adapter factory", async () => {
    const s = new ChatService({ chats: ctx.chats, runtime: ctx.runtime, env: {}, chatRoots: null });
    await expect(
      s.createChat("u1", { provider: "anthropic", model: "m", workingDirectory: project() }),
    ).rejects.toThrow(/ANTHROPIC_API_KEY/);
  });
});
