/**
 * Agent trees in the database: agents with their lineage and counters, the message queues between them, and the
 * sliding window of the pair rate limit. Every check-and-reserve is one transaction with the counters updated by
 * conditional statements (`… SET n = n + 1 WHERE id = ? AND n < cap`), which lock the row they change on
 * PostgreSQL and serialize writers on SQLite, so limits hold under concurrent spawns and across server instances
 * sharing one database.
 */
import { randomUUID } from "node:crypto";
import { type Kysely, sql, type Transaction } from "kysely";
import type { AgentStatus, AgentUsage } from "../core/agents.js";
import { AccessDeniedError, LimitExceededError, NotFoundError } from "../core/errors.js";
import { consumeMessages, type EnqueueInput, enqueueMessage } from "./agent-mail.js";
import {
  type AgentMessageRecord,
  type AgentRecord,
  changed,
  NEW_RUN,
  now,
  RESUMABLE_STATUSES,
  type ReserveLimits,
  toRecord,
} from "./agent-records.js";
import type { AgentsTable, DatabaseSchema } from "./database.js";
import { isoNowSql } from "./db-clock.js";
import { inTransaction } from "./transaction.js";

type Db = Kysely<DatabaseSchema> | Transaction<DatabaseSchema>;

/**
 * A check run first inside a write's transaction: it throws (StaleLeaseError) when the writer no longer owns the
 * agent's tree — the chat turn's lease moved on to another instance — so a stale owner's write does not land.
 */
export type WriteFence = (trx: Kysely<any>) => Promise<void>;

/**
 * A new agent's row: its place in its tree and its limits (`fields`); who runs it on which model for what task, and
 * on which instance (`input`); and what every new agent starts with (NEW_RUN: running, no usage, counters at zero),
 * its heartbeat, creation and update times now, not finished.
 */
function newAgentRow(
  input: { userId: string; provider: string | null; model: string | null; task: string; instanceId: string },
  fields: Pick<
    AgentsTable,
    "id" | "chat_id" | "kind" | "root_id" | "parent_id" | "depth" | "path" | "template" | "max_turns" | "time_ms"
  >,
): AgentsTable {
  const at = now();
  return {
    ...fields,
    user_id: input.userId,
    provider: input.provider,
    model: input.model,
    ...NEW_RUN,
    task: input.task,
    instance_id: input.instanceId,
    heartbeat_at: at,
    created_at: at,
    updated_at: at,
    finished_at: null,
  };
}

/**
 * The columns that record an agent's progress: its latest answer, its conversation (as JSON) and the usage given
 * (turns, tool calls, duration in whole ms), each only when given, and `updated_at` = `at`.
 */
function progressColumns(
  fields: { result?: string | null; transcript?: unknown[]; usage?: Partial<AgentUsage> },
  at: string,
): Partial<AgentsTable> {
  const set: Partial<AgentsTable> = { updated_at: at };
  if (fields.result !== undefined) set.result = fields.result;
  if (fields.transcript !== undefined) set.transcript = JSON.stringify(fields.transcript);
  const u = fields.usage;
  if (u?.turns !== undefined) set.turns = u.turns;
  if (u?.toolCalls !== undefined) set.tool_calls = u.toolCalls;
  if (u?.durationMs !== undefined) set.duration_ms = Math.round(u.durationMs);
  return set;
}

/** The counters of an agent row that a reserve takes one of, each up to its cap. */
type AgentCounter = "children_count" | "tree_count" | "active_count";

/**
 * Takes one of agent `id`'s `counter` in one conditional statement (`SET n = n + 1 WHERE id = ? AND n < cap`):
 * true when taken, false (nothing changed) when the counter is at `cap` or there is no such agent.
 */
async function takeOne(trx: Db, id: string, counter: AgentCounter, cap: number): Promise<boolean> {
  const taken = await trx
    .updateTable("agents")
    .set((eb) => ({ [counter]: eb(counter, "+", 1) }))
    .where("id", "=", id)
    .where(counter, "<", cap)
    .executeTakeFirst();
  return changed(taken) > 0;
}

