/**
 * The turn-ownership code path on SQLite, one real server over a real file: two messages posted to one chat at the
 * same moment are never both accepted (the busy check and the reservation are one BEGIN IMMEDIATE transaction),
 * the stream's ids are the stored events' ids (GET /api/chats/:id/events replays them), and POST
 * /api/chats/:id/cancel stops the running turn through the in-process signal bus.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type FakeProvider,
  type FakeRequest,
  type FakeTurnAction,
  startFakeProvider,
} from "../fakes/provider-server.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let fake: FakeProvider;
let s: TestServer;
const saved = { key: process.env.OPENAI_API_KEY, url: process.env.OPENAI_BASE_URL };

function dispatch(request: FakeRequest): FakeTurnAction {
  if (request.lastUserText.startsWith("stall")) return { kind: "stall", text: "thinking" };
  return { kind: "text", text: "hello there" };
}

beforeAll(async () => {
  fake = await startFakeProvider(
    "openai",
    Array.from({ length: 100 }, () => dispatch),
  );
  process.env.OPENAI_API_KEY = "test-key";
  process.env.OPENAI_BASE_URL = fake.baseURL;
  s = await startTestServer();
});

afterAll(async () => {
  await s?.stop();
  await fake?.close();
  if (saved.key === undefined) delete process.env.OPENAI_API_KEY;
  else process.env.OPENAI_API_KEY = saved.key;
  if (saved.url === undefined) delete process.env.OPENAI_BASE_URL;
  else process.env.OPENAI_BASE_URL = saved.url;
});

async function sseEvents(res: Response): Promise<{ id: string; event: string; data: string }[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.includes("event:"))
    .map((block) => {
      const field = (name: string) => new RegExp(`^${name}: ?(.*)$`, "m").exec(block)?.[1] ?? "";
      return { id: field("id"), event: field("event"), data: field("data") };
    });
}

const newChat = async () =>
  (
    (await (await s.api("/api/chats", { method: "POST", json: { provider: "openai", model: "m" } })).json()) as {
      id: string;
    }
  ).id;

describe("chat turns on SQLite", () => {
  it("text no database can store (a NUL) is refused before a turn starts; the title is one line", async () => {
    const chatId = await newChat();
    const nul = await s.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content: "hi\u0000there" } });
    expect(nul.status).toBe(400);
    expect(((await nul.json()) as { error: { message: string } }).error.message).toMatch(/body.content contains a NUL/);
    const title = await s.api(`/api/chats/${chatId}`, { method: "PATCH", json: { title: "a\u0000b" } });
    expect(title.status).toBe(400);
    const ok = await s.api(`/api/chats/${chatId}/messages`, {
      method: "POST",
      json: { content: "first line\n\tsecond line" },
    });
    expect((await sseEvents(ok)).at(-1)?.event).toBe("done");
    const chat = (await (await s.api(`/api/chats/${chatId}`)).json()) as { title: string; messages: unknown[] };
    expect(chat.title).toBe("first line second line");
    expect(chat.messages).toHaveLength(2);
    // A tool's arguments reach it as they are: NUL is the tool's to judge.
    const execute = await s.api("/api/tools/get_current_datetime/execute", {
      method: "POST",
      json: { arguments: { timezone: "UTC\u0000" } },
    });
    expect(execute.status).toBe(200);
    expect(((await execute.json()) as { ok: boolean }).ok).toBe(false);
  });

  it("two posts at the same moment: exactly one 409 chat_busy every time, and the history holds one turn", async () => {
    for (let round = 0; round < 6; round++) {
      const chatId = await newChat();
      const posts = await Promise.all(
        [1, 2].map(() => s.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content: "hi" } })),
      );
      expect(posts.map((r) => r.status).sort()).toEqual([200, 409]);
      const ok = posts.find((r) => r.status === 200)!;
      const events = await sseEvents(ok);
      await posts.find((r) => r.status === 409)!.text();
      expect(events.at(-1)?.event).toBe("done");
      // The ids the stream sent are the stored events' ids.
      const replay = await sseEvents(await s.api(`/api/chats/${chatId}/events?after=0`));
      expect(replay).toEqual(events);
      const chat = (await (await s.api(`/api/chats/${chatId}`)).json()) as { messages: unknown[] };
      expect(chat.messages).toHaveLength(2);
    }
  });

  it("POST /api/chats/:id/cancel stops a running turn; the events stream ends with its done", async () => {
    const chatId = await newChat();
    const res = await s.api(`/api/chats/${chatId}/messages`, { method: "POST", json: { content: "stall please" } });
    const streamed = sseEvents(res);
    await until(() => s.ctx.turns.repository.current(chatId), "the turn to hold its lease", {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    const follow = s.api(`/api/chats/${chatId}/events`).then(sseEvents);
    const cancel = await s.api(`/api/chats/${chatId}/cancel`, { method: "POST", json: {} });
    expect(await cancel.json()).toMatchObject({ cancelled: true });
    const events = await streamed;
    expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ type: "done", reason: "aborted" });
    expect((await follow).at(-1)?.event).toBe("done");
    expect(await s.ctx.turns.repository.current(chatId)).toBeUndefined();
    // Deleting the chat removes its stored events too.
    expect((await s.api(`/api/chats/${chatId}`, { method: "DELETE" })).status).toBe(204);
    expect(await s.ctx.turns.repository.eventsAfter(chatId, 0)).toEqual([]);
  });
});
