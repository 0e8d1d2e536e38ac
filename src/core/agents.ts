/**
 * The contract between the sub-agent tools (agent_spawn, agent_send, agent_wait, agent_close) and the host that runs
 * agent trees. A tool reaches agents only through an {@link AgentToolService} it finds in `context.services.agents`,
 * bound by the host to the calling agent: identity, depth and parent come from the server's own lineage of that agent,
 * never from model-supplied arguments.
 *
 * Also holds the process-wide catalog of agent templates, so that agent_spawn's model-facing description can list
 * the templates that exist (buildDefinition receives only settings).
 */
import { AccessDeniedError } from "./errors.js";

/** How an agent's run ended, or `running`; `interrupted` marks a run the server stopped by restarting. */
export type AgentStatus =
  | "running"
  | "completed"
  | "max_turns"
  | "timeout"
  | "budget_exhausted"
  | "cancelled"
  | "error"
  | "interrupted";

/** The statuses that mean a run is over. */
export const FINISHED_AGENT_STATUSES: readonly AgentStatus[] = [
  "completed",
  "max_turns",
  "timeout",
  "budget_exhausted",
  "cancelled",
  "error",
  "interrupted",
];

/** What one agent consumed so far: tokens, model turns, tool calls, and wall time in milliseconds. */
export interface AgentUsage {
  inputTokens: number;
  outputTokens: number;
  turns: number;
  toolCalls: number;
  durationMs: number;
}

/** A template as the model and the API see it. */
export interface AgentTemplateSummary {
  id: string;
  description: string;
  /** Provider and model, or null for "the parent's". */
  provider: string | null;
  model: string | null;
  /** Tool names the template may use (always intersected with the parent's), or null for "all of the parent's". */
  tools: string[] | null;
  maxTurns: number | null;
  timeSeconds: number | null;
  /** Where it was defined: "built-in", the config file path, or the Markdown file path. */
  source: string;
}

/**
 * Limits of spawning, read from agent_spawn's settings by the tool and enforced by the host in one transaction
 * (each is also clamped by the host to its ceiling).
 */
export interface AgentSpawnLimits {
  /** MAX_AGENT_DEPTH: deepest allowed agent (the chat's own agent is depth 0). */
  maxDepth: number;
  /** DEFAULT_MAX_SUB_AGENTS: children one agent may spawn in total. */
  maxSubAgents: number;
  /** Agents one tree (one chat turn) may hold in total. */
  maxTreeAgents: number;
  /** Agents of one tree running at once. */
  maxConcurrent: number;
  /** Model turns per run of an agent. */
  maxTurns: number;
  /** Wall time per run of an agent, in seconds. */
  timeSeconds: number;
  /** Tokens (input + output) all agents of a tree may use together. */
  tokenBudget: number;
}

/** Limits of messaging, read from agent_send's settings. */
export interface AgentSendLimits {
  /** MESSAGE_MAX_BYTES: UTF-8 bytes of one message. */
  messageMaxBytes: number;
  /** MESSAGE_QUEUE_MAX: unread messages one agent may hold. */
  queueMax: number;
  /** AGENT_PAIR_RATE_LIMIT: messages per minute from one agent to another (sliding window). */
  pairRatePerMinute: number;
}

/** agent_spawn's result: `{agentId, response, depth}` plus status, usage and template. */
export interface AgentSpawnResult {
  agentId: string;
  /** The child's answer; for a run a limit cut short, what it produced so far (see `status`). */
  response: string;
  depth: number;
  /** The spawning agent's id (the caller's own id, e.g. for agent_send's `agentId`). */
  parentId: string;
  status: AgentStatus;
  usage: AgentUsage;
  template: string;
  /** Why the run did not complete, when it did not (the limit and its value, the error). */
  note?: string;
}

/** agent_send's result: `{sent, targetAgentId}` plus the message id and the target's queue depth. */
export interface AgentSendResult {
  sent: boolean;
  targetAgentId: string;
  messageId: string;
  queueDepth: number;
  /** "queued" (read at the target's next model turn) or "started" (an idle target began a turn for it). */
  delivery: "queued" | "started";
}

/** One agent's state in agent_wait's result. */
export interface AgentWaitEntry {
  agentId: string;
  status: AgentStatus;
  response: string | null;
  usage: AgentUsage;
  note?: string;
}

/**
 * agent_wait's result. `status` is `timed_out` (and `timedOut` true) when some named agent was still running at the
 * deadline, else `done`.
 */
export interface AgentWaitResult {
  status: "done" | "timed_out";
  agents: AgentWaitEntry[];
  timedOut: boolean;
}

/** agent_close's result: the agents that were stopped (the named one and its running descendants). */
export interface AgentCloseResult {
  closed: boolean;
  agentId: string;
  cancelled: string[];
}

/**
 * What the agent tools call. One instance is bound to one running agent (the chat turn's root agent or a
 * sub-agent); `agentId` and `depth` are the server's record of that agent.
 */
