/**
 * Turn ownership across instances sharing one database: the lease of each chat's running turn (owner, fencing
 * epoch, expiry on the DATABASE's clock), the turn's stored SSE events, the journal of its tool calls, and the
 * signal rows the instances' poll fallback reads. Every write a turn makes checks its epoch inside the same
 * transaction ({@link TurnLeaseRepository.assertEpoch}): once another instance took the turn over (the epoch moved
 * on), the old owner's writes fail with {@link StaleLeaseError} instead of landing twice.
 *
 * Times are milliseconds since the epoch read from the database (`clock_timestamp()` on PostgreSQL, `julianday`
 * on SQLite), so instances whose clocks disagree still agree on who holds a lease.
 */
import { randomUUID } from "node:crypto";
import { type Kysely, sql } from "kysely";
import { NotFoundError } from "../core/errors.js";
import { dialectOf, inTransaction } from "./transaction.js";
import {
  JOURNAL_STATE_ROW,
  type JournalEntry,
  type Lease,
  LeaseBusyError,
  nowSql,
  type SignalRow,
  StaleLeaseError,
  type StoredTurnEvent,
  TAKEOVER_SEQ_GAP,
  type TurnTables,
} from "./turn-lease-records.js";

/** Most signal rows one read returns ({@link TurnLeaseRepository.signalsSince}); a poll reads page after page. */
export const SIGNAL_PAGE = 1000;

/** Leases, events, journal and signals over one Kysely instance. */
export class TurnLeaseRepository {
  readonly #db: Kysely<TurnTables>;

  constructor(db: Kysely<any>) {
    this.#db = db as Kysely<TurnTables>;
  }

  /** The database clock now, in ms. */
  async now(db: Kysely<any> = this.#db): Promise<number> {
    const row = await sql<{ now: number | string }>`select ${nowSql(db)} as now`.execute(db);
    return Number(row.rows[0]?.now);
  }

