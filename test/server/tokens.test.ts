/** API tokens over the admin API and the CLI: list, revoke, rotate, labels, last use; hashes only on disk. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
// The commands run through main(argv) in this process (the bin as a process is covered in test/cli/).
import { runCliInProcess as runCli } from "../helpers/cli.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

describe("API tokens", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("an expired token is not rotated (its replacement would keep the expiry and never work): CLI exit 1, API 400", async () => {
    const expired = await server.ctx.tokens.create("zed", { label: "old laptop", expiresInMs: -60_000 });
    const env = { TOOLHOST_DATA_DIR: server.dataDir };
    const run = await runCli(["token", "rotate", expired.id], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/expired at .*toolhost token create --user zed/);
    const api = await server.api(`/api/admin/tokens/${expired.id}/rotate`, { method: "POST" });
    expect(api.status).toBe(400);
    // Nothing was replaced: the expired token is still listed, and no other token of zed's appeared.
    const listed = await server.ctx.tokens.list("zed");
    expect(listed.map((t) => t.id)).toEqual([expired.id]);
  });

  it("admins create, list, rotate and revoke tokens over /api/admin/tokens; others get 403", async () => {
    const created = await server.api("/api/admin/tokens", {
      method: "POST",
      json: { userId: "ana", label: "ana's laptop" },
    });
    expect(created.status).toBe(201);
    const issued = (await created.json()) as { id: string; token: string; userId: string; label: string };
    expect(issued).toMatchObject({ userId: "ana", label: "ana's laptop" });
    expect(issued.token).toMatch(/^th_/);

    // Ana is no admin: the admin API refuses her, but her token works elsewhere and records its use.
    const asAna = await server.api("/api/admin/tokens", { token: issued.token });
    expect(asAna.status).toBe(403);
    expect(((await asAna.json()) as { error: { code: string } }).error.code).toBe("access_denied");

    const list = (await (await server.api("/api/admin/tokens?user=ana")).json()) as {
      tokens: { id: string; label: string; lastUsedAt: string | null }[];
    };
    expect(list.tokens).toHaveLength(1);
    expect(list.tokens[0]).toMatchObject({ id: issued.id, label: "ana's laptop" });
    expect(list.tokens[0]?.lastUsedAt).not.toBeNull();
    expect(JSON.stringify(list)).not.toContain(issued.token);

    const rotatedRes = await server.api(`/api/admin/tokens/${issued.id}/rotate`, { method: "POST" });
    expect(rotatedRes.status).toBe(200);
    const rotated = (await rotatedRes.json()) as { id: string; token: string; label: string };
    expect(rotated.label).toBe("ana's laptop");
    expect((await server.api("/api/settings/tools", { token: issued.token })).status).toBe(401);
    expect((await server.api("/api/settings/tools", { token: rotated.token })).status).toBe(200);

    const revoked = await server.api(`/api/admin/tokens/${rotated.id}`, { method: "DELETE" });
    expect(revoked.status).toBe(200);
    expect((await server.api("/api/settings/tools", { token: rotated.token })).status).toBe(401);
    const again = await server.api(`/api/admin/tokens/${rotated.id}`, { method: "DELETE" });
    expect(again.status).toBe(404);

    const bad = await server.api("/api/admin/tokens", { method: "POST", json: { userId: "a b" } });
    expect(bad.status).toBe(400);
  });

  it("a token with expiresIn expires; its check is never cached past the expiry", async () => {
    const created = await server.api("/api/admin/tokens", { method: "POST", json: { userId: "eli", expiresIn: "2h" } });
    expect(created.status).toBe(201);
    const issued = (await created.json()) as { id: string; token: string; expiresAt: string };
    const hours = (Date.parse(issued.expiresAt) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(1.9);
    expect(hours).toBeLessThanOrEqual(2);
    const bad = await server.api("/api/admin/tokens", { method: "POST", json: { userId: "eli", expiresIn: "soon" } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/e\.g\. 30d/);
    const listed = (await (await server.api("/api/admin/tokens?user=eli")).json()) as {
      tokens: { prefix: string; expiresAt: string }[];
    };
    expect(listed.tokens[0]).toEqual(
      expect.objectContaining({ prefix: issued.token.slice(0, 9), expiresAt: issued.expiresAt }),
    );

    // On a clock moved to 1 ms before the expiry the token works (and its check is cached); 1 ms after, refused.
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const expiry = Date.parse(issued.expiresAt);
      vi.setSystemTime(expiry - 1);
      expect(await server.ctx.tokens.authenticate(issued.token)).toBe("eli");
      vi.setSystemTime(expiry + 1);
      expect(await server.ctx.tokens.authenticate(issued.token)).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it("revoking a token stops a turn already streaming under it", async () => {
    const script: FakeTurn[] = [{ kind: "stall", text: "thinking" }];
    const fake: FakeProvider = await startFakeProvider("openai", script);
    try {
      process.env.OPENAI_API_KEY = "test-key";
      process.env.OPENAI_BASE_URL = fake.baseURL;
      const { id, token } = await server.ctx.tokens.create("rita");
      const chat = await server.api("/api/chats", { method: "POST", token, json: { provider: "openai", model: "m" } });
      expect(chat.status).toBe(201);
      const chatId = ((await chat.json()) as { id: string }).id;
      const res = await server.api(`/api/chats/${chatId}/messages`, { method: "POST", token, json: { content: "hi" } });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      while (!text.includes("event: text_delta")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      expect(text).toContain('"delta":"thi"');
      expect((await server.api(`/api/admin/tokens/${id}`, { method: "DELETE" })).status).toBe(200);
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      expect(text).toMatch(/event: done\ndata: \{"type":"done","reason":"aborted"/);
      await fake.stallClosed();
    } finally {
      await fake.close();
    }
  });

  it("the database file holds token hashes, never the tokens", async () => {
    const created = (await (
      await server.api("/api/admin/tokens", { method: "POST", json: { userId: "hash-check" } })
    ).json()) as { token: string };
    await server.ctx.close().catch(() => {});
    const bytes = readFileSync(join(server.dataDir, "toolhost.db")).toString("latin1");
    const wal = (() => {
      try {
        return readFileSync(join(server.dataDir, "toolhost.db-wal")).toString("latin1");
      } catch {
        return "";
      }
    })();
    expect(bytes + wal).not.toContain(created.token);
    expect(bytes + wal).not.toContain(server.token);
  });
});

describe("toolhost token (CLI) and the second start", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await server.stop();
  });

  it("lists, rotates and revokes; a second start says how to get a token", async () => {
    const env = { TOOLHOST_DATA_DIR: server.dataDir };
    const created = await runCli(["token", "create", "--user", "bob", "--label", "ci"], env);
    expect(created.code).toBe(0);
    const bobToken = created.stdout.trim();
    const listed = await runCli(["token", "list", "--json"], env);
    expect(listed.code).toBe(0);
    const tokens = JSON.parse(listed.stdout).tokens as { id: string; userId: string; label: string | null }[];
    expect(tokens.map((t) => [t.userId, t.label])).toEqual([
      ["local", "created on first start"],
      ["bob", "ci"],
    ]);
    expect(listed.stdout).not.toContain(bobToken);
    const bob = tokens[1]!;
    const table = await runCli(["token", "list", "--user", "bob"], env);
    expect(table.stdout).toMatch(/ID\s+TOKEN\s+USER\s+LABEL\s+CREATED\s+LAST USED\s+EXPIRES/);
    expect(table.stdout).toContain("never");
    // The first characters of bob's token, so bob can tell which id is his.
    expect(table.stdout).toContain(`${bobToken.slice(0, 9)}…`);
    expect(table.stdout).not.toContain(bobToken.slice(0, 12));

    const expiring = await runCli(["token", "create", "--user", "bob", "--expires-in", "30d"], env);
    expect(expiring.code).toBe(0);
    expect(expiring.stderr).toMatch(/expires at \d{4}-/);
    const withExpiry = JSON.parse((await runCli(["token", "list", "--user", "bob", "--json"], env)).stdout).tokens;
    const days = (Date.parse(withExpiry[1].expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThanOrEqual(30);
    await runCli(["token", "revoke", withExpiry[1].id], env);
    const badLifetime = await runCli(["token", "create", "--expires-in", "30 years"], env);
    expect(badLifetime.code).toBe(2);
    expect(badLifetime.stderr).toMatch(/--expires-in: .*e\.g\. 30d/);

    const rotated = await runCli(["token", "rotate", bob.id.slice(0, 8)], env);
    expect(rotated.code).toBe(0);
    expect(rotated.stdout.trim()).toMatch(/^th_/);
    expect(rotated.stdout.trim()).not.toBe(bobToken);
    expect(rotated.stderr).toContain("no longer works");

    const missing = await runCli(["token", "revoke", bob.id], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No token with id/);
    const newId = JSON.parse((await runCli(["token", "list", "--user", "bob", "--json"], env)).stdout).tokens[0].id;
    const revoked = await runCli(["token", "revoke", newId], env);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain(`Revoked token ${newId} of "bob" (ci)`);

    const second = await startTestServer({ dataDir: server.dataDir });
    try {
      expect(second.token).toBe("");
      expect(second.printed.join("\n")).toMatch(/toolhost token create --user NAME/);
    } finally {
      await second.stop();
    }
  });
});

describe("the first token", () => {
  it("goes to the local user by default, and to the first configured admin when local is none", async () => {
    for (const [admins, owner] of [
      [undefined, "local"],
      ["alice, bob", "alice"],
      ["bob,local", "local"],
      ["", "local"],
    ] as const) {
      const s = await startTestServer(admins === undefined ? {} : { env: { TOOLHOST_ADMIN_USERS: admins } });
      try {
        expect(s.printed.join("\n")).toContain(`was created for user "${owner}"`);
        const me = (await (await s.api("/api/me")).json()) as { userId: string; admin: boolean };
        // The one token a new server prints can administer it (unless the operator named no admin at all).
        expect(me).toEqual({ userId: owner, admin: admins !== "" });
      } finally {
        await s.stop();
      }
    }
  });
});
