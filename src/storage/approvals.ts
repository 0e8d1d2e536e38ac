/**
 * Pending approvals and the suspended chat turns waiting for them (migration 0006), over Kysely for SQLite and
 * PostgreSQL. Every read-modify-write (deciding, expiring, using an approval; claiming a turn) is one transaction
 * or one conditional UPDATE, so two processes never both decide or both resume.
 */
import { type Kysely, sql } from "kysely";
import type { ApprovalsTable, ApprovalTurnsTable, DatabaseSchema } from "./database.js";
import { isoNowSql } from "./db-clock.js";
import { inTransaction } from "./transaction.js";

/** Where an approval stands. `used`: an allowed one-off approval that has run (it cannot run again). */
export type ApprovalStatus = "pending" | "allowed" | "denied" | "expired" | "cancelled" | "used";

/** How a person answered. */
export type ApprovalAnswerDecision = "allow_once" | "allow_always" | "deny";

/** An approval as the application sees it. */
export interface ApprovalRecord {
  id: string;
  userId: string;
  chatId: string | null;
  turnId: string | null;
  toolCallId: string;
  tool: string;
  argsHash: string;
  preview: string;
  /** The rule that asked, or null when the approval setting did. */
  rule: unknown;
  reason: string;
  /** Patterns an allow_always answer stores as allow rules. */
  candidates: string[];
  /**
   * Why an allow_always answer would not make the same call run without asking next time (an ask rule, the
   * tool's own say, an admin's lock, a doubt a stored rule cannot lift), or null when it would.
   */
  alwaysRefusal?: string | null;
  agentPath: string | null;
  workingDirectory: string | null;
  status: ApprovalStatus;
  decision: ApprovalAnswerDecision | null;
  message: string | null;
  decidedBy: string | null;
  decidedAt: string | null;
  createdAt: string;
  expiresAt: string;
  hmac: string;
}

/** A suspended turn as stored. */
export interface ApprovalTurnRecord {
  id: string;
  chatId: string;
  userId: string;
  state: unknown;
  status: "live" | "resuming" | "done";
  owner: string;
  heartbeatAt: string;
  createdAt: string;
  updatedAt: string;
}

/**
 * The stored agent path: the agent's path text, or (as written by earlier versions) a JSON array of the chat's id
 * followed by the agent ids below the root agent, read as those ids joined with `/`.
 */
function agentPathOf(stored: string | null): string | null {
  if (stored === null || !stored.startsWith("[")) return stored;
  try {
    const ids = JSON.parse(stored) as unknown;
    return Array.isArray(ids) ? ids.slice(1).map(String).join("/") || null : stored;
  } catch {
    return stored;
  }
}

function toRecord(r: ApprovalsTable): ApprovalRecord {
  return {
    id: r.id,
    userId: r.user_id,
    chatId: r.chat_id,
    turnId: r.turn_id,
    toolCallId: r.tool_call_id,
    tool: r.tool,
    argsHash: r.args_hash,
    preview: r.preview,
    rule: r.rule === null ? null : JSON.parse(r.rule),
    reason: r.reason,
    candidates: JSON.parse(r.candidates),
    alwaysRefusal: r.always_refusal ?? null,
    agentPath: agentPathOf(r.agent_path),
    workingDirectory: r.working_directory,
    status: r.status as ApprovalStatus,
    decision: r.decision as ApprovalAnswerDecision | null,
    message: r.message,
    decidedBy: r.decided_by,
    decidedAt: r.decided_at,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    hmac: r.hmac,
  };
}

