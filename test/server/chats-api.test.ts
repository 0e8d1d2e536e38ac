/** Chats over HTTP: paginated listing, rename, delete (per user). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

describe("GET/PATCH/DELETE /api/chats", () => {
  let server: TestServer;
  let bobToken: string;
  beforeAll(async () => {
    server = await startTestServer();
    bobToken = (await server.ctx.tokens.create("bob")).token;
    for (let i = 0; i < 7; i++) await server.ctx.chats.create({ userId: "local", id: `c${i}`, title: `chat ${i}` });
    await server.ctx.chats.create({ userId: "bob", id: "bobs" });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("pages through the user's chats with a cursor, each chat once", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await server.api(`/api/chats?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { chats: { id: string }[]; nextCursor: string | null };
      expect(page.chats.length).toBeLessThanOrEqual(3);
      seen.push(...page.chats.map((c) => c.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen.sort()).toEqual(["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    expect((await server.api("/api/chats?limit=0")).status).toBe(400);
    expect((await server.api("/api/chats?cursor=garbage")).status).toBe(400);
  });

  it("a chat with a provider that has no key fails at creation: 503 provider_not_configured naming the variable", async () => {
    delete process.env.ANTHROPIC_API_KEY;
    process.env.TOOLHOST_CONFIG = `${server.dataDir}/no-config.json`;
    const res = await server.api("/api/chats", { method: "POST", json: { provider: "anthropic", model: "claude" } });
    expect(res.status).toBe(503);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("provider_not_configured");
    expect(body.error.message).toContain("ANTHROPIC_API_KEY");
    const listed = (await (await server.api("/api/chats")).json()) as { chats: { provider: string }[] };
    expect(listed.chats.some((c) => c.provider === "anthropic")).toBe(false);
  });

  it("renames and deletes a chat; another user's chat is a 404 and stays", async () => {
    const renamed = await server.api("/api/chats/c1", { method: "PATCH", json: { title: "Release notes" } });
    expect(renamed.status).toBe(200);
    expect(((await renamed.json()) as { title: string }).title).toBe("Release notes");
    expect((await server.api("/api/chats/c1", { method: "PATCH", json: { title: 5 } })).status).toBe(400);

    await server.ctx.chats.append("c2", [{ role: "user", content: { role: "user", content: "hi" } }]);
    const deleted = await server.api("/api/chats/c2", { method: "DELETE" });
    expect(deleted.status).toBe(204);
    expect((await server.api("/api/chats/c2")).status).toBe(404);
    expect(await server.ctx.chats.messages("c2")).toEqual([]);
    expect((await server.api("/api/chats/c2", { method: "DELETE" })).status).toBe(404);

    expect((await server.api("/api/chats/bobs", { method: "DELETE" })).status).toBe(404);
    expect((await server.api("/api/chats/bobs", { method: "PATCH", json: { title: "x" } })).status).toBe(404);
    expect((await server.api("/api/chats/bobs", { token: bobToken })).status).toBe(200);
  });
});
