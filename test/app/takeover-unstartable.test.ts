/**
 * A turn taken over by an instance that cannot start it (no key for the chat's provider there) ends instead of
 * staying busy: the lease ends, its followers get `error` and `done` on the chat's event stream, and no instance
 * claims it again. The same for a turn that waited for approvals, resumed where its provider cannot be built.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../src/app/chat-service.js";
import { ChatConfigError } from "../../src/app/chat-types.js";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";

describe("a taken-over turn that cannot start", () => {
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createAppContext({ dataDir: tempDir("toolhost-takeover-unstartable-") });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it("ends with error and done, frees the chat, and is not claimed again", async () => {
    const chat = await ctx.chats.create({ userId: "u", provider: "openai", model: "m" });
    // This instance has no key: building the provider adapter fails, as it would for a server without one.
    new ChatService({
      chats: ctx.chats,
      runtime: ctx.runtime,
      logger: ctx.logger,
      turns: ctx.turns,
      adapterFactory: () => {
        throw new ChatConfigError("OpenAI is not configured: set OPENAI_API_KEY.");
      },
    });
    // A turn whose owner (another host) died: its lease has run out.
    await ctx.turns.repository.acquire({
      chatId: chat.id,
      userId: "u",
      owner: "elsewhere:4242:deadbeef",
      leaseMs: 1,
      state: { version: 1, userMessage: { role: "user", content: "hello" } },
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await ctx.turns.tick();
    // The takeover runs in the background of the sweep: wait for the lease to end.
    await until(async () => (await ctx.turns.repository.current(chat.id)) === undefined, "the lease to end");
    const events = await ctx.turns.repository.eventsAfter(chat.id, 0);
    expect(events.map((e) => e.type)).toEqual(["error", "done"]);
    expect(JSON.parse(events[0]!.data)).toMatchObject({ code: "provider_error" });
    expect(JSON.parse(events[0]!.data).message).toContain("OPENAI_API_KEY");
    // Nothing left to claim: the chat takes a new message again.
    await ctx.turns.tick();
    expect(await ctx.turns.repository.current(chat.id)).toBeUndefined();
    const lease = await ctx.turns.repository.acquire({
      chatId: chat.id,
      userId: "u",
      owner: "here:1:00000000",
      leaseMs: 10_000,
      state: null,
    });
    expect(lease.chatId).toBe(chat.id);
  });

  it("a turn cancelled while its owner was dead ends as cancelled at the takeover instead of resuming", async () => {
    const chat = await ctx.chats.create({ userId: "u", provider: "openai", model: "m" });
    await ctx.turns.repository.acquire({
      chatId: chat.id,
      userId: "u",
      owner: "elsewhere:4243:deadbeef",
      leaseMs: 1,
      state: { version: 1, userMessage: { role: "user", content: "hello" } },
    });
    expect((await ctx.turns.cancel(chat.id)).cancelled).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await ctx.turns.tick();
    await until(async () => (await ctx.turns.repository.current(chat.id)) === undefined, "the lease to end");
    const events = await ctx.turns.repository.eventsAfter(chat.id, 0);
    expect(events.map((e) => [e.type, JSON.parse(e.data).code ?? JSON.parse(e.data).reason])).toEqual([
      ["error", "aborted"],
      ["done", "aborted"],
    ]);
  });

  it("a turn that waited for approvals, resumed where its provider cannot be built, ends and frees the chat", async () => {
    const chat = await ctx.chats.create({ userId: "u", provider: "openai", model: "m" });
    const service = new ChatService({
      chats: ctx.chats,
      runtime: ctx.runtime,
      logger: ctx.logger,
      turns: ctx.turns,
      approvals: ctx.approvals,
      adapterFactory: () => {
        throw new ChatConfigError("OpenAI is not configured: set OPENAI_API_KEY.");
      },
    });
    // A turn suspended on an ask (its client left), whose ask has since been answered.
    const call = { id: "call_1", name: "get_current_datetime", arguments: "{}" };
    const state = {
      version: 1,
      userMessage: { role: "user", content: "what time is it?" },
      step: {
        iterations: 1,
        added: [],
        assistant: { role: "assistant", content: "", toolCalls: [call] },
        results: [null],
      },
    };
    await ctx.approvals.repository.saveTurn(
      { id: "suspended-1", chatId: chat.id, userId: "u", state, owner: "gone:1:00000000" },
      new Date(),
    );
    await ctx.approvals.repository.releaseTurn("suspended-1", "gone:1:00000000");
    const claimed = await ctx.approvals.repository.claimTurn("suspended-1", "here", new Date(), new Date());
    await service.resumeTurn(claimed!);
    // Not left busy for every instance to claim and fail again: the turn ended, with error and done on its stream.
    expect(await ctx.approvals.repository.activeTurn(chat.id)).toBeUndefined();
    const events = await ctx.turns.repository.eventsAfter(chat.id, 0);
    expect(events.map((e) => [e.type, JSON.parse(e.data).code ?? JSON.parse(e.data).reason])).toEqual([
      ["error", "provider_error"],
      ["done", "error"],
    ]);
    expect(JSON.parse(events[0]!.data).message).toContain("OPENAI_API_KEY");
    expect(await ctx.turns.repository.current(chat.id)).toBeUndefined();
  });
});