function toTurn(r: ApprovalTurnsTable): ApprovalTurnRecord {
  return {
    id: r.id,
    chatId: r.chat_id,
    userId: r.user_id,
    state: JSON.parse(r.state),
    status: r.status as ApprovalTurnRecord["status"],
    owner: r.owner,
    heartbeatAt: r.heartbeat_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The outcome of trying to decide an approval. */
export type DecideResult =
  | { ok: true; record: ApprovalRecord }
  | { ok: false; reason: "not_found" | "decided" | "expired"; record?: ApprovalRecord };

/** Approvals and suspended turns in the database. */
export class ApprovalRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /**
   * Stores a new pending approval, unless its user already has `maxPending` pending ones that have not expired: then
   * stores nothing and returns false. Count and insert are one transaction, serialized per user (PostgreSQL: a
   * transaction-scoped advisory lock; SQLite: `BEGIN IMMEDIATE`), so concurrent asks on any instance never pass it.
   */
  async create(record: ApprovalRecord, maxPending = Number.POSITIVE_INFINITY): Promise<boolean> {
    return inTransaction(this.db, async (trx, tx) => {
      if (tx.dialect === "postgres") {
        await sql`SELECT pg_advisory_xact_lock(hashtext(${`toolhost.approvals:${record.userId}`}))`.execute(trx);
      }
      if (Number.isFinite(maxPending)) {
        const { n } = await trx
          .selectFrom("approvals")
          .select((eb) => eb.fn.countAll<string | number>().as("n"))
          .where("user_id", "=", record.userId)
          .where("status", "=", "pending")
          .where("expires_at", ">", record.createdAt)
          .executeTakeFirstOrThrow();
        if (Number(n) >= maxPending) return false;
      }
      await this.#insert(trx, record);
      return true;
    });
  }

  async #insert(db: Kysely<DatabaseSchema>, record: ApprovalRecord): Promise<void> {
    await db
      .insertInto("approvals")
      .values({
        id: record.id,
        user_id: record.userId,
        chat_id: record.chatId,
        turn_id: record.turnId,
        tool_call_id: record.toolCallId,
        tool: record.tool,
        args_hash: record.argsHash,
        preview: record.preview,
        rule: record.rule === null || record.rule === undefined ? null : JSON.stringify(record.rule),
        reason: record.reason,
        candidates: JSON.stringify(record.candidates),
        always_refusal: record.alwaysRefusal ?? null,
        agent_path: record.agentPath,
        working_directory: record.workingDirectory,
        status: record.status,
        decision: record.decision,
        message: record.message,
        decided_by: record.decidedBy,
        decided_at: record.decidedAt,
        created_at: record.createdAt,
        expires_at: record.expiresAt,
        hmac: record.hmac,
      })
      .execute();
  }

  /** The approval with that id (any user), or undefined. */
  async get(id: string): Promise<ApprovalRecord | undefined> {
    const row = await this.db.selectFrom("approvals").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /**
   * The newest approval asked for a tool call of a turn (or chat), or undefined. `chatId: null` means outside any
   * chat (absent: any chat); `tool` and `argsHash` narrow to the asks of that tool with exactly those arguments (a
   * provider may reuse a call id for different calls).
   */
  async findForCall(
    toolCallId: string,
    scope: { turnId?: string | null; chatId?: string | null; userId?: string; tool?: string; argsHash?: string },
  ): Promise<ApprovalRecord | undefined> {
    let query = this.db.selectFrom("approvals").selectAll().where("tool_call_id", "=", toolCallId);
    // Call ids come from model providers: two users' calls may share one.
    if (scope.userId !== undefined) query = query.where("user_id", "=", scope.userId);
    if (scope.turnId) query = query.where("turn_id", "=", scope.turnId);
    else if (scope.chatId === null) query = query.where("chat_id", "is", null);
    else if (scope.chatId !== undefined) query = query.where("chat_id", "=", scope.chatId);
    if (scope.tool !== undefined) query = query.where("tool", "=", scope.tool);
    if (scope.argsHash !== undefined) query = query.where("args_hash", "=", scope.argsHash);
    const row = await query.orderBy("created_at", "desc").executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /** A user's pending approvals, oldest first; `chatId` narrows to one chat. */
  async listPending(userId: string, chatId?: string): Promise<ApprovalRecord[]> {
    let query = this.db
      .selectFrom("approvals")
      .selectAll()
      .where("user_id", "=", userId)
      .where("status", "=", "pending");
    if (chatId !== undefined) query = query.where("chat_id", "=", chatId);
    const rows = await query.orderBy("created_at").execute();
    return rows.map(toRecord);
  }

  /**
   * Decides a pending approval in one transaction: not found, already decided, or expired (then marked expired)
   * are refused. `status` is the new status (allowed or denied).
   */
  async decide(
    id: string,
    answer: {
      status: "allowed" | "denied";
      decision: ApprovalAnswerDecision;
      message: string | null;
      decidedBy: string;
    },
    at: Date,
  ): Promise<DecideResult> {
    return inTransaction(this.db, async (trx, tx) => {
      const row = await tx.forUpdate(trx.selectFrom("approvals").selectAll().where("id", "=", id)).executeTakeFirst();
      if (!row) return { ok: false, reason: "not_found" } as const;
      if (row.status !== "pending") return { ok: false, reason: "decided", record: toRecord(row) } as const;
      if (Date.parse(row.expires_at) <= at.getTime()) {
        await trx.updateTable("approvals").set({ status: "expired" }).where("id", "=", id).execute();
        return { ok: false, reason: "expired", record: { ...toRecord(row), status: "expired" } } as const;
      }
      const decidedAt = at.toISOString();
      const updated = await trx
        .updateTable("approvals")
        .set({
          status: answer.status,
          decision: answer.decision,
          message: answer.message,
          decided_by: answer.decidedBy,
          decided_at: decidedAt,
        })
        .where("id", "=", id)
        .where("status", "=", "pending")
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) return { ok: false, reason: "decided", record: toRecord(row) } as const;
      return {
        ok: true,
        record: {
          ...toRecord(row),
          status: answer.status,
          decision: answer.decision,
          message: answer.message,
          decidedBy: answer.decidedBy,
          decidedAt,
        },
      } as const;
    });
  }

  /** Moves a pending approval whose time is up to expired; returns whether this call did it. */
  async expire(id: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable("approvals")
      .set({ status: "expired", decided_at: at.toISOString(), decided_by: "timeout" })
      .where("id", "=", id)
      .where("status", "=", "pending")
      .where("expires_at", "<=", at.toISOString())
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Cancels a pending approval (its turn was cancelled); returns whether it was pending. */
  async cancel(id: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable("approvals")
      .set({ status: "cancelled", decided_at: at.toISOString(), decided_by: "cancelled" })
      .where("id", "=", id)
      .where("status", "=", "pending")
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Marks an allowed approval used, exactly once: true for the one caller that did it. */
  async use(id: string): Promise<boolean> {
    const result = await this.db
      .updateTable("approvals")
      .set({ status: "used" })
      .where("id", "=", id)
      .where("status", "=", "allowed")
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Pending approvals whose time is up (any user), oldest first, at most `limit`. */
  async overdue(at: Date, limit = 100): Promise<ApprovalRecord[]> {
    const rows = await this.db
      .selectFrom("approvals")
      .selectAll()
      .where("status", "=", "pending")
      .where("expires_at", "<=", at.toISOString())
      .orderBy("expires_at")
      .limit(limit)
      .execute();
    return rows.map(toRecord);
  }

  /**
   * Stores (or replaces) a suspended turn, owned by `owner`. Its heartbeat, like every heartbeat here, is the
   * database's clock: processes whose clocks disagree still agree on whether its owner went quiet.
   */
  async saveTurn(
    turn: { id: string; chatId: string; userId: string; state: unknown; owner: string },
    at: Date,
  ): Promise<void> {
    const stamp = at.toISOString();
    const state = JSON.stringify(turn.state);
    await this.db
      .insertInto("approval_turns")
      .values({
        id: turn.id,
        chat_id: turn.chatId,
        user_id: turn.userId,
        state,
        status: "live",
        owner: turn.owner,
        heartbeat_at: isoNowSql(this.db),
        created_at: stamp,
        updated_at: stamp,
      })
      .onConflict((oc) =>
        oc.column("id").doUpdateSet({ state, updated_at: stamp, heartbeat_at: isoNowSql(this.db), owner: turn.owner }),
      )
      .execute();
  }

  /** Updates a turn's state with `update` in one transaction (no-op when the turn is gone). */
  async updateTurnState(id: string, update: (state: any) => unknown, at: Date): Promise<void> {
    await inTransaction(this.db, async (trx, tx) => {
      const row = await tx
        .forUpdate(trx.selectFrom("approval_turns").select("state").where("id", "=", id))
        .executeTakeFirst();
      if (!row) return;
      const next = update(JSON.parse(row.state));
      await trx
        .updateTable("approval_turns")
        .set({ state: JSON.stringify(next), updated_at: at.toISOString() })
        .where("id", "=", id)
        .execute();
    });
  }

  /** Shows the owner is alive (on the database's clock). */
  async heartbeat(id: string, owner: string): Promise<void> {
    await this.db
      .updateTable("approval_turns")
      .set({ heartbeat_at: isoNowSql(this.db) })
      .where("id", "=", id)
      .where("owner", "=", owner)
      .execute();
  }

  /**
   * Lets go of a turn whose process stops waiting (its client left, or the server stops) while its asks stay
   * pending: its heartbeat is set to the epoch, so whoever sees an answer first claims it at once, without waiting
   * for the stale timeout. Only the current owner can release it.
   */
  async releaseTurn(id: string, owner: string): Promise<void> {
    await this.db
      .updateTable("approval_turns")
      .set({ heartbeat_at: new Date(0).toISOString(), status: "live" })
      .where("id", "=", id)
      .where("owner", "=", owner)
      .execute();
  }

  /** The turn, or undefined. */
  async getTurn(id: string): Promise<ApprovalTurnRecord | undefined> {
    const row = await this.db.selectFrom("approval_turns").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toTurn(row) : undefined;
  }

  /**
   * Claims a turn for `owner` to resume, when its owner has shown no sign of life for `staleForMs` on the database's
   * clock, or is still `goneOwner` (a process known to be gone: whatever its last heartbeat), or `owner` already
   * holds it. Returns the claimed turn, or undefined when another process holds it or it is done.
   */
  async claimTurn(
    id: string,
    owner: string,
    staleForMs: number,
    goneOwner?: string,
  ): Promise<ApprovalTurnRecord | undefined> {
    const result = await this.db
      .updateTable("approval_turns")
      .set({ owner, status: "resuming", heartbeat_at: isoNowSql(this.db) })
      .where("id", "=", id)
      .where("status", "!=", "done")
      .where((eb) =>
        eb.or([
          eb("heartbeat_at", "<", isoNowSql(this.db, staleForMs)),
          eb("owner", "=", owner),
          ...(goneOwner === undefined ? [] : [eb("owner", "=", goneOwner)]),
        ]),
      )
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) return undefined;
    return this.getTurn(id);
  }

  /** Turns whose owner has shown no sign of life for `staleForMs` on the database's clock (candidates to resume). */
  async staleTurns(staleForMs: number, limit = 50): Promise<ApprovalTurnRecord[]> {
    const rows = await this.db
      .selectFrom("approval_turns")
      .selectAll()
      .where("status", "!=", "done")
      .where("heartbeat_at", "<", isoNowSql(this.db, staleForMs))
      .orderBy("heartbeat_at")
      .limit(limit)
      .execute();
    return rows.map(toTurn);
  }

  /** The chat's suspended turn not yet done, or undefined. */
  async activeTurn(chatId: string): Promise<ApprovalTurnRecord | undefined> {
    const row = await this.db
      .selectFrom("approval_turns")
      .selectAll()
      .where("chat_id", "=", chatId)
      .where("status", "!=", "done")
      .orderBy("created_at", "desc")
      .executeTakeFirst();
    return row ? toTurn(row) : undefined;
  }

  /** Removes a finished turn; `within`, a running transaction's `trx`, removes it in that transaction. */
  async deleteTurn(id: string, within?: Kysely<any>): Promise<void> {
    await ((within as Kysely<DatabaseSchema> | undefined) ?? this.db)
      .deleteFrom("approval_turns")
      .where("id", "=", id)
      .execute();
  }
}
