/**
 * The message queues between agents of a tree, inside a transaction the repository opens: queueing a message (a
 * place in the target's queue, the ordered pair's sliding rate window, the send recorded) and taking an agent's
 * unread messages in order.
 */
import { randomUUID } from "node:crypto";
import { type Kysely, sql } from "kysely";
import type { AgentStatus } from "../core/agents.js";
import { AccessDeniedError, LimitExceededError, NotFoundError, quote } from "../core/errors.js";
import {
  type AgentMessageRecord,
  changed,
  type EnqueueLimits,
  now,
  PAIR_RATE_WINDOW_MS,
  RESUMABLE_STATUSES,
} from "./agent-records.js";
import type { DatabaseSchema } from "./database.js";

/** A message to queue (see AgentRepository.enqueue). */
export interface EnqueueInput {
  userId: string;
  rootId: string;
  senderId: string;
  targetId: string;
  body: string;
  limits: EnqueueLimits;
  nowMs?: number;
  /**
   * A woken agent's answer to the messages that woke it: not rate limited (it answers a message that was), and
   * marked so that its reader does not answer it in turn.
   */
  reply?: boolean;
}

/** Queues a message inside `trx` (see AgentRepository.enqueue for the rules and errors). */
export async function enqueueMessage(
  trx: Kysely<DatabaseSchema>,
  input: EnqueueInput,
): Promise<{ messageId: string; queueDepth: number }> {
  const { limits } = input;
  const target = await trx
    .selectFrom("agents")
    .select(["id", "root_id", "status"])
    .where("id", "=", input.targetId)
    .where("user_id", "=", input.userId)
    .executeTakeFirst();
  if (!target || target.root_id !== input.rootId) {
    throw new NotFoundError(
      `No agent ${quote(input.targetId)} in this agent tree. Send only to agents of your own tree (ids from agent_spawn).`,
    );
  }
  const status = target.status as AgentStatus;
  if (status !== "running" && !RESUMABLE_STATUSES.includes(status)) {
    throw new AccessDeniedError(
      `Agent ${target.id} has ended (${status}) and reads no more messages. Spawn a new agent with agent_spawn for the work, giving it what it needs to know.`,
      { argument: "targetAgentId", rule: "agent_ended", status },
    );
  }
  const placed = await trx
    .updateTable("agents")
    .set((eb) => ({ queue_depth: eb("queue_depth", "+", 1), updated_at: now() }))
    .where("id", "=", target.id)
    .where("queue_depth", "<", limits.queueMax)
    .executeTakeFirst();
  if (changed(placed) === 0) {
    throw new LimitExceededError(
      `Cannot send: agent ${target.id} already has ${limits.queueMax} unread messages (MESSAGE_QUEUE_MAX ${limits.queueMax}). Wait until it reads them.`,
      { limit: "MESSAGE_QUEUE_MAX", value: limits.queueMax },
    );
  }
  const nowMs = input.nowMs ?? Date.now();
  if (!input.reply) {
    const since = nowMs - PAIR_RATE_WINDOW_MS;
    await trx
      .deleteFrom("agent_sends")
      .where("sender_id", "=", input.senderId)
      .where("target_id", "=", target.id)
      .where("sent_ms", "<=", since)
      .execute();
    const recent = await trx
      .selectFrom("agent_sends")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("sender_id", "=", input.senderId)
      .where("target_id", "=", target.id)
      .where("sent_ms", ">", since)
      .executeTakeFirstOrThrow();
    if (Number(recent.n) >= limits.pairRatePerMinute) {
      throw new LimitExceededError(
        `Cannot send: ${limits.pairRatePerMinute} messages from ${input.senderId} to ${target.id} in the last minute (AGENT_PAIR_RATE_LIMIT ${limits.pairRatePerMinute} per minute). Wait, or batch what you have to say into one message.`,
        { limit: "AGENT_PAIR_RATE_LIMIT", value: limits.pairRatePerMinute },
      );
    }
    await trx
      .insertInto("agent_sends")
      .values({ sender_id: input.senderId, target_id: target.id, sent_ms: nowMs })
      .execute();
  }
  const messageId = randomUUID();
  // The target's row is locked (its queue count was just taken), so this sequence number is unique and ordered.
  const last = await trx
    .selectFrom("agent_messages")
    .select((eb) => eb.fn.max<number>("seq").as("seq"))
    .where("target_id", "=", target.id)
    .executeTakeFirst();
  await trx
    .insertInto("agent_messages")
    .values({
      seq: Number(last?.seq ?? 0) + 1,
      id: messageId,
      user_id: input.userId,
      root_id: input.rootId,
      sender_id: input.senderId,
      target_id: target.id,
      body: input.body,
      created_at: new Date(nowMs).toISOString(),
      consumed_at: null,
      reply: input.reply ? 1 : 0,
    })
    .execute();
  const depth = await trx
    .selectFrom("agents")
    .select("queue_depth")
    .where("id", "=", target.id)
    .executeTakeFirstOrThrow();
  return { messageId, queueDepth: Number(depth.queue_depth) };
}

/** Takes the agent's unread messages in order inside `trx`, lowering its queue count by as many. */
export async function consumeMessages(trx: Kysely<DatabaseSchema>, targetId: string): Promise<AgentMessageRecord[]> {
  // Lock the target's row first, so two readers of one queue cannot take the same messages.
  await trx.updateTable("agents").set({ updated_at: now() }).where("id", "=", targetId).execute();
  const rows = await trx
    .selectFrom("agent_messages")
    .selectAll()
    .where("target_id", "=", targetId)
    .where("consumed_at", "is", null)
    .orderBy("seq")
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  if (rows.length === 0) return [];
  await trx
    .updateTable("agent_messages")
    .set({ consumed_at: now() })
    .where(
      "id",
      "in",
      rows.map((r) => r.id),
    )
    .execute();
  await trx
    .updateTable("agents")
    .set((eb) => ({
      queue_depth: sql<number>`case when ${eb.ref("queue_depth")} >= ${rows.length} then ${eb.ref("queue_depth")} - ${rows.length} else 0 end`,
    }))
    .where("id", "=", targetId)
    .execute();
  return rows.map((r) => ({
    id: r.id,
    senderId: r.sender_id,
    targetId: r.target_id,
    body: r.body,
    createdAt: r.created_at,
    reply: Number(r.reply) === 1,
  }));
}
