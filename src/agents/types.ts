/**
 * The shapes of the agents room: the events sub-agents stream on their chat, what a chat turn gives to open its
 * tree and gets back, the durable-tree journal the application implements, and the run/tree records the service
 * keeps per process.
 */
import type { AgentSendLimits, AgentSpawnLimits, AgentStatus, AgentUsage } from "../core/agents.js";
import type { ToolRuntime } from "../core/runtime.js";
import type { Logger } from "../core/types.js";
import type { LoopEvent } from "../loop/events.js";
import type { AgentAwareGate, LoopStepSnapshot, ToolCallGate } from "../loop/gate.js";
import type { ConversationMessage, ProviderAdapter, ProviderName } from "../providers/types.js";
import type { AgentRecord } from "../storage/agent-records.js";
import type { AgentRepository, WriteFence } from "../storage/agent-repository.js";
import type { AgentTemplate, AgentTemplateCatalog } from "./templates.js";

/**
 * The cross-instance signals the agent service takes part in (the application's signal bus): an agent cancelled
 * on another instance is stopped here, and one cancelled here but running elsewhere is announced.
 */
export interface AgentSignals {
  subscribe(handler: (signal: { kind: string; target: string; local?: boolean }) => void): () => void;
  publish(kind: "agent_cancel", target: string): Promise<void>;
}

/** How an agent appears on events: its id, depth, path of ids from the root, and template. */
export interface AgentTag {
  id: string;
  parentId: string | null;
  depth: number;
  path: string;
  template: string;
}

/**
 * Events of sub-agents, streamed on the parent chat's event stream: `agent_started`, `agent_finished`, and the
 * child's tool events (tool_call_completed, tool_progress, tool_result, error) with an `agent` tag.
 */
export type AgentStreamEvent =
  | { type: "agent_started"; agent: AgentTag; task: string }
  | {
      type: "agent_finished";
      agent: AgentTag;
      status: AgentStatus;
      response: string;
      usage: AgentUsage;
      note?: string;
    }
  | (Extract<
      LoopEvent,
      {
        type:
          | "tool_call_completed"
          | "tool_progress"
          | "tool_result"
          | "error"
          | "approval_requested"
          | "approval_resolved";
      }
    > & {
      agent: AgentTag;
    });

/**
 * What a sub-agent's run keeps in the database so that another instance can resume it (the state row of its
 * journal): its first messages, offered tools, model and limits, and the step whose calls run once one started.
 */
export interface AgentRunState {
  version: 1;
  /** The run's first messages (its task; or its conversation and mail when woken by a message). */
  messages: ConversationMessage[];
  /** Names of the tools it was offered. */
  tools: string[];
  model: string;
  limits: AgentSpawnLimits;
  /** The step whose calls run (with the complete steps before it), once a call started. */
  step?: LoopStepSnapshot;
}

/**
 * Makes an agent tree durable: the tree lives under its chat turn's lease (one owner, a fencing epoch), every call of
 * every agent is journaled, and an instance taking the turn over resumes the tree's running agents from their
 * journals. The application implements it over the turn's lease (app/turn-journal.ts).
 */
export interface TreeJournal {
  /** Throws (StaleLeaseError) inside a write's transaction when this instance no longer owns the tree. */
  fence: WriteFence;
  /** The gate of an agent's loop: journals each call under the agent's id, with `base` and the step as its state. */
  gate(agentId: string, base: AgentRunState, inner: ToolCallGate | undefined): ToolCallGate;
  /** Stores the state of a run that starts (fenced). */
  begin(agentId: string, state: AgentRunState): Promise<void>;
  /**
   * The stored state of an agent's run with its step resumed from its journal (a finished call keeps its result, an
   * unfinished side-effecting one is reported interrupted), or undefined when none was stored.
   */
  resume(agentId: string): Promise<AgentRunState | undefined>;
  /** The agent that call `callId` of agent `parentId` spawned, when it got that far. */
  spawned(parentId: string, callId: string): Promise<string | undefined>;
  /** Records, inside the transaction reserving the child (fenced), that call `callId` of `parentId` spawned it. */
  linkSpawn(trx: Parameters<WriteFence>[0], parentId: string, callId: string, childId: string): Promise<void>;
  /** Drops the journals of the given runs (the tree ended), fenced. */
  drop(agentIds: string[]): Promise<void>;
}

/** Builds a provider adapter (the chat service's factory); throws when the provider is not configured. */
export type AgentAdapterFactory = (provider: ProviderName, env: NodeJS.ProcessEnv) => ProviderAdapter;