export interface AgentToolService {
  readonly agentId: string;
  readonly depth: number;
  /** Spawns a child of this agent. Throws LimitExceededError, AccessDeniedError, NotFoundError (template). */
  spawn(
    /**
     * `callId`: the model's id of the agent_spawn call; when a turn taken over runs that call again, the agent it
     * already spawned is waited for instead of spawning another.
     */
    input: { template: string; message: string; wait: boolean; callId?: string },
    limits: AgentSpawnLimits,
    signal: AbortSignal,
  ): Promise<AgentSpawnResult>;
  /** Queues a message from this agent to another agent of its tree. Throws LimitExceededError, NotFoundError. */
  send(input: { targetAgentId: string; message: string }, limits: AgentSendLimits): Promise<AgentSendResult>;
  /** Waits until the named agents (default: all children of this agent) finish, or `timeoutMs` passes. */
  wait(input: { agentIds?: string[]; timeoutMs: number }, signal: AbortSignal): Promise<AgentWaitResult>;
  /** Cancels a descendant and all of its descendants. Throws NotFoundError, AccessDeniedError. */
  close(agentId: string): Promise<AgentCloseResult>;
}

let templateCatalog: () => AgentTemplateSummary[] = () => [];

/**
 * Sets where agent_spawn's description finds the template list (the application does at start); returns the
 * function that puts back the empty list (while this one is still set), which the application calls on close.
 */
export function setAgentTemplateCatalog(list: () => AgentTemplateSummary[]): () => void {
  templateCatalog = list;
  return () => {
    if (templateCatalog === list) templateCatalog = () => [];
  };
}

/** The templates agent_spawn offers; an empty list before the application configured one. */
export function listAgentTemplates(): AgentTemplateSummary[] {
  try {
    return templateCatalog();
  } catch {
    return [];
  }
}

/** MAX_AGENT_DEPTH: the deepest sub-agent (the chat's own agent is depth 0); default and ceiling. */
export const MAX_AGENT_DEPTH = 5;
/** DEFAULT_MAX_SUB_AGENTS: children one agent may spawn; default and ceiling. */
export const DEFAULT_MAX_SUB_AGENTS = 20;
/** Sub-agents one tree (one chat turn) may hold; default and ceiling. */
export const DEFAULT_MAX_TREE_AGENTS = 50;
/** Sub-agents of one tree running at once; default and ceiling. */
export const DEFAULT_MAX_CONCURRENT_AGENTS = 4;
/** Model turns per run of a sub-agent; default and ceiling. */
export const DEFAULT_AGENT_MAX_TURNS = 30;
/** Wall time per run of a sub-agent, in seconds (10 minutes); default and ceiling. */
export const DEFAULT_AGENT_TIME_SECONDS = 600;
/** Tokens all sub-agents of one tree may use together; default and ceiling. */
export const DEFAULT_TREE_TOKEN_BUDGET = 2_000_000;
/** MESSAGE_MAX_BYTES: 100 KB (102,400 bytes of UTF-8) per message; default and ceiling. */
export const MESSAGE_MAX_BYTES = 100 * 1024;
/** MESSAGE_QUEUE_MAX: unread messages per agent; default and ceiling. */
export const MESSAGE_QUEUE_MAX = 1000;
/** AGENT_PAIR_RATE_LIMIT: messages a minute from one agent to another; default and ceiling. */
export const AGENT_PAIR_RATE_LIMIT = 10;
/** agent_wait's default and longest wait, in milliseconds. */
export const DEFAULT_AGENT_WAIT_MS = 30_000;
export const MAX_AGENT_WAIT_MS = 3_600_000;
/** Longest grace turn (the one answer a sub-agent gives after a turn or time limit), in milliseconds. */
export const AGENT_GRACE_TURN_MS = 30_000;

/** The agent tools' names; they disappear from a sub-agent's tools at the depth limit. */
export const AGENT_TOOL_NAMES: readonly string[] = ["agent_spawn", "agent_send", "agent_wait", "agent_close"];

/**
 * The enabled tools a caller outside a chat turn is offered (an MCP client, a framework adapter's run): all but the
 * agent tools, which need the calling agent of a chat turn (its lineage comes from the host, never the caller) and
 * would refuse every call there. Keeps each tool beside its definition.
 */
export function withoutChatTurnTools<T extends { definitions: readonly { name: string }[]; tools: readonly unknown[] }>(
  enabled: T,
): { tools: T["tools"][number][]; definitions: T["definitions"][number][] } {
  const tools: T["tools"][number][] = [];
  const definitions: T["definitions"][number][] = [];
  enabled.definitions.forEach((definition, i) => {
    if (AGENT_TOOL_NAMES.includes(definition.name)) return;
    tools.push(enabled.tools[i]);
    definitions.push(definition);
  });
  return { tools, definitions };
}

/** The AgentToolService in a tool's context; throws a classified error saying where agent tools work when absent. */
export function agentServiceFrom(services: Record<string, unknown>, tool: string): AgentToolService {
  const service = services.agents as AgentToolService | undefined;
  if (!service || typeof service.spawn !== "function") {
    throw new AccessDeniedError(
      `${tool} works only inside a chat turn (POST /api/chats/{id}/messages or toolhost chat), where the calling agent is known.`,
      { tool, rule: "agent_context" },
    );
  }
  return service;
}
