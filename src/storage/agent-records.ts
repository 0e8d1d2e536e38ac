/**
 * Agent records as the application sees them (rows of `agents` and `agent_messages` mapped to camelCase, with their
 * usage and limits), and the constants of the agent tables: the statuses a run may resume from, the pair rate
 * window, and two small row helpers. The queries live in agent-repository.ts (queues: agent-mail.ts).
 */
import type { AgentStatus, AgentUsage } from "../core/agents.js";
import type { AgentsTable } from "./database.js";

/** An agent as the application sees it. */
export interface AgentRecord {
  id: string;
  userId: string;
  chatId: string | null;
  kind: "root" | "child";
  rootId: string;
  parentId: string | null;
  depth: number;
  /** Ids from the root down to this agent, joined by "/". */
  path: string;
  template: string;
  provider: string | null;
  model: string | null;
  status: AgentStatus;
  task: string;
  result: string | null;
  note: string | null;
  usage: AgentUsage;
  childrenCount: number;
  queueDepth: number;
  maxTurns: number;
  timeMs: number;
  instanceId: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

/** A queued message between two agents. */
export interface AgentMessageRecord {
  id: string;
  senderId: string;
  targetId: string;
  body: string;
  createdAt: string;
  /** A woken agent's answer to the messages that woke it: its reader does not answer it back. */
  reply: boolean;
}

/** Limits checked when a child is reserved (already clamped by the caller). */
export interface ReserveLimits {
  maxDepth: number;
  maxSubAgents: number;
  maxTreeAgents: number;
  maxConcurrent: number;
  tokenBudget: number;
}

/** Limits checked when a message is queued. */
export interface EnqueueLimits {
  queueMax: number;
  pairRatePerMinute: number;
}

/** The statuses from which a message may start a new run of an idle agent. */
export const RESUMABLE_STATUSES: readonly AgentStatus[] = ["completed", "max_turns", "timeout"];

/** Length of the pair rate limit's sliding window, in milliseconds. */
export const PAIR_RATE_WINDOW_MS = 60_000;

export function toRecord(r: AgentsTable): AgentRecord {
  return {
    id: r.id,
    userId: r.user_id,
    chatId: r.chat_id,
    kind: r.kind === "root" ? "root" : "child",
    rootId: r.root_id,
    parentId: r.parent_id,
    depth: Number(r.depth),
    path: r.path,
    template: r.template,
    provider: r.provider,
    model: r.model,
    status: r.status as AgentStatus,
    task: r.task,
    result: r.result,
    note: r.note,
    usage: {
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      turns: Number(r.turns),
      toolCalls: Number(r.tool_calls),
      durationMs: Number(r.duration_ms),
    },
    childrenCount: Number(r.children_count),
    queueDepth: Number(r.queue_depth),
    maxTurns: Number(r.max_turns),
    timeMs: Number(r.time_ms),
    instanceId: r.instance_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
  };
}

/** The columns every new agent row starts with: running, nothing produced, no usage, every counter at zero. */
export const NEW_RUN = {
  status: "running",
  result: null,
  note: null,
  transcript: "[]",
  input_tokens: 0,
  output_tokens: 0,
  turns: 0,
  tool_calls: 0,
  duration_ms: 0,
  children_count: 0,
  tree_count: 0,
  active_count: 0,
  tree_tokens: 0,
  queue_depth: 0,
} as const;

/** The current time as stored in agent rows (ISO 8601). */
export const now = (): string => new Date().toISOString();

/** Rows changed by an update, as a number (drivers report bigint). */
export function changed(result: { numUpdatedRows: bigint } | undefined): number {
  return Number(result?.numUpdatedRows ?? 0n);
}