/** Dependencies and knobs of an AgentService. */
export interface AgentServiceOptions {
  repository: AgentRepository;
  runtime: ToolRuntime;
  templates: AgentTemplateCatalog;
  logger?: Logger;
  /**
   * This server instance's id (rows it runs carry it); default `host:pid:nonce`, which lets a later process on the
   * same machine see at once that this one is gone.
   */
  instanceId?: string;
  /** How often running agents' heartbeat is written and stale ones of dead instances swept (ms; default 15 s). */
  heartbeatMs?: number;
  /** A running agent whose heartbeat is older than this belongs to a stopped instance (ms; default 60 s). */
  staleAfterMs?: number;
  /** Longest grace turn after a turn or time limit (ms; default AGENT_GRACE_TURN_MS). */
  graceTurnMs?: number;
  /** How long a cancel waits for runs to stop before marking them in the database anyway (ms; default 2 s). */
  settleMs?: number;
  /**
   * The instances' signal bus: a cancel of an agent running on another instance reaches it within a second (without
   * it, at that instance's next heartbeat).
   */
  signals?: AgentSignals;
}

/** What a chat turn gives to open its tree. */
export interface OpenTurnOptions {
  userId: string;
  chatId: string | null;
  provider: ProviderName;
  model: string;
  /** The chat turn's adapter (reused by children of the same provider). */
  adapter: ProviderAdapter;
  adapterFactory: AgentAdapterFactory;
  env: NodeJS.ProcessEnv;
  workingDirectory: string | null;
  /** The user's message (stored as the root's task). */
  task: string;
  /** The chat turn's signal: aborting it cancels the whole tree. */
  signal?: AbortSignal;
  /** Receives sub-agent events, in order. */
  emit: (event: AgentStreamEvent) => void;
  /** Builds a sub-agent's system prompt around its template's (the chat's working-directory note). */
  systemPrompt?: (template: AgentTemplate, agent: AgentRecord) => string;
  /**
   * The chat turn's approval gate: every sub-agent's calls go through it too, their asks shown on the chat's
   * surface tagged with the agent path.
   */
  gate?: AgentAwareGate;
  /** Makes the tree durable under the chat turn's lease (every run journaled, resumable elsewhere). */
  journal?: TreeJournal;
  /**
   * Taking a turn over: the root agent of the tree the previous owner ran. Its running agents are adopted (they now
   * name this instance) and resumed from their journals; the root record is reused.
   */
  adoptRootId?: string;
}

/** A chat turn's tree, as the chat service drives it. */
export interface AgentTurn {
  rootId: string;
  /** Services for the root loop's tools (`agents`: the root's AgentToolService). */
  services: Record<string, unknown>;
  /** Messages other agents sent the root, delivered at the start of each of its model turns. */
  beforeModelTurn: () => Promise<ConversationMessage[]>;
  /** Counts the root loop's tokens towards the tree's budget. */
  recordUsage(inputTokens: number, outputTokens: number): Promise<void>;
  /** Ends the turn: cancels still-running sub-agents (their partial results kept) and records the root. */
  finish(status: "completed" | "cancelled" | "error" | "max_turns"): Promise<void>;
}

/** Why a run was stopped from outside its loop. */
export type StopReason = "cancelled" | "timeout" | "budget" | "parent_finished" | "shutdown";

/** One running agent in this process (internal to the service; exported for its scope type only). */
export interface AgentRun {
  record: AgentRecord;
  tree: AgentTree;
  /** Aborted by cancel, close, the parent, shutdown: stops everything including the grace turn. */
  hard: AbortController;
  /** Aborted by `hard`, the time limit, the budget and the run's end: the loop's signal, and its children's parent. */
  loop: AbortController;
  stop?: StopReason;
  /** Names of the tools this agent was offered (its children get at most these). */
  tools: Set<string>;
  /** Resolves when the run has finished and its row is final. */
  settled: Promise<void>;
  /** Senders whose messages this run read (its answer is queued back to them when it was woken by mail). */
  replyTo: Set<string>;
  wokenByMail: boolean;
}

/** A tree open in this process: one chat turn (internal to the service). */
export interface AgentTree {
  rootId: string;
  userId: string;
  chatId: string | null;
  provider: ProviderName;
  model: string;
  adapter: ProviderAdapter;
  adapterFactory: AgentAdapterFactory;
  env: NodeJS.ProcessEnv;
  workingDirectory: string | null;
  emit: (event: AgentStreamEvent) => void;
  systemPrompt: (template: AgentTemplate, agent: AgentRecord) => string;
  gate?: AgentAwareGate;
  journal?: TreeJournal;
  /** The limits the latest spawn used (waking an idle agent by mail reuses them). */
  limits?: AgentSpawnLimits;
  sendLimits?: AgentSendLimits;
  open: boolean;
}
