/**
 * A turn taken over by an instance that cannot start it (no key for the chat's provider there) ends instead of
 * staying busy: the lease ends, its followers get `error` and `done` on the chat's event stream, and no instance
 * claims it again.
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
});
