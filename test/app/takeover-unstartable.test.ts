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
    // Nothing had run: it ends as a cancel before the first step does, storing nothing.
    expect(events.map((e) => [e.type, JSON.parse(e.data).reason])).toEqual([["done", "aborted"]]);
    expect(await ctx.chats.messages(chat.id)).toEqual([]);
  });

  it.each([
    ["not yet reported", false],
    ["already reported", true],
  ])(
    "a turn cancelled mid-step while its owner was dead gives every call a result once (the finished call's %s), and keeps the step",
    async (_, alreadyReported) => {
      const chat = await ctx.chats.create({ userId: "u", provider: "openai", model: "m" });
      const userMessage = { role: "user" as const, content: "write two files" };
      const calls = [
        { id: "call_done", name: "write_file", arguments: '{"path":"a.txt","content":"a"}' },
        { id: "call_running", name: "write_file", arguments: '{"path":"b.txt","content":"b"}' },
        { id: "call_unstarted", name: "write_file", arguments: '{"path":"c.txt","content":"c"}' },
      ];
      const assistant = { role: "assistant" as const, content: "", toolCalls: calls };
      const lease = await ctx.turns.repository.acquire({
        chatId: chat.id,
        userId: "u",
        owner: "elsewhere:4244:deadbeef",
        leaseMs: 60_000,
        state: { version: 1, userMessage },
      });
      // The dead owner's journal: the first call ended (its result known only to the journal), the second started.
      const step = { iterations: 1, added: [], assistant, results: [null, null, null] };
      const turn = { turnId: lease.turnId };
      await ctx.turns.repository.journalStart(
        chat.id,
        lease.epoch,
        { ...turn, callId: "call_done", tool: "write_file" },
        {
          version: 1,
          userMessage,
          step,
        },
      );
      const doneResult = { id: "call_done", name: "write_file", ok: true, content: '{"written":1}' };
      await ctx.turns.repository.journalEnd(chat.id, lease.epoch, { ...turn, callId: "call_done", result: doneResult });
      await ctx.turns.repository.journalStart(chat.id, lease.epoch, {
        ...turn,
        callId: "call_running",
        tool: "write_file",
      });
      if (alreadyReported) {
        const event = { type: "tool_result", id: "call_done", name: "write_file", ok: true, result: { written: 1 } };
        await ctx.turns.repository.appendEvents(chat.id, lease.epoch, [
          { seq: 1, turnId: lease.turnId, type: "tool_result", data: JSON.stringify(event) },
        ]);
      }
      // The lease runs out (its owner died), and the user cancels before any instance takes the turn over.
      await ctx.turns.repository.renew("elsewhere:4244:deadbeef", [{ chatId: chat.id, epoch: lease.epoch }], 1);
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect((await ctx.turns.cancel(chat.id)).cancelled).toBe(true);
      await until(async () => {
        await ctx.turns.tick();
        return (await ctx.turns.repository.current(chat.id)) === undefined;
      }, "the lease to end");

      const events = (await ctx.turns.repository.eventsAfter(chat.id, 0)).map((e) => JSON.parse(e.data));
      const results = events.filter((e) => e.type === "tool_result");
      expect(results.map((e) => e.id).sort()).toEqual(["call_done", "call_running", "call_unstarted"]);
      expect(Object.fromEntries(results.map((e) => [e.id, e.ok ? "ok" : e.error.code]))).toEqual({
        call_done: "ok",
        call_running: "interrupted",
        call_unstarted: "aborted",
      });
      expect(events.at(-1)).toMatchObject({ type: "done", reason: "aborted" });
      // Stored like any cancelled turn's step: the user message, the calls and a result for each (nothing ran again).
      const stored = (await ctx.chats.messages(chat.id)).map((row) => row.content as { role: string });
      expect(stored.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
      const toolMessage = stored[2] as unknown as { results: { id: string; ok: boolean }[] };
      expect(toolMessage.results.map((r) => [r.id, r.ok])).toEqual([
        ["call_done", true],
        ["call_running", false],
        ["call_unstarted", false],
      ]);
    },
  );

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
    const claimed = await ctx.approvals.repository.claimTurn("suspended-1", "here", 60_000, "gone:1:00000000");
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