/** Agents, their queues and the pair rate window. Every read is scoped by user id. */
export class AgentRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /**
   * Runs `fn` as one transaction through the shared helper (SQLite `BEGIN IMMEDIATE` with busy retries,
   * PostgreSQL with retried deadlocks); `fn` uses only `trx` and may run more than once.
   */
  #tx<T>(fn: (trx: Kysely<DatabaseSchema>) => Promise<T>): Promise<T> {
    return inTransaction(this.db, (trx) => fn(trx));
  }

  /** Creates the root agent of a new tree (a chat turn), running. */
  async createRoot(input: {
    userId: string;
    chatId: string | null;
    provider: string | null;
    model: string | null;
    task: string;
    instanceId: string;
  }): Promise<AgentRecord> {
    const id = randomUUID();
    const row = newAgentRow(input, {
      id,
      chat_id: input.chatId,
      kind: "root",
      root_id: id,
      parent_id: null,
      depth: 0,
      path: id,
      template: "chat",
      max_turns: 0,
      time_ms: 0,
    });
    await this.db
      .insertInto("agents")
      .values({ ...row, heartbeat_at: isoNowSql(this.db) })
      .execute();
    return toRecord(row);
  }

  /**
   * Reserves a child of `parentId` in one transaction: checks the depth from the parent's stored lineage, then
   * takes one unit of the parent's quota, of the tree's cap and of the tree's running slots, checks the tree's token
   * budget, and inserts the child as running. Throws LimitExceededError naming the limit and its value (nothing is
   * reserved then), NotFoundError for an unknown parent, AccessDeniedError when the parent is not running.
   */
  async reserveChild(input: {
    userId: string;
    parentId: string;
    template: string;
    task: string;
    provider: string | null;
    model: string | null;
    maxTurns: number;
    timeMs: number;
    instanceId: string;
    limits: ReserveLimits;
    /** Runs last in the same transaction (fence and journal link of a durable tree); its throw reserves nothing. */
    inTransaction?: (trx: Kysely<any>, child: AgentRecord) => Promise<void>;
  }): Promise<AgentRecord> {
    const { limits } = input;
    return this.#tx(async (trx) => {
      const parent = await trx
        .selectFrom("agents")
        .selectAll()
        .where("id", "=", input.parentId)
        .where("user_id", "=", input.userId)
        .executeTakeFirst();
      if (!parent) throw new NotFoundError(`No agent "${input.parentId}" for this user.`);
      if (parent.status !== "running") {
        throw new AccessDeniedError(`Agent ${parent.id} is not running (${parent.status}); it cannot spawn agents.`);
      }
      const depth = Number(parent.depth) + 1;
      if (depth > limits.maxDepth) {
        throw new LimitExceededError(
          `Cannot spawn: this agent is at depth ${parent.depth} and MAX_AGENT_DEPTH is ${limits.maxDepth}. Do the work yourself.`,
          { limit: "MAX_AGENT_DEPTH", value: limits.maxDepth },
        );
      }
      if (!(await takeOne(trx, parent.id, "children_count", limits.maxSubAgents))) {
        throw new LimitExceededError(
          `Cannot spawn: this agent already spawned ${limits.maxSubAgents} sub-agents (DEFAULT_MAX_SUB_AGENTS ${limits.maxSubAgents}). Reuse one with agent_send or do the work yourself.`,
          { limit: "DEFAULT_MAX_SUB_AGENTS", value: limits.maxSubAgents },
        );
      }
      if (!(await takeOne(trx, parent.root_id, "tree_count", limits.maxTreeAgents))) {
        throw new LimitExceededError(
          `Cannot spawn: this agent tree already holds ${limits.maxTreeAgents} sub-agents (MAX_TREE_AGENTS ${limits.maxTreeAgents}). Reuse one with agent_send, or do the work yourself.`,
          { limit: "MAX_TREE_AGENTS", value: limits.maxTreeAgents },
        );
      }
      if (!(await takeOne(trx, parent.root_id, "active_count", limits.maxConcurrent))) {
        throw new LimitExceededError(
          `Cannot spawn: ${limits.maxConcurrent} agents of this tree are already running (MAX_CONCURRENT_AGENTS ${limits.maxConcurrent}). Wait for one with agent_wait, or close one with agent_close, then retry.`,
          { limit: "MAX_CONCURRENT_AGENTS", value: limits.maxConcurrent },
        );
      }
      const root = await trx
        .selectFrom("agents")
        .select(["tree_tokens"])
        .where("id", "=", parent.root_id)
        .executeTakeFirstOrThrow();
      if (Number(root.tree_tokens) >= limits.tokenBudget) {
        throw new LimitExceededError(
          `Cannot spawn: this agent tree used ${Number(root.tree_tokens)} tokens of its budget of ${limits.tokenBudget} (TREE_TOKEN_BUDGET). Finish the work yourself with what you have; a new chat turn starts a new budget.`,
          { limit: "TREE_TOKEN_BUDGET", value: limits.tokenBudget },
        );
      }
      const id = randomUUID();
      const row = newAgentRow(input, {
        id,
        chat_id: parent.chat_id,
        kind: "child",
        root_id: parent.root_id,
        parent_id: parent.id,
        depth,
        path: `${parent.path}/${id}`,
        template: input.template,
        max_turns: input.maxTurns,
        time_ms: input.timeMs,
      });
      await trx
        .insertInto("agents")
        .values({ ...row, heartbeat_at: isoNowSql(trx) })
        .execute();
      const record = toRecord(row);
      await input.inTransaction?.(trx, record);
      return record;
    });
  }

  /** The running root agent of the chat's turn (the turn an instance is taking over), or undefined. */
  async runningRoot(chatId: string): Promise<AgentRecord | undefined> {
    const row = await this.db
      .selectFrom("agents")
      .selectAll()
      .where("chat_id", "=", chatId)
      .where("kind", "=", "root")
      .where("status", "=", "running")
      .orderBy("created_at", "desc")
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /**
   * Takes the running agents of a tree over for `instanceId` (its new owner), fenced: they stay running and now
   * name this instance as their owner. Returns them, root first, then by depth and age (parents before children).
   */
  async adopt(rootId: string, instanceId: string, fence: WriteFence): Promise<AgentRecord[]> {
    return this.#tx(async (trx) => {
      await fence(trx);
      await trx
        .updateTable("agents")
        .set({ instance_id: instanceId, heartbeat_at: isoNowSql(trx) })
        .where("root_id", "=", rootId)
        .where("status", "=", "running")
        .execute();
      const rows = await trx
        .selectFrom("agents")
        .selectAll()
        .where("root_id", "=", rootId)
        .where("status", "=", "running")
        .orderBy("depth")
        .orderBy("created_at")
        .execute();
      return rows.map(toRecord);
    });
  }

  /** The ids of every agent of a tree. */
  async treeIds(rootId: string): Promise<string[]> {
    const rows = await this.db.selectFrom("agents").select("id").where("root_id", "=", rootId).execute();
    return rows.map((r) => r.id);
  }

  /** The user's agent, or undefined (also for another user's agent). */
  async get(userId: string, id: string): Promise<AgentRecord | undefined> {
    const r = await this.db
      .selectFrom("agents")
      .selectAll()
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .executeTakeFirst();
    return r ? toRecord(r) : undefined;
  }

  /** The agent's stored conversation (provider-neutral messages). */
  async transcript(userId: string, id: string): Promise<unknown[]> {
    const r = await this.db
      .selectFrom("agents")
      .select("transcript")
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .executeTakeFirst();
    if (!r) return [];
    try {
      const value = JSON.parse(r.transcript);
      return Array.isArray(value) ? value : [];
    } catch {
      return [];
    }
  }

  /** The user's sub-agents, newest first; filtered by chat, tree or parent; `limit` 1–1000 (default 100). */
  async list(
    userId: string,
    filter: { chatId?: string; rootId?: string; parentId?: string; limit?: number } = {},
  ): Promise<AgentRecord[]> {
    let query = this.db
      .selectFrom("agents")
      .selectAll()
      .where("user_id", "=", userId)
      .where("kind", "=", "child")
      .orderBy("created_at", "desc")
      .orderBy("id");
    if (filter.chatId) query = query.where("chat_id", "=", filter.chatId);
    if (filter.rootId) query = query.where("root_id", "=", filter.rootId);
    if (filter.parentId) query = query.where("parent_id", "=", filter.parentId);
    const rows = await query.limit(Math.min(1000, Math.max(1, filter.limit ?? 100))).execute();
    return rows.map(toRecord);
  }

  /** The agent and all its descendants (by stored path), of this user. */
  async subtree(userId: string, agent: Pick<AgentRecord, "rootId" | "path">): Promise<AgentRecord[]> {
    const rows = await this.db
      .selectFrom("agents")
      .selectAll()
      .where("user_id", "=", userId)
      .where("root_id", "=", agent.rootId)
      .where((eb) => eb.or([eb("path", "=", agent.path), eb("path", "like", `${agent.path}/%`)]))
      .execute();
    return rows.map(toRecord);
  }

  /** Records progress of a running agent: its latest answer, conversation and usage so far. */
  async saveProgress(
    id: string,
    fields: { result?: string | null; transcript?: unknown[]; usage?: Partial<AgentUsage> },
    fence?: WriteFence,
  ): Promise<void> {
    const set = progressColumns(fields, now());
    if (!fence) {
      await this.db.updateTable("agents").set(set).where("id", "=", id).execute();
      return;
    }
    await this.#tx(async (trx) => {
      await fence(trx);
      await trx.updateTable("agents").set(set).where("id", "=", id).execute();
    });
  }

  /**
   * Adds tokens to an agent and to its tree in one transaction; returns the tree's new total. The root's own
   * tokens count towards the tree too.
   */
  async addTokens(id: string, rootId: string, inputTokens: number, outputTokens: number): Promise<number> {
    const total = Math.max(0, Math.round(inputTokens)) + Math.max(0, Math.round(outputTokens));
    return this.#tx(async (trx) => {
      await trx
        .updateTable("agents")
        .set((eb) => ({
          input_tokens: eb("input_tokens", "+", Math.max(0, Math.round(inputTokens))),
          output_tokens: eb("output_tokens", "+", Math.max(0, Math.round(outputTokens))),
        }))
        .where("id", "=", id)
        .execute();
      await trx
        .updateTable("agents")
        .set((eb) => ({ tree_tokens: eb("tree_tokens", "+", total) }))
        .where("id", "=", rootId)
        .execute();
      const root = await trx.selectFrom("agents").select("tree_tokens").where("id", "=", rootId).executeTakeFirst();
      return Number(root?.tree_tokens ?? 0);
    });
  }

  /**
   * Ends a run: sets the final status (only when the agent is still `running`, so a run is finished once) and frees
   * its running slot in the tree in the same transaction. Result, note, conversation and usage are written in
   * every case, so a cut-off run keeps what it produced. Returns whether this call finished the run. With `fence`,
   * nothing is written when it throws (the run moved to another instance), and the throw propagates.
   */
  async finish(
    id: string,
    status: Exclude<AgentStatus, "running">,
    fields: { result?: string | null; note?: string | null; transcript?: unknown[]; usage?: Partial<AgentUsage> } = {},
    fence?: WriteFence,
  ): Promise<boolean> {
    return this.#tx(async (trx) => {
      await fence?.(trx);
      return this.#finishIn(trx, id, status, fields);
    });
  }

  async #finishIn(
    trx: Db,
    id: string,
    status: Exclude<AgentStatus, "running">,
    fields: { result?: string | null; note?: string | null; transcript?: unknown[]; usage?: Partial<AgentUsage> },
  ): Promise<boolean> {
    const at = now();
    const set = progressColumns(fields, at);
    const transition = await trx
      .updateTable("agents")
      .set({ ...set, status, finished_at: at, ...(fields.note !== undefined ? { note: fields.note } : {}) })
      .where("id", "=", id)
      .where("status", "=", "running")
      .executeTakeFirst();
    if (changed(transition) === 0) {
      await trx.updateTable("agents").set(set).where("id", "=", id).execute();
      return false;
    }
    const row = await trx.selectFrom("agents").select(["kind", "root_id"]).where("id", "=", id).executeTakeFirst();
    if (row?.kind === "child") {
      await trx
        .updateTable("agents")
        .set((eb) => ({ active_count: eb("active_count", "-", 1) }))
        .where("id", "=", row.root_id)
        .where("active_count", ">", 0)
        .execute();
    }
    return true;
  }

  /**
   * Starts a new run of an idle agent (its last run completed or hit a turn or time limit), taking a running slot
   * of its tree, in one transaction. Returns false (nothing changed) when the agent is not idle, the tree has no
   * free slot, or the tree has used its token budget (a woken run is a model call like a spawned one).
   */
  async resume(
    id: string,
    limits: Pick<ReserveLimits, "maxConcurrent" | "tokenBudget">,
    instanceId: string,
  ): Promise<boolean> {
    const noSlot = Symbol("no slot");
    try {
      return await this.#tx(async (trx) => {
        const woke = await trx
          .updateTable("agents")
          .set({
            status: "running",
            note: null,
            finished_at: null,
            instance_id: instanceId,
            heartbeat_at: isoNowSql(trx),
          })
          .where("id", "=", id)
          .where("status", "in", RESUMABLE_STATUSES as AgentStatus[])
          .executeTakeFirst();
        if (changed(woke) === 0) return false;
        const row = await trx.selectFrom("agents").select("root_id").where("id", "=", id).executeTakeFirstOrThrow();
        if (!(await takeOne(trx, row.root_id, "active_count", limits.maxConcurrent))) throw noSlot;
        const root = await trx
          .selectFrom("agents")
          .select("tree_tokens")
          .where("id", "=", row.root_id)
          .executeTakeFirstOrThrow();
        if (Number(root.tree_tokens) >= limits.tokenBudget) throw noSlot;
        return true;
      });
    } catch (error) {
      if (error === noSlot) return false;
      throw error;
    }
  }

  /**
   * Queues a message in one transaction: takes one place in the target's queue (refused at `queueMax`), checks the
   * ordered pair's sliding window of the last minute (refused at `pairRatePerMinute`), and records the send. Sends
   * to one target serialize on the target's row, so the window holds across server instances. Throws
   * LimitExceededError naming the limit, NotFoundError when the target is not this user's agent of the same tree,
   * AccessDeniedError when the target's run ended for good (cancelled, error, interrupted, budget_exhausted: it
   * would never read the message).
   */
  enqueue(input: EnqueueInput): Promise<{ messageId: string; queueDepth: number }> {
    return this.#tx((trx) => enqueueMessage(trx, input));
  }

  /**
   * Takes the agent's unread messages in order and marks them read, lowering its queue count by as many, in one
   * transaction.
   */
  consume(targetId: string): Promise<AgentMessageRecord[]> {
    return this.#tx((trx) => consumeMessages(trx, targetId));
  }

  /** Agents with unread messages in the tree whose last run is over and may be resumed (to wake on a free slot). */
  async idleWithMail(rootId: string): Promise<AgentRecord[]> {
    const rows = await this.db
      .selectFrom("agents")
      .selectAll()
      .where("root_id", "=", rootId)
      .where("kind", "=", "child")
      .where("queue_depth", ">", 0)
      .where("status", "in", RESUMABLE_STATUSES as AgentStatus[])
      .execute();
    return rows.map(toRecord);
  }

  /** The instances that have running agents. */
  async runningInstances(): Promise<string[]> {
    const rows = await this.db
      .selectFrom("agents")
      .select("instance_id")
      .distinct()
      .where("status", "=", "running")
      .where("instance_id", "is not", null)
      .execute();
    return rows.map((r) => r.instance_id).filter((id): id is string => id !== null);
  }

  /** Tells the others that this instance's running agents are alive. */
  async heartbeat(instanceId: string): Promise<void> {
    await this.db
      .updateTable("agents")
      .set({ heartbeat_at: isoNowSql(this.db) })
      .where("instance_id", "=", instanceId)
      .where("status", "=", "running")
      .execute();
  }

  /**
   * Marks `interrupted` every running agent whose instance stopped: those of `instanceId` when given (a clean
   * shutdown), else those not of `exceptInstance` whose heartbeat is more than `staleForMs` old on the database's
   * clock (a crash; the instances' own clocks need not agree). Partial
   * results stay. Agents of a chat whose turn still holds its lease are left alone: they move with that turn to the
   * instance that takes it over (a handover, or an expired lease). Returns the ids marked.
   */
  async interrupt(options: { instanceId?: string; exceptInstance?: string; staleForMs?: number }): Promise<string[]> {
    let query = this.db
      .selectFrom("agents")
      .select("id")
      .where("status", "=", "running")
      .where(
        sql<boolean>`not exists (select 1 from chat_leases l where l.chat_id = agents.chat_id and l.turn_id is not null)`,
      );
    if (options.instanceId) query = query.where("instance_id", "=", options.instanceId);
    if (options.exceptInstance) {
      const except = options.exceptInstance;
      query = query.where((eb) => eb.or([eb("instance_id", "is", null), eb("instance_id", "!=", except)]));
    }
    if (options.staleForMs !== undefined) {
      const before = isoNowSql(this.db, options.staleForMs);
      query = query.where((eb) => eb.or([eb("heartbeat_at", "is", null), eb("heartbeat_at", "<", before)]));
    }
    const rows = await query.execute();
    const marked: string[] = [];
    for (const row of rows) {
      const note = "The server stopped while this agent was running; its result is what it produced until then.";
      if (await this.finish(row.id, "interrupted", { note })) marked.push(row.id);
    }
    return marked;
  }

  /** Running agents of this instance whose stored status is no longer running (cancelled through another instance). */
  async stoppedElsewhere(ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .selectFrom("agents")
      .select("id")
      .where("id", "in", ids)
      .where("status", "!=", "running")
      .execute();
    return rows.map((r) => r.id);
  }
}
