/**
 * The approval repository on SQLite and a throwaway PostgreSQL cluster: an ask is decided once (a second answer,
 * an expired ask, an unknown id are refused), an allowed approval is used once even when two callers race, a turn
 * is claimed by one process only once its owner went quiet, and the audit log stores calls and settings changes
 * with their filters.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApprovalRepository } from "../../src/storage/approvals.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { SqlAuditLog } from "../../src/storage/repositories.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { tempDir } from "../helpers/server.js";
import { approvalRecord as record } from "./helpers.js";

function contract(name: string, open: () => Promise<ToolhostDatabase>) {
  describe(`approvals on ${name}`, () => {
    let database: ToolhostDatabase;
    let repo: ApprovalRepository;
    beforeAll(async () => {
      database = await open();
      repo = new ApprovalRepository(database.db);
    });
    afterAll(async () => {
      await database?.close();
    });

    it("decides an ask once; refuses unknown, decided and expired ones", async () => {
      await repo.create(record("a1"));
      const answer = { status: "allowed" as const, decision: "allow_once" as const, message: null, decidedBy: "ana" };
      const [first, second] = await Promise.all([
        repo.decide("a1", answer, new Date()),
        repo.decide("a1", { ...answer, status: "denied", decision: "deny" }, new Date()),
      ]);
      expect([first.ok, second.ok].sort()).toEqual([false, true]);
      expect((await repo.get("a1"))?.status).toMatch(/allowed|denied/);
      expect(await repo.decide("nope", answer, new Date())).toEqual({ ok: false, reason: "not_found" });
      await repo.create(record("a2", { expiresAt: new Date(Date.now() - 1).toISOString() }));
      expect(await repo.decide("a2", answer, new Date())).toMatchObject({ ok: false, reason: "expired" });
      expect((await repo.get("a2"))?.status).toBe("expired");
      expect((await repo.listPending("ana", "chat-1")).map((r) => r.id)).not.toContain("a2");
    });

    it("uses an allowed approval exactly once, even when callers race", async () => {
      await repo.create(record("u1"));
      await repo.decide(
        "u1",
        { status: "allowed", decision: "allow_once", message: null, decidedBy: "ana" },
        new Date(),
      );
      const results = await Promise.all([repo.use("u1"), repo.use("u1"), repo.use("u1")]);
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await repo.use("u1")).toBe(false);
    });

    it("lets one process claim a turn once its owner went quiet", async () => {
      const start = new Date();
      await repo.saveTurn(
        { id: "t1", chatId: "chat-1", userId: "ana", state: { step: { results: [null] } }, owner: "A" },
        start,
      );
      // Its heartbeat is not a minute old (on the database's clock); claimers that know its owner A is gone take it
      // whatever its heartbeat — one of them.
      expect(await repo.claimTurn("t1", "B", 60_000)).toBeUndefined();
      const claims = await Promise.all([
        repo.claimTurn("t1", "B", 60_000, "A"),
        repo.claimTurn("t1", "C", 60_000, "A"),
      ]);
      expect(claims.filter(Boolean)).toHaveLength(1);
      await repo.updateTurnState(
        "t1",
        (_s: { step: { results: unknown[] } }) => ({ step: { results: ["done"] } }),
        new Date(),
      );
      expect((await repo.getTurn("t1"))?.state).toEqual({ step: { results: ["done"] } });
      expect((await repo.activeTurn("chat-1"))?.id).toBe("t1");
      await repo.deleteTurn("t1");
      expect(await repo.activeTurn("chat-1")).toBeUndefined();
    });

    it("audits calls and settings changes, filtered by user, tool, kind and time", async () => {
      const audit = new SqlAuditLog(database.db);
      await audit.recordEvent({
        kind: "tool_call",
        userId: "ana",
        chatId: null,
        tool: "bash",
        arguments: { command: "ls" },
        cwd: "/w",
        outcome: "ok",
        errorCode: null,
        durationMs: 3,
        approval: "allow_once",
        approvedBy: "ana",
        toolEntry: {
          userId: "ana",
          chatId: null,
          tool: "bash",
          command: "ls",
          cwd: "/w",
          exitCode: 0,
          termination: "exited",
          durationMs: 3,
          sandboxed: true,
        },
      });
      await audit.recordEvent({
        kind: "settings_change",
        userId: "bob",
        actor: "admin",
        tool: "bash",
        old: { enabled: null, parameters: {} },
        new: { enabled: true, parameters: { approval: "allow" } },
      });
      expect(await audit.list({ userId: "ana", tool: "bash" })).toMatchObject([
        { kind: "tool_call", approval: "allow_once", sandboxed: true, exitCode: 0, arguments: { command: "ls" } },
      ]);
      expect(await audit.list({ kind: "settings_change" })).toMatchObject([
        { userId: "bob", actor: "admin", details: { new: { parameters: { approval: "allow" } } } },
      ]);
      expect(await audit.list({ since: new Date(Date.now() + 60_000).toISOString() })).toEqual([]);
    });
  });
}

contract("SQLite", () => openDatabase({ dataDir: tempDir() }));

const pgBin = findPgBin();
describe.skipIf(!pgBin)("PostgreSQL", () => {
  let url: string;
  beforeAll(async () => {
    url = await freshPostgresDatabase();
  }, 60_000);
  contract("PostgreSQL", () => openDatabase({ url }));
});
