/**
 * Turn leases on both dialects, through the real repository: taking a chat is atomic (of many acquirers at once,
 * exactly one wins, on SQLite through BEGIN IMMEDIATE and on PostgreSQL through the row lock), a stale owner's
 * writes are refused once the epoch moved on (events, journal, messages, release), and expired leases are claimed
 * by exactly one of several sweepers. An agent tree lives under its turn's lease: once the lease moved on, the old
 * owner can neither finish, spawn nor adopt its agents, and no sweep marks them interrupted while the turn is held.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentRepository } from "../../src/storage/agent-repository.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { ChatRepository } from "../../src/storage/repositories.js";
import { LeaseBusyError, StaleLeaseError } from "../../src/storage/turn-lease-records.js";
import { TurnLeaseRepository } from "../../src/storage/turn-leases.js";
import { freshPostgresDatabase } from "../helpers/postgres.js";
import { tempDir } from "../helpers/temp.js";

const dialects = [
  { name: "sqlite", open: () => openDatabase({ dataDir: tempDir() }) },
  { name: "postgres", open: async () => openDatabase({ url: await freshPostgresDatabase() }) },
];

describe.each(dialects)("turn leases on $name", ({ open }) => {
  let database: ToolhostDatabase;
  let repo: TurnLeaseRepository;
  let chats: ChatRepository;
  beforeAll(async () => {
    database = await open();
    repo = new TurnLeaseRepository(database.db);
    chats = new ChatRepository(database.db);
  });
  afterAll(() => database?.close());

  const newChat = async () =>
    (await chats.create({ userId: "u", title: null, workingDirectory: null, provider: "openai", model: "m" })).id;
  const acquire = (chatId: string, owner: string) =>
    repo.acquire({ chatId, userId: "u", owner, leaseMs: 60_000, state: { version: 1 } });

  it("of eight acquirers at once exactly one takes the chat; the rest get LeaseBusyError until it is released", async () => {
    const chatId = await newChat();
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => acquire(chatId, `i${i}`)));
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(LeaseBusyError);
    const lease = (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquire>>>).value;
    expect(await repo.current(chatId)).toMatchObject({ turnId: lease.turnId, owner: lease.owner });
    expect(await repo.release(chatId, lease.epoch)).toBe(true);
    expect(await repo.current(chatId)).toBeUndefined();
    const next = await acquire(chatId, "again");
    expect(next.epoch).toBe(lease.epoch + 1);
    await repo.release(chatId, next.epoch);
  });

  it("after a handover the old owner can no longer write; exactly one sweeper claims the turn", async () => {
    const chatId = await newChat();
    const lease = await acquire(chatId, "old");
    await repo.appendEvents(chatId, lease.epoch, [
      { seq: lease.nextSeq, turnId: lease.turnId, type: "iteration", data: "{}" },
    ]);
    await repo.journalStart(chatId, lease.epoch, { turnId: lease.turnId, callId: "c1", tool: "bash" });
    expect(await repo.handOver(chatId, lease.epoch)).toBe(true);
    const claims = await Promise.all(["s1", "s2", "s3"].map((owner) => repo.claimExpired(owner, 60_000)));
    const mine = claims.flat().filter((c) => c.chatId === chatId);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.epoch).toBeGreaterThan(lease.epoch + 1);
    expect(mine[0]!.nextSeq).toBeGreaterThan(lease.nextSeq);
    // Every write of the old owner is refused, and nothing it tried landed.
    const stale = [
      repo.appendEvents(chatId, lease.epoch, [{ seq: 99, turnId: lease.turnId, type: "x", data: "{}" }]),
      repo.journalEnd(chatId, lease.epoch, { turnId: lease.turnId, callId: "c1", result: {} }),
      repo.journalStart(chatId, lease.epoch, { turnId: lease.turnId, callId: "c2", tool: "bash" }),
      chats.append(chatId, [{ role: "user", content: { role: "user", content: "late" } }], (trx) =>
        repo.assertEpoch(trx, chatId, lease.epoch),
      ),
    ];
    for (const outcome of await Promise.allSettled(stale)) {
      expect(outcome.status).toBe("rejected");
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StaleLeaseError);
    }
    expect(await repo.release(chatId, lease.epoch)).toBe(false);
    expect((await repo.eventsAfter(chatId, 0)).map((e) => e.type)).toEqual(["iteration"]);
    expect([...(await repo.journal(lease.turnId)).values()]).toMatchObject([{ callId: "c1", status: "started" }]);
    expect(await chats.messages(chatId)).toEqual([]);
    // The new owner writes and ends the turn.
    await repo.journalEnd(chatId, mine[0]!.epoch, { turnId: lease.turnId, callId: "c1", result: { ok: true } });
    expect(await repo.release(chatId, mine[0]!.epoch)).toBe(true);
  });

  it("an agent tree is fenced by its turn's lease: a stale owner cannot finish, spawn or adopt; held agents are not swept", async () => {
    const agents = new AgentRepository(database.db);
    const chatId = await newChat();
    const lease = await acquire(chatId, "old");
    const fenceOf = (epoch: number) => (trx: Parameters<typeof repo.assertEpoch>[0]) =>
      repo.assertEpoch(trx, chatId, epoch);
    const limits = { maxDepth: 3, maxSubAgents: 10, maxTreeAgents: 10, maxConcurrent: 10, tokenBudget: 1e9 };
    const root = await agents.createRoot({
      userId: "u",
      chatId,
      provider: null,
      model: null,
      task: "t",
      instanceId: "old",
    });
    const reserve = (epoch: number, link?: string) =>
      agents.reserveChild({
        userId: "u",
        parentId: root.id,
        template: "general",
        task: "t",
        provider: null,
        model: null,
        maxTurns: 5,
        timeMs: 60_000,
        instanceId: "old",
        limits,
        inTransaction: async (trx, child) => {
          await fenceOf(epoch)(trx);
          if (link) await repo.putJournalRow(trx, root.id, `#spawn:${link}`, epoch, { agentId: child.id });
        },
      });
    const child = await reserve(lease.epoch, "call-1");
    expect(await repo.journalRow(root.id, "#spawn:call-1")).toEqual({ agentId: child.id });
    await repo.saveJournalState(chatId, lease.epoch, child.id, { version: 1, messages: [] });
    await repo.journalStart(
      chatId,
      lease.epoch,
      { turnId: child.id, callId: "c1", tool: "bash" },
      { step: 1 },
      "journal",
    );
    // A journal's own rows are not calls.
    expect([...(await repo.journal(child.id)).keys()]).toEqual(["c1"]);
    expect(await repo.journalRow(child.id, "#state")).toEqual({ step: 1 });
    // The owner died: sweeps leave the held tree alone.
    expect(await agents.interrupt({ instanceId: "old" })).toEqual([]);
    expect(await agents.interrupt({ exceptInstance: "new", staleForMs: -60_000 })).toEqual([]);
    expect(await repo.handOver(chatId, lease.epoch)).toBe(true);
    const [claim] = (await repo.claimExpired("new", 60_000)).filter((c) => c.chatId === chatId);
    // Every write of the old owner is refused and changes nothing.
    const stale = [
      agents.finish(child.id, "interrupted", { note: "stale" }, fenceOf(lease.epoch)),
      agents.saveProgress(child.id, { result: "stale" }, fenceOf(lease.epoch)),
      reserve(lease.epoch),
      agents.adopt(root.id, "old", fenceOf(lease.epoch)),
      repo.saveJournalState(chatId, lease.epoch, child.id, { stale: true }),
      repo.dropJournals(chatId, lease.epoch, [root.id, child.id]),
    ];
    for (const outcome of await Promise.allSettled(stale)) {
      expect(outcome.status).toBe("rejected");
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StaleLeaseError);
    }
    expect(await agents.get("u", child.id)).toMatchObject({ status: "running", result: null, instanceId: "old" });
    expect((await agents.get("u", root.id))?.childrenCount).toBe(1);
    expect(await repo.journalRow(child.id, "#state")).toEqual({ step: 1 });
    // The new owner adopts the tree (root first), finishes it and drops its journals.
    const adopted = await agents.adopt(root.id, "new", fenceOf(claim!.epoch));
    expect(adopted.map((a) => [a.id, a.instanceId])).toEqual([
      [root.id, "new"],
      [child.id, "new"],
    ]);
    expect(await agents.finish(child.id, "completed", { result: "done" }, fenceOf(claim!.epoch))).toBe(true);
    await repo.dropJournals(chatId, claim!.epoch, [root.id, child.id]);
    expect(await repo.journalRow(root.id, "#spawn:call-1")).toBeUndefined();
    expect(await repo.journal(child.id)).toEqual(new Map());
    // Released: the root of the dead turn is swept like any agent of a gone instance.
    expect(await repo.release(chatId, claim!.epoch)).toBe(true);
    expect(await agents.interrupt({ instanceId: "new" })).toEqual([root.id]);
  });

  it("a cancel request is seen by the owner's renewal; a renewal with a stale epoch reports the lease lost", async () => {
    const chatId = await newChat();
    const lease = await acquire(chatId, "owner");
    expect(await repo.requestCancel(chatId)).toMatchObject({ owner: "owner", turnId: lease.turnId });
    expect(await repo.renew("owner", [{ chatId, epoch: lease.epoch }], 60_000)).toEqual(new Map([[chatId, true]]));
    expect(await repo.renew("owner", [{ chatId, epoch: lease.epoch + 5 }], 60_000)).toEqual(new Map());
    await repo.release(chatId, lease.epoch);
    expect(await repo.requestCancel(chatId)).toBeUndefined();
  });
});
