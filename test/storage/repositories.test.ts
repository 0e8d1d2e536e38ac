import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { SqlFreshnessLedger } from "../../src/storage/freshness-ledger.js";
import { ChatRepository, SqlAuditLog, SqlToolSettingsStore, TokenRepository } from "../../src/storage/repositories.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { tempDir } from "../helpers/server.js";

type Opener = () => Promise<ToolhostDatabase>;

function repositoryContract(name: string, open: () => Opener) {
  describe(`repositories on ${name}`, () => {
    let database: ToolhostDatabase;
    beforeAll(async () => {
      database = await open()();
    });
    afterAll(async () => {
      await database?.close();
    });

    it("saves, replaces and reads tool settings per user; corrupt JSON reads as null", async () => {
      const store = new SqlToolSettingsStore(database.db);
      await store.save("u1", "bash", { enabled: true, parameters: { timeoutSeconds: 60 } });
      await store.save("u1", "bash", { enabled: false, parameters: { timeoutSeconds: 90 } });
      await store.save("u2", "bash", { enabled: null, parameters: {} });
      expect(await store.get("u1", "bash")).toEqual({
        enabled: false,
        parameters: { timeoutSeconds: 90 },
        locked: [],
        version: 2,
      });
      expect(await store.get("u2", "bash")).toEqual({ enabled: null, parameters: {}, locked: [], version: 1 });
      expect(await store.get("u3", "bash")).toBeUndefined();
      expect([...(await store.getAll("u1")).keys()]).toEqual(["bash"]);
      await database.db
        .updateTable("user_tool_settings")
        .set({ parameters: "{not json" })
        .where("user_id", "=", "u2")
        .execute();
      // A change that bypassed the store (like another process's) is read once the cached row is dropped.
      store.invalidate("u2");
      expect(await store.get("u2", "bash")).toEqual({ enabled: null, parameters: null, locked: [], version: 1 });
    });

    it("a corrupt enabled or version column reads as unset (the default applies) and the next write repairs it", async () => {
      const store = new SqlToolSettingsStore(database.db);
      await store.save("u4", "bash", { enabled: false, parameters: { timeoutSeconds: 60 } });
      // What a database edited by hand may hold: a flag that is neither 0 nor 1, a version that is no count (SQLite
      // keeps text or a fraction in an integer column; PostgreSQL at least a negative number).
      const versions: unknown[] = name === "SQLite" ? ["abc", 1.5, -3] : [-3];
      for (const version of versions) {
        await database.db
          .updateTable("user_tool_settings")
          .set({ enabled: 7, version: version as number })
          .where("user_id", "=", "u4")
          .execute();
        store.invalidate("u4");
        expect(await store.get("u4", "bash"), String(version)).toEqual({
          enabled: null,
          parameters: { timeoutSeconds: 60 },
          locked: [],
          version: 0,
        });
        expect((await store.getAll("u4")).get("bash")?.version).toBe(0);
      }
      const written = await store.modify("u4", "bash", (current) => ({
        enabled: current?.enabled ?? null,
        parameters: current?.parameters ?? {},
      }));
      expect(written).toMatchObject({ enabled: null, version: 1 });
    });

    it("stores tokens hashed and authenticates them", async () => {
      const tokens = new TokenRepository(database.db);
      const { token } = await tokens.create("ana");
      expect(await tokens.authenticate(token)).toBe("ana");
      expect(await tokens.authenticate(`${token}x`)).toBeUndefined();
      const rows = await database.db.selectFrom("api_tokens").select("token_hash").execute();
      expect(rows.some((r) => r.token_hash === token)).toBe(false);
      expect(await tokens.count()).toBeGreaterThanOrEqual(1);
    });

    it("lists tokens with labels and last use, revokes and rotates them by id or id prefix", async () => {
      const tokens = new TokenRepository(database.db);
      const laptop = await tokens.create("lister", "laptop");
      const ci = await tokens.create("lister", null);
      await tokens.create("other-lister", "x");
      let listed = await tokens.list("lister");
      // Oldest first; two tokens made in the same millisecond may come in either order.
      const byId = (a: string[], b: string[]) => String(a[0]).localeCompare(String(b[0]));
      expect(listed.map((t) => [t.id, t.label, t.lastUsedAt]).sort(byId as never)).toEqual(
        [
          [laptop.id, "laptop", null],
          [ci.id, null, null],
        ].sort(byId as never),
      );
      expect(JSON.stringify(listed)).not.toContain(laptop.token);
      expect(await tokens.authenticate(laptop.token)).toBe("lister");
      listed = await tokens.list("lister");
      expect(listed.find((t) => t.id === laptop.id)?.lastUsedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
      // Rotation: same user and label, new id; the old token stops working.
      const rotated = await tokens.rotate(laptop.id.slice(0, 8), "lister");
      expect(rotated.replaced.id).toBe(laptop.id);
      expect(await tokens.authenticate(laptop.token)).toBeUndefined();
      expect(await tokens.authenticate(rotated.token)).toBe("lister");
      expect((await tokens.find(rotated.id)).label).toBe("laptop");
      // Scoped by user: another user's id is not found.
      await expect(tokens.revoke(ci.id, "other-lister")).rejects.toMatchObject({ reason: "not_found" });
      expect((await tokens.revoke(ci.id)).id).toBe(ci.id);
      expect(await tokens.authenticate(ci.token)).toBeUndefined();
      await expect(tokens.revoke(ci.id)).rejects.toThrow(/No token with id/);
      await expect(tokens.revoke("zz")).rejects.toThrow(/not a token id/);
    });

    it("keeps the freshness ledger per chat", async () => {
      const ledger = new SqlFreshnessLedger(database.db);
      await ledger.recordRead("c1", "/a", "h1");
      await ledger.recordRead("c1", "/a", "h2");
      expect(await ledger.getRead("c1", "/a")).toBe("h2");
      expect(await ledger.getRead("c2", "/a")).toBeUndefined();
    });

    it("stores the ledger's reads in one upsert per batch, newest read winning, and flushes them for the next reader", async () => {
      const writer = new SqlFreshnessLedger(database.db);
      const other = new SqlFreshnessLedger(database.db);
      // Kept at once for this process, not yet stored for another.
      await writer.recordRead("b1", "/x", "old");
      expect(await writer.getRead("b1", "/x")).toBe("old");
      for (let i = 0; i < 450; i++) await writer.recordRead("b1", `/f${i % 300}`, `h${i}`);
      await writer.recordRead("b1", "/x", "new");
      await writer.flush();
      // A second process (another instance) reads what was stored: the newest read of each path, across batches.
      expect(await other.getRead("b1", "/x")).toBe("new");
      expect(await other.getRead("b1", "/f0")).toBe("h300");
      expect(await other.getRead("b1", "/f299")).toBe("h299");
      const count = await database.db
        .selectFrom("file_reads")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("chat_id", "=", "b1")
        .executeTakeFirstOrThrow();
      expect(Number(count.n)).toBe(301);
      // Without flush, the batch is stored by its timer.
      await writer.recordRead("b2", "/y", "later");
      await vi.waitFor(async () => expect(await other.getRead("b2", "/y")).toBe("later"), { timeout: 5_000 });
    });

    it("scopes chats by user and appends messages in order", async () => {
      const chats = new ChatRepository(database.db);
      const chat = await chats.create({ userId: "ana", workingDirectory: "/tmp", provider: "openai", model: "m" });
      expect(await chats.get("bob", chat.id)).toBeUndefined();
      expect(await chats.get("ana", chat.id)).toMatchObject({ workingDirectory: "/tmp" });
      await chats.append(chat.id, [{ role: "user", content: { text: "hi" } }]);
      await chats.append(chat.id, [
        { role: "assistant", content: { text: "", toolCalls: [{ id: "1" }] } },
        { role: "tool", content: { results: [] } },
      ]);
      const messages = await chats.messages(chat.id);
      expect(messages.map((m) => [m.seq, m.role])).toEqual([
        [1, "user"],
        [2, "assistant"],
        [3, "tool"],
      ]);
    });

    it("serializes concurrent appends to one chat: every message stored once, in one gapless order", async () => {
      const chats = new ChatRepository(database.db);
      const chat = await chats.create({ userId: "ana", workingDirectory: "/tmp", provider: "openai", model: "m" });
      const writers = 20;
      await Promise.all(
        Array.from({ length: writers }, (_, i) =>
          chats.append(chat.id, [
            { role: "user", content: { text: `q${i}` } },
            { role: "assistant", content: { text: `a${i}` } },
          ]),
        ),
      );
      const messages = await chats.messages(chat.id);
      expect(messages.map((m) => m.seq)).toEqual(Array.from({ length: writers * 2 }, (_, i) => i + 1));
      // Each append's two messages stay adjacent: no interleaving between transactions.
      for (let i = 0; i < messages.length; i += 2) {
        const q = (messages[i]!.content as { text: string }).text;
        expect((messages[i + 1]!.content as { text: string }).text).toBe(q.replace("q", "a"));
      }
    });

    it("writes batched tool-call lines on its own after a flush found the queue empty when its timer fired", async () => {
      const audit = new SqlAuditLog(database.db);
      const line = (userId: string) => ({
        kind: "tool_call" as const,
        userId,
        chatId: null,
        tool: "read_file",
        arguments: { path: "a" },
        cwd: null,
        outcome: "ok" as const,
        errorCode: null,
        durationMs: 1,
        approval: null,
        approvedBy: null,
      });
      const stored = async (userId: string) =>
        (await database.db.selectFrom("audit_log").select("id").where("user_id", "=", userId).execute()).length;
      vi.useFakeTimers({ toFake: ["setTimeout"] });
      try {
        const first = audit.recordEvent(line("batch-a"));
        // list() writes the queued line at once; the batch timer then fires on an empty queue.
        expect((await audit.list({ userId: "batch-a" })).length).toBe(1);
        await first;
        await vi.advanceTimersByTimeAsync(1_000);
        // A later line is still written by the batch timer alone (no flush, no list).
        const second = audit.recordEvent(line("batch-b"));
        await vi.advanceTimersByTimeAsync(1_000);
        await second;
        expect(await stored("batch-b")).toBe(1);
      } finally {
        vi.useRealTimers();
      }
      expect((await audit.list({ userId: "batch-b" })).length).toBe(1);
    });

    it("records and lists audit entries newest first", async () => {
      const audit = new SqlAuditLog(database.db);
      await audit.record({
        userId: "ana",
        chatId: null,
        tool: "shell_exec",
        command: ["git", "status"],
        cwd: "/w",
        exitCode: 0,
        termination: "exited",
        durationMs: 12.4,
      });
      await new Promise((r) => setTimeout(r, 5));
      await audit.record({
        userId: "bob",
        chatId: "c",
        tool: "bash",
        command: "ls",
        cwd: null,
        exitCode: null,
        termination: "timed_out",
        durationMs: 5000,
      });
      const all = await audit.list();
      expect(all[0]).toMatchObject({ userId: "bob", command: "ls", termination: "timed_out" });
      expect(await audit.list({ userId: "ana" })).toMatchObject([{ command: ["git", "status"], durationMs: 12 }]);
    });
  });
}

repositoryContract("SQLite", () => () => openDatabase({ dataDir: tempDir() }));

const pgBin = findPgBin();
describe.skipIf(!pgBin)("PostgreSQL", () => {
  let url: string;
  beforeAll(async () => {
    url = await freshPostgresDatabase();
  }, 60_000);
  repositoryContract("PostgreSQL", () => () => openDatabase({ url }));
});