  /**
   * Takes the chat's lease for a new turn, atomically (one transaction: `BEGIN IMMEDIATE` on SQLite, the row
   * locked `FOR UPDATE` on PostgreSQL). Throws LeaseBusyError while another turn holds it — running, expired but
   * not yet taken over, or suspended waiting for approvals.
   */
  acquire(input: {
    chatId: string;
    userId: string;
    owner: string;
    leaseMs: number;
    state: unknown;
    /** Resuming the turn that waits for approvals itself: do not count it as busy. */
    resumingSuspended?: boolean;
    /**
     * When resuming a suspended turn: whether the instance holding the lease is known to be gone (a process of this
     * host that no longer runs). Such a lease, or an expired one, is taken at once (the epoch fences its owner).
     */
    holderIsGone?: (owner: string) => boolean;
  }): Promise<Lease> {
    return inTransaction(this.#db, async (trx, tx) => {
      // The chat first, its row locked as a delete locks it (ChatRepository.delete): a chat deleted meanwhile takes
      // no turn, and one cannot be deleted under the turn this takes.
      const chat = await tx
        .forUpdate(trx.selectFrom("chats").select("id").where("id", "=", input.chatId))
        .executeTakeFirst();
      if (!chat) throw new NotFoundError(`No chat "${input.chatId}" for this user. Create one with POST /api/chats.`);
      await trx
        .insertInto("chat_leases")
        .values({ chat_id: input.chatId, epoch: 0, expires_ms: 0, cancel_requested: 0 })
        .onConflict((oc) => oc.column("chat_id").doNothing())
        .execute();
      const row = await tx
        .forUpdate(trx.selectFrom("chat_leases").selectAll().where("chat_id", "=", input.chatId))
        .executeTakeFirstOrThrow();
      const now = await this.now(trx);
      const abandoned =
        input.resumingSuspended &&
        (Number(row.expires_ms) < now || (row.owner != null && input.holderIsGone?.(row.owner) === true));
      if (row.turn_id && !abandoned) {
        throw new LeaseBusyError(
          `Chat ${input.chatId} is already running a turn; wait for it to finish or cancel it (POST /api/chats/${input.chatId}/cancel).`,
        );
      }
      const suspended = await trx
        .selectFrom("approval_turns")
        .select("chat_id")
        .where("chat_id", "=", input.chatId)
        .where("status", "!=", "done")
        .executeTakeFirst();
      if (suspended && !input.resumingSuspended) {
        throw new LeaseBusyError(
          `Chat ${input.chatId} has a turn waiting for approvals (GET /api/chats/${input.chatId}/approvals); answer them, cancel the turn (POST /api/chats/${input.chatId}/cancel), or wait until they expire, before sending another message.`,
        );
      }
      const turnId = randomUUID();
      const epoch = Number(row.epoch) + 1;
      await trx
        .updateTable("chat_leases")
        .set({
          turn_id: turnId,
          user_id: input.userId,
          owner: input.owner,
          epoch,
          expires_ms: now + input.leaseMs,
          cancel_requested: 0,
          state: JSON.stringify(input.state),
        })
        .where("chat_id", "=", input.chatId)
        .execute();
      return {
        chatId: input.chatId,
        turnId,
        userId: input.userId,
        owner: input.owner,
        epoch,
        nextSeq: await this.#nextSeq(trx, input.chatId),
        state: input.state,
      };
    });
  }

  /**
   * Inside a running transaction (a chat's delete, after it locked the chat's row): throws LeaseBusyError while a
   * turn of the chat holds its lease or waits for approvals. With {@link acquire} locking the chat's row first, a
   * turn starting at the same moment either sees the chat gone or is seen here.
   */
  async assertIdle(trx: Kysely<any>, chatId: string): Promise<void> {
    const t = trx as Kysely<TurnTables>;
    const lease = await t.selectFrom("chat_leases").select("turn_id").where("chat_id", "=", chatId).executeTakeFirst();
    const suspended = await t
      .selectFrom("approval_turns")
      .select("chat_id")
      .where("chat_id", "=", chatId)
      .where("status", "!=", "done")
      .executeTakeFirst();
    if (lease?.turn_id || suspended) {
      throw new LeaseBusyError(
        `Chat ${chatId} is running a turn (or one waits for approvals); cancel it (POST /api/chats/${chatId}/cancel) or wait for it to finish before deleting.`,
      );
    }
  }

  async #nextSeq(trx: Kysely<TurnTables>, chatId: string): Promise<number> {
    const last = await trx
      .selectFrom("turn_events")
      .select((eb) => eb.fn.max("seq").as("seq"))
      .where("chat_id", "=", chatId)
      .executeTakeFirst();
    return Number(last?.seq ?? 0) + 1;
  }

  /**
   * Checks, inside a running transaction, that the chat's lease still has this epoch (and locks the row on
   * PostgreSQL until commit, so a takeover cannot slip in between). Throws StaleLeaseError otherwise.
   */
  async assertEpoch(trx: Kysely<any>, chatId: string, epoch: number): Promise<void> {
    const t = trx as Kysely<TurnTables>;
    const query = t.selectFrom("chat_leases").select(["epoch", "turn_id"]).where("chat_id", "=", chatId);
    const row = await (dialectOf(trx) === "postgres" ? query.forUpdate() : query).executeTakeFirst();
    if (!row || Number(row.epoch) !== epoch || !row.turn_id) {
      throw new StaleLeaseError(
        `This instance no longer owns the turn of chat ${chatId}: another instance took it over (or it was handed over).`,
      );
    }
  }

  /**
   * Extends the leases this owner holds (each only while its epoch is unchanged) to now + leaseMs. Returns the
   * chats whose lease was extended with their cancel flag; a chat missing from the result lost its lease.
   */
  async renew(
    owner: string,
    held: { chatId: string; epoch: number }[],
    leaseMs: number,
  ): Promise<Map<string, boolean>> {
    const renewed = new Map<string, boolean>();
    if (held.length === 0) return renewed;
    await inTransaction(this.#db, async (trx) => {
      const now = await this.now(trx);
      for (const { chatId, epoch } of held) {
        const result = await trx
          .updateTable("chat_leases")
          .set({ expires_ms: now + leaseMs })
          .where("chat_id", "=", chatId)
          .where("epoch", "=", epoch)
          .where("owner", "=", owner)
          .where("turn_id", "is not", null)
          .executeTakeFirst();
        if (Number(result.numUpdatedRows) > 0) renewed.set(chatId, false);
      }
      if (renewed.size > 0) {
        const flagged = await trx
          .selectFrom("chat_leases")
          .select("chat_id")
          .where("chat_id", "in", [...renewed.keys()])
          .where("cancel_requested", "=", 1)
          .execute();
        for (const row of flagged) renewed.set(row.chat_id, true);
      }
    });
    return renewed;
  }

  /** Stores the turn's takeover state (fenced). */
  saveState(chatId: string, epoch: number, state: unknown): Promise<void> {
    return inTransaction(this.#db, async (trx) => {
      await this.assertEpoch(trx, chatId, epoch);
      await trx
        .updateTable("chat_leases")
        .set({ state: JSON.stringify(state) })
        .where("chat_id", "=", chatId)
        .execute();
    });
  }

  /**
   * Ends the turn: frees the lease when it still has this epoch (a no-op for a stale owner). `fenced` work (e.g.
   * the last events) runs in the same transaction after the check.
   */
  release(chatId: string, epoch: number, fenced?: (trx: Kysely<any>) => Promise<void>): Promise<boolean> {
    return inTransaction(this.#db, async (trx) => {
      try {
        await this.assertEpoch(trx, chatId, epoch);
      } catch (error) {
        if (error instanceof StaleLeaseError) return false;
        throw error;
      }
      await fenced?.(trx);
      await trx
        .updateTable("chat_leases")
        .set({ turn_id: null, owner: null, expires_ms: 0, cancel_requested: 0, state: null })
        .where("chat_id", "=", chatId)
        .execute();
      return true;
    });
  }

  /**
   * Hands the lease over (graceful shutdown): expires it at once and moves the epoch on, so this owner can no longer
   * write and the next sweep of any instance takes the turn over. False when it was not held with this epoch.
   */
  handOver(chatId: string, epoch: number): Promise<boolean> {
    return inTransaction(this.#db, async (trx) => {
      const result = await trx
        .updateTable("chat_leases")
        .set({ expires_ms: 0, epoch: epoch + 1, owner: null })
        .where("chat_id", "=", chatId)
        .where("epoch", "=", epoch)
        .where("turn_id", "is not", null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    });
  }

  /** Marks the chat's running turn for cancellation; returns its owner and turn id, or undefined when none runs. */
  requestCancel(chatId: string): Promise<{ owner: string | null; turnId: string } | undefined> {
    return inTransaction(this.#db, async (trx, tx) => {
      const row = await tx
        .forUpdate(trx.selectFrom("chat_leases").select(["turn_id", "owner"]).where("chat_id", "=", chatId))
        .executeTakeFirst();
      if (!row?.turn_id) return undefined;
      await trx.updateTable("chat_leases").set({ cancel_requested: 1 }).where("chat_id", "=", chatId).execute();
      return { owner: row.owner, turnId: row.turn_id };
    });
  }

  /** Whether the chat's turn still holds the lease with this epoch and a cancel was requested for it. */
  async cancelRequested(chatId: string, epoch: number): Promise<boolean> {
    const row = await this.#db
      .selectFrom("chat_leases")
      .select("cancel_requested")
      .where("chat_id", "=", chatId)
      .where("epoch", "=", epoch)
      .where("turn_id", "is not", null)
      .executeTakeFirst();
    return Number(row?.cancel_requested ?? 0) === 1;
  }

  /** The chat's current turn (id, owner), or undefined when none holds the lease. */
  async current(chatId: string): Promise<{ turnId: string; owner: string | null; expiresMs: number } | undefined> {
    const row = await this.#db
      .selectFrom("chat_leases")
      .select(["turn_id", "owner", "expires_ms"])
      .where("chat_id", "=", chatId)
      .executeTakeFirst();
    return row?.turn_id ? { turnId: row.turn_id, owner: row.owner, expiresMs: Number(row.expires_ms) } : undefined;
  }

  /**
   * Claims up to `limit` turns whose lease expired (their owner died or handed them over): moves each epoch on
   * and makes `owner` the holder until now + leaseMs. On PostgreSQL rows another instance is claiming are skipped
   * (`FOR UPDATE SKIP LOCKED`), so two sweepers never claim the same turn.
   */
  claimExpired(owner: string, leaseMs: number, limit = 5): Promise<(Lease & { cancelRequested: boolean })[]> {
    return inTransaction(this.#db, async (trx, tx) => {
      const now = await this.now(trx);
      let query = trx
        .selectFrom("chat_leases")
        .selectAll()
        .where("turn_id", "is not", null)
        .where("expires_ms", "<", now)
        .orderBy("expires_ms")
        .limit(limit);
      if (tx.dialect === "postgres") query = query.forUpdate().skipLocked();
      const rows = await query.execute();
      const claimed: (Lease & { cancelRequested: boolean })[] = [];
      for (const row of rows) {
        const epoch = Number(row.epoch) + 1;
        await trx
          .updateTable("chat_leases")
          .set({ owner, epoch, expires_ms: now + leaseMs })
          .where("chat_id", "=", row.chat_id)
          .execute();
        let state: unknown = null;
        try {
          state = row.state ? JSON.parse(row.state) : null;
        } catch {
          state = null;
        }
        claimed.push({
          chatId: row.chat_id,
          turnId: row.turn_id!,
          userId: row.user_id ?? "",
          owner,
          epoch,
          // The dead owner may have sent its clients events it had not stored yet: number on past any id it could
          // have used, so a client resuming from one of those misses nothing.
          nextSeq: (await this.#nextSeq(trx, row.chat_id)) + TAKEOVER_SEQ_GAP,
          state,
          cancelRequested: row.cancel_requested === 1,
        });
      }
      return claimed;
    });
  }

  /** Stores events of a turn (fenced), in order. */
  appendEvents(chatId: string, epoch: number, events: StoredTurnEvent[]): Promise<void> {
    if (events.length === 0) return Promise.resolve();
    return inTransaction(this.#db, async (trx) => {
      await this.assertEpoch(trx, chatId, epoch);
      await this.insertEvents(trx, chatId, events);
    });
  }

  /** Inserts events inside a running (already fenced) transaction. */
  async insertEvents(trx: Kysely<any>, chatId: string, events: StoredTurnEvent[]): Promise<void> {
    if (events.length === 0) return;
    const now = nowSql(trx);
    await (trx as Kysely<TurnTables>)
      .insertInto("turn_events")
      .values(
        events.map((e) => ({
          chat_id: chatId,
          seq: e.seq,
          turn_id: e.turnId,
          type: e.type,
          data: e.data,
          created_ms: now,
        })),
      )
      .execute();
  }

  /** The chat's stored events after `afterSeq`, in order (at most `limit`). */
  async eventsAfter(chatId: string, afterSeq: number, limit = 500): Promise<StoredTurnEvent[]> {
    const rows = await this.#db
      .selectFrom("turn_events")
      .select(["seq", "turn_id", "type", "data"])
      .where("chat_id", "=", chatId)
      .where("seq", ">", afterSeq)
      .orderBy("seq")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ seq: Number(r.seq), turnId: r.turn_id, type: r.type, data: r.data }));
  }

  /**
   * The ids of the calls whose `tool_result` event the turn's own loop stored (not its sub-agents'): what its
   * followers were told. A turn resumed elsewhere reports the results it knows that are not among them.
   */
  async reportedResults(chatId: string, turnId: string): Promise<Set<string>> {
    const rows = await this.#db
      .selectFrom("turn_events")
      .select("data")
      .where("chat_id", "=", chatId)
      .where("turn_id", "=", turnId)
      .where("type", "=", "tool_result")
      .execute();
    const ids = new Set<string>();
    for (const row of rows) {
      const event = JSON.parse(row.data) as { id?: unknown; agent?: unknown };
      if (typeof event.id === "string" && event.agent === undefined) ids.add(event.id);
    }
    return ids;
  }

  /** The chat's last stored event seq (0 when none). */
  async lastSeq(chatId: string): Promise<number> {
    return (await this.#nextSeq(this.#db, chatId)) - 1;
  }

  /**
   * Records that a call is about to run (fenced; idempotent per call id). `state`, when given, replaces the takeover
   * state in the same transaction (the step whose calls run): the turn's (`chat_leases.state`) when `entry.turnId`
   * is the lease's turn, else the state row of that journal (a sub-agent's run, see {@link saveJournalState}).
   */
  journalStart(
    chatId: string,
    epoch: number,
    entry: { turnId: string; callId: string; tool: string },
    state?: unknown,
    stateIn: "lease" | "journal" = "lease",
  ): Promise<void> {
    return inTransaction(this.#db, async (trx) => {
      await this.assertEpoch(trx, chatId, epoch);
      if (state !== undefined && stateIn === "journal") {
        await this.putJournalRow(trx, entry.turnId, JOURNAL_STATE_ROW, epoch, state);
      } else if (state !== undefined) {
        await trx
          .updateTable("chat_leases")
          .set({ state: JSON.stringify(state) })
          .where("chat_id", "=", chatId)
          .execute();
      }
      await trx
        .insertInto("tool_journal")
        .values({
          turn_id: entry.turnId,
          call_id: entry.callId,
          tool: entry.tool,
          epoch,
          status: "started",
          result: null,
          started_ms: nowSql(trx),
          ended_ms: null,
        })
        .onConflict((oc) => oc.columns(["turn_id", "call_id"]).doNothing())
        .execute();
    });
  }

  /** Records a call's result (fenced). */
  journalEnd(chatId: string, epoch: number, entry: { turnId: string; callId: string; result: unknown }): Promise<void> {
    return inTransaction(this.#db, async (trx) => {
      await this.assertEpoch(trx, chatId, epoch);
      await trx
        .updateTable("tool_journal")
        .set({ status: "ended", result: JSON.stringify(entry.result), ended_ms: nowSql(trx) })
        .where("turn_id", "=", entry.turnId)
        .where("call_id", "=", entry.callId)
        .execute();
    });
  }

  /**
   * Stores a journal's own row `key` (a state row, or a link such as the agent a call spawned) inside a running,
   * already fenced transaction. Keys start with `#`, so they never collide with a provider's call id.
   */
  async putJournalRow(trx: Kysely<any>, turnId: string, key: string, epoch: number, value: unknown): Promise<void> {
    const result = JSON.stringify(value);
    await (trx as Kysely<TurnTables>)
      .insertInto("tool_journal")
      .values({
        turn_id: turnId,
        call_id: key,
        tool: "",
        epoch,
        status: "ended",
        result,
        started_ms: nowSql(trx),
        ended_ms: nowSql(trx),
      })
      .onConflict((oc) => oc.columns(["turn_id", "call_id"]).doUpdateSet({ result, epoch }))
      .execute();
  }

  /** Stores the takeover state of journal `turnId` (a sub-agent's run) in its state row, fenced by the chat's lease. */
  saveJournalState(chatId: string, epoch: number, turnId: string, state: unknown): Promise<void> {
    return inTransaction(this.#db, async (trx) => {
      await this.assertEpoch(trx, chatId, epoch);
      await this.putJournalRow(trx, turnId, JOURNAL_STATE_ROW, epoch, state);
    });
  }

  /** The value of journal `turnId`'s own row `key` (see putJournalRow), or undefined. */
  async journalRow(turnId: string, key: string): Promise<unknown> {
    const row = await this.#db
      .selectFrom("tool_journal")
      .select("result")
      .where("turn_id", "=", turnId)
      .where("call_id", "=", key)
      .executeTakeFirst();
    if (!row?.result) return undefined;
    try {
      return JSON.parse(row.result);
    } catch {
      return undefined;
    }
  }

  /** The journal of a turn, by call id (its own `#` rows left out). */
  async journal(turnId: string): Promise<Map<string, JournalEntry>> {
    const rows = await this.#db.selectFrom("tool_journal").selectAll().where("turn_id", "=", turnId).execute();
    const entries = new Map<string, JournalEntry>();
    for (const r of rows) {
      if (r.call_id.startsWith("#")) continue;
      let result: unknown = null;
      try {
        result = r.result ? JSON.parse(r.result) : null;
      } catch {
        result = null;
      }
      entries.set(r.call_id, { callId: r.call_id, tool: r.tool, status: r.status as JournalEntry["status"], result });
    }
    return entries;
  }

  /** Removes what a deleted chat left: its lease row and stored events (no turn may be running). */
  async forget(chatId: string): Promise<void> {
    await inTransaction(this.#db, async (trx) => {
      await trx.deleteFrom("turn_events").where("chat_id", "=", chatId).execute();
      await trx.deleteFrom("chat_leases").where("chat_id", "=", chatId).where("turn_id", "is", null).execute();
    });
  }

  /** Removes the journals of runs (an agent tree's, once it ended), fenced by the chat's lease. */
  dropJournals(chatId: string, epoch: number, turnIds: string[]): Promise<void> {
    return inTransaction(this.#db, async (trx) => {
      await this.assertEpoch(trx, chatId, epoch);
      await this.dropJournal(trx, turnIds);
    });
  }

  /** Removes a finished turn's journal (or several: the journals of an agent tree's runs). */
  async dropJournal(trx: Kysely<any>, turnId: string | string[]): Promise<void> {
    const ids = Array.isArray(turnId) ? turnId : [turnId];
    if (ids.length === 0) return;
    await (trx as Kysely<TurnTables>).deleteFrom("tool_journal").where("turn_id", "in", ids).execute();
  }

  /**
   * Stores a signal row and returns it; on PostgreSQL the same transaction NOTIFYs `channel` with the row as JSON
   * (delivered at commit). Rows older than a minute are removed on the way.
   */
  publish(kind: string, target: string, channel: string): Promise<SignalRow> {
    return inTransaction(this.#db, async (trx, tx) => {
      const now = await this.now(trx);
      const row: SignalRow = { id: randomUUID(), kind, target, createdMs: now };
      await trx.insertInto("signals").values({ id: row.id, kind, target, created_ms: now }).execute();
      if (tx.dialect === "postgres") await sql`select pg_notify(${channel}, ${JSON.stringify(row)})`.execute(trx);
      return row;
    });
  }

  /**
   * One page of signals, oldest first, ordered by (created time on the database clock, id): those after `sinceMs`,
   * or, with `afterId`, those after the row (`sinceMs`, `afterId`) — the last row of the previous page, so a caller
   * reads on past any number of signals created in the same millisecond.
   */
  async signalsSince(sinceMs: number, afterId?: string, limit = SIGNAL_PAGE): Promise<SignalRow[]> {
    const rows = await this.#db
      .selectFrom("signals")
      .selectAll()
      .where((eb) =>
        afterId === undefined
          ? eb("created_ms", ">", sinceMs)
          : eb.or([eb("created_ms", ">", sinceMs), eb.and([eb("created_ms", "=", sinceMs), eb("id", ">", afterId)])]),
      )
      .orderBy("created_ms")
      .orderBy("id")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ id: r.id, kind: r.kind, target: r.target, createdMs: Number(r.created_ms) }));
  }

  /** Removes signal rows older than `beforeMs`. */
  async pruneSignals(beforeMs: number): Promise<void> {
    await this.#db.deleteFrom("signals").where("created_ms", "<", beforeMs).execute();
  }
}
