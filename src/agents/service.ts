/**
 * Sub-agent trees at run time: a chat turn is the root agent of a tree; agent_spawn creates children that run
 * their own tool loop with the provider adapter factory of the chat, within limits reserved atomically in the
 * database before any model call. Lineage, quotas and queues live in the database (AgentRepository); the running
 * loops, their AbortControllers and the event stream live here.
 *
 * Cancellation follows the tree: each run has a controller linked to its parent's, so cancelling a chat turn,
 * closing an agent, a parent's time limit or a parent's run ending stops every descendant's model stream and tool
 * processes. A run cut short by its turn or time limit gets one short grace turn (no tools) to answer.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import {
  AGENT_GRACE_TURN_MS,
  AGENT_TOOL_NAMES,
  type AgentCloseResult,
  type AgentSendLimits,
  type AgentSendResult,
  type AgentSpawnLimits,
  type AgentSpawnResult,
  type AgentStatus,
  type AgentToolService,
  type AgentUsage,
  type AgentWaitResult,
  MESSAGE_MAX_BYTES,
  MESSAGE_QUEUE_MAX,
} from "../core/agents.js";
import { AccessDeniedError, LimitExceededError, NotFoundError, ToolError, ToolExecutionError } from "../core/errors.js";
import type { ToolRuntime } from "../core/runtime.js";
import { withAgentSpan } from "../core/tracing.js";
import type { Logger, ToolDefinition } from "../core/types.js";
import type { LoopEvent } from "../loop/events.js";
import type { AgentAwareGate, LoopStepSnapshot, ToolCallGate } from "../loop/gate.js";
import { runToolLoop } from "../loop/run-tool-loop.js";
import { providerEntry } from "../providers/table.js";
import type { ConversationMessage, ProviderAdapter, ProviderName } from "../providers/types.js";
import type { AgentRecord } from "../storage/agent-records.js";
import type { AgentRepository, WriteFence } from "../storage/agent-repository.js";
import { agentSpawnsTotal, agentsActive } from "./metrics.js";
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

/** Whether an error is a refused write of a stale owner (the tree moved to another instance). */
function isStale(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "lease_lost";
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

const ZERO_USAGE: AgentUsage = { inputTokens: 0, outputTokens: 0, turns: 0, toolCalls: 0, durationMs: 0 };

function tagOf(record: AgentRecord): AgentTag {
  return {
    id: record.id,
    parentId: record.parentId,
    depth: record.depth,
    path: record.path,
    template: record.template,
  };
}

/**
 * Whether an instance id (`host:pid:nonce`, as this service makes them) names a process of this machine that no
 * longer exists. False when it cannot tell (another host, another id shape, a pid that exists).
 */
function processGone(instanceId: string): boolean {
  const [host, pidText] = instanceId.split(":");
  const pid = Number(pidText);
  if (host !== hostname() || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

function isDescendant(ancestor: Pick<AgentRecord, "path">, agent: Pick<AgentRecord, "path">): boolean {
  return agent.path.startsWith(`${ancestor.path}/`);
}

/** The default system prompt of a sub-agent: its template's prompt and who it is. */
function defaultSystemPrompt(template: AgentTemplate, agent: AgentRecord): string {
  return `${template.systemPrompt}\n\nYour agent id is ${agent.id} (depth ${agent.depth}); agent ${agent.parentId} spawned you.`;
}

/** Runs and tracks sub-agent trees over an AgentRepository. */
export class AgentService {
  readonly instanceId: string;
  readonly #repo: AgentRepository;
  readonly #runtime: ToolRuntime;
  readonly #templates: AgentTemplateCatalog;
  readonly #logger: Logger | undefined;
  readonly #heartbeatMs: number;
  readonly #staleAfterMs: number;
  readonly #graceTurnMs: number;
  readonly #settleMs: number;
  readonly #runs = new Map<string, AgentRun>();
  readonly #finishListeners = new Set<() => void>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #signals: AgentSignals | undefined;

  constructor(options: AgentServiceOptions) {
    this.#repo = options.repository;
    this.#runtime = options.runtime;
    this.#templates = options.templates;
    this.#logger = options.logger;
    this.instanceId = options.instanceId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#heartbeatMs = options.heartbeatMs ?? 15_000;
    this.#staleAfterMs = options.staleAfterMs ?? 60_000;
    this.#graceTurnMs = options.graceTurnMs ?? AGENT_GRACE_TURN_MS;
    this.#settleMs = options.settleMs ?? 2_000;
    this.#signals = options.signals;
    this.#signals?.subscribe((signal) => {
      if (signal.kind !== "agent_cancel") return;
      const run = this.#runs.get(signal.target);
      if (run && run.record.kind === "child") this.#stop(run, "cancelled");
    });
  }

  /** The template catalog (for listing). */
  get templates(): AgentTemplateCatalog {
    return this.#templates;
  }

  /**
   * Marks `interrupted` the running agents of instances that stopped (heartbeat older than staleAfterMs), and
   * starts this instance's heartbeat. Returns the ids marked.
   */
  async start(): Promise<string[]> {
    const marked = await this.#sweep();
    if (!this.#timer && this.#heartbeatMs > 0) {
      this.#timer = setInterval(() => {
        void this.#tick().catch((error) => this.#logger?.warn({ err: String(error) }, "agent heartbeat failed"));
      }, this.#heartbeatMs);
      this.#timer.unref?.();
    }
    return marked;
  }

  /**
   * Marks `interrupted` the running agents of instances that are gone: at once for an instance of this machine
   * whose process no longer exists (a restart after a crash), else once its heartbeat is older than staleAfterMs
   * (another machine, or a pid reused meanwhile).
   */
  async #sweep(): Promise<string[]> {
    const marked: string[] = [];
    for (const instance of await this.#repo.runningInstances()) {
      if (instance === this.instanceId || !processGone(instance)) continue;
      marked.push(...(await this.#repo.interrupt({ instanceId: instance })));
    }
    const staleBefore = new Date(Date.now() - this.#staleAfterMs).toISOString();
    marked.push(...(await this.#repo.interrupt({ exceptInstance: this.instanceId, staleBefore })));
    return marked;
  }

  async #tick(): Promise<void> {
    await this.#repo.heartbeat(this.instanceId);
    await this.#sweep();
    // Agents cancelled through another instance (or the API of one) stop here too.
    const stopped = await this.#repo.stoppedElsewhere([...this.#runs.keys()]);
    for (const id of stopped) {
      const run = this.#runs.get(id);
      if (run && run.record.kind === "child") this.#stop(run, "cancelled");
    }
  }

  /**
   * Stops this instance: every running agent is stopped. Agents of a turn this instance handed over (their tree is
   * durable and its lease moved on) stay running for the instance that takes the turn over; the others are marked
   * `interrupted` with what they produced so far.
   */
  async shutdown(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    const runs = [...this.#runs.values()];
    for (const run of runs) this.#stop(run, "shutdown");
    // Sub-agents stop here; a root settles when its chat turn ends, which its own caller drives.
    await this.#settle(runs.filter((r) => r.record.kind === "child"));
    await this.#repo.interrupt({ instanceId: this.instanceId }).catch(() => []);
  }

  /** Waits until the runs settled, at most settleMs. */
  async #settle(runs: AgentRun[]): Promise<void> {
    if (runs.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(runs.map((r) => r.settled)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.#settleMs);
        timer.unref?.();
      }),
    ]);
    clearTimeout(timer);
  }

  /** Opens the tree of a chat turn: records its root agent and returns what the turn's loop needs. */
  async openTurn(options: OpenTurnOptions): Promise<AgentTurn> {
    const journal = options.journal;
    const adopted =
      journal && options.adoptRootId ? await this.#repo.adopt(options.adoptRootId, this.instanceId, journal.fence) : [];
    const root =
      adopted[0]?.kind === "root" && adopted[0].id === options.adoptRootId
        ? adopted[0]
        : await this.#repo.createRoot({
            userId: options.userId,
            chatId: options.chatId,
            provider: options.provider,
            model: options.model,
            task: options.task,
            instanceId: this.instanceId,
          });
    const tree: AgentTree = {
      rootId: root.id,
      userId: options.userId,
      chatId: options.chatId,
      provider: options.provider,
      model: options.model,
      adapter: options.adapter,
      adapterFactory: options.adapterFactory,
      env: options.env,
      workingDirectory: options.workingDirectory,
      emit: (event) => {
        try {
          options.emit(event);
        } catch (error) {
          this.#logger?.warn({ err: String(error) }, "agent event listener threw");
        }
      },
      systemPrompt: options.systemPrompt ?? defaultSystemPrompt,
      ...(options.gate ? { gate: options.gate } : {}),
      ...(journal ? { journal } : {}),
      open: true,
    };
    const enabled = await this.#runtime.getEnabledToolRuntime(options.userId);
    let settle!: () => void;
    const run: AgentRun = {
      record: root,
      tree,
      hard: new AbortController(),
      loop: new AbortController(),
      tools: new Set(enabled.definitions.map((d) => d.name)),
      settled: new Promise<void>((resolve) => {
        settle = resolve;
      }),
      replyTo: new Set(),
      wokenByMail: false,
    };
    this.#link(run, options.signal);
    this.#runs.set(root.id, run);
    const scope = new AgentScope(this, run);
    let finished = false;
    // A turn taken over: its running sub-agents continue here, parents before children.
    for (const agent of adopted) if (agent.kind === "child") await this.#takeOver(tree, agent);
    return {
      rootId: root.id,
      services: { agents: scope },
      beforeModelTurn: () => this.#incoming(run),
      recordUsage: async (input, output) => {
        await this.#repo.addTokens(root.id, root.id, input, output);
      },
      finish: async (status) => {
        if (finished) return;
        finished = true;
        tree.open = false;
        // The turn is over: sub-agents still running have no one to answer to.
        const descendants = [...this.#runs.values()].filter((r) => r.tree === tree && r !== run);
        run.loop.abort();
        await this.#settle(descendants);
        // Rows of runs that did not stop in time are marked anyway (their loops end on their own shortly).
        for (const r of descendants) {
          if (this.#runs.has(r.record.id)) {
            await this.#repo
              .finish(r.record.id, "cancelled", { note: "The chat turn ended." }, journal?.fence)
              .catch(() => false);
          }
        }
        // Fenced: a turn handed over (or taken from this instance) keeps its tree running for its new owner.
        const ended = await this.#repo.finish(root.id, status, {}, journal?.fence).catch((error) => !isStale(error));
        if (journal && ended) {
          await journal
            .drop(await this.#repo.treeIds(root.id))
            .catch((error) => this.#logger?.warn({ err: String(error) }, "dropping the agent journals failed"));
        }
        this.#runs.delete(root.id);
        settle();
      },
    };
  }

  /**
   * Links a run's controllers: `hard` aborts `loop`, and the parent's signal stops the run — with the reason the
   * parent was stopped for (a chat cancel cancels, a shutdown interrupts, a spent budget exhausts), or
   * `parent_finished` when the parent's run simply ended.
   */
  #link(run: AgentRun, parent: AbortSignal | undefined, parentRun?: AgentRun): void {
    run.hard.signal.addEventListener("abort", () => run.loop.abort(), { once: true });
    if (!parent) return;
    const reason = (): StopReason => {
      if (!parentRun) return "cancelled";
      if (parentRun.stop === undefined) return "parent_finished";
      if (parentRun.stop === "shutdown" || parentRun.stop === "budget") return parentRun.stop;
      return "cancelled";
    };
    const onParent = () => this.#stop(run, reason());
    if (parent.aborted) onParent();
    else parent.addEventListener("abort", onParent, { once: true });
    // Drop the listener once this run is over, so long-lived parents do not accumulate them.
    void run.settled.then(() => parent.removeEventListener("abort", onParent));
  }

  #stop(run: AgentRun, reason: StopReason): void {
    if (run.hard.signal.aborted) return;
    if (reason === "timeout" || reason === "budget") {
      if (run.loop.signal.aborted) return;
      run.stop = reason;
      run.loop.abort();
      return;
    }
    run.stop ??= reason;
    run.hard.abort();
  }

  /** Takes the run's unread messages and renders them as user messages of its next model turn. */
  async #incoming(run: AgentRun): Promise<ConversationMessage[]> {
    const messages = await this.#repo.consume(run.record.id);
    return messages.map((m) => {
      run.replyTo.add(m.senderId);
      return {
        role: "user" as const,
        content: `[Message from agent ${m.senderId}]\n${m.body}`,
      };
    });
  }

  /** Spawns a child of `parent` (see AgentToolService.spawn). */
  async spawn(
    parent: AgentRun,
    input: { template: string; message: string; wait: boolean; callId?: string },
    limits: AgentSpawnLimits,
    signal: AbortSignal,
  ): Promise<AgentSpawnResult> {
    const tree = parent.tree;
    if (!tree.open || this.#closed) {
      throw new AccessDeniedError("This agent tree has ended; start a new chat turn to spawn agents.");
    }
    const journal = tree.journal;
    const callId = input.callId;
    if (journal && callId) {
      // The same call run again after a takeover: the agent it spawned before is the answer, not a new one.
      const spawned = await journal.spawned(parent.record.id, callId);
      if (spawned) return this.#attach(parent, spawned, input.wait, signal);
    }
    const template = this.#templates.get(input.template);
    const provider = (template.provider as ProviderName | null) ?? tree.provider;
    // A template of another provider without a model gets that provider's default model (the provider table's).
    const model = template.model ?? (provider === tree.provider ? tree.model : providerEntry(provider).defaultModel);
    let adapter: ProviderAdapter;
    if (provider === tree.provider) {
      adapter = tree.adapter;
    } else {
      try {
        adapter = tree.adapterFactory(provider, tree.env);
      } catch (error) {
        throw new ToolExecutionError(
          `Template "${template.id}" needs provider ${provider}, which is not configured: ${(error as Error).message}`,
        );
      }
    }
    const depth = parent.record.depth + 1;
    const names = new Set([...parent.tools].filter((name) => template.tools === null || template.tools.includes(name)));
    if (depth >= limits.maxDepth) for (const name of AGENT_TOOL_NAMES) names.delete(name);
    const maxTurns = Math.min(template.maxTurns ?? limits.maxTurns, limits.maxTurns);
    const timeMs = Math.min(template.timeSeconds ?? limits.timeSeconds, limits.timeSeconds) * 1000;
    tree.limits = limits;
    let record: AgentRecord;
    try {
      record = await this.#repo.reserveChild({
        userId: tree.userId,
        parentId: parent.record.id,
        template: template.id,
        task: input.message,
        provider,
        model,
        maxTurns,
        timeMs,
        instanceId: this.instanceId,
        limits,
        ...(journal
          ? {
              inTransaction: (trx, child) =>
                callId ? journal.linkSpawn(trx, parent.record.id, callId, child.id) : journal.fence(trx),
            }
          : {}),
      });
    } catch (error) {
      if (error instanceof ToolError && error.code === "limit_exceeded") agentSpawnsTotal.inc({ outcome: "refused" });
      throw error;
    }
    const run = this.#startRun(parent, record, {
      adapter,
      model,
      template,
      tools: names,
      messages: [{ role: "user", content: input.message }],
      limits,
      task: input.message,
    });
    if (!input.wait) {
      return {
        agentId: record.id,
        response: "",
        depth: record.depth,
        parentId: parent.record.id,
        status: "running",
        usage: { ...ZERO_USAGE },
        template: template.id,
      };
    }
    await Promise.race([
      run.settled,
      new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener("abort", () => resolve(), { once: true });
      }),
    ]);
    const final = (await this.#repo.get(tree.userId, record.id)) ?? record;
    return {
      agentId: final.id,
      response: final.result ?? "",
      depth: final.depth,
      parentId: parent.record.id,
      status: final.status,
      usage: final.usage,
      template: template.id,
      ...(final.note ? { note: final.note } : {}),
    };
  }

  /** The answer of an agent_spawn call run again after a takeover: the agent it spawned, waited for when asked. */
  async #attach(parent: AgentRun, agentId: string, wait: boolean, signal: AbortSignal): Promise<AgentSpawnResult> {
    let agent = await this.#repo.get(parent.tree.userId, agentId);
    if (!agent) throw new NotFoundError(`The agent this call spawned (${agentId}) no longer exists.`);
    if (wait && agent.status === "running") {
      const local = this.#runs.get(agentId);
      if (local) {
        await Promise.race([
          local.settled,
          new Promise<void>((resolve) => {
            if (signal.aborted) resolve();
            else signal.addEventListener("abort", () => resolve(), { once: true });
          }),
        ]);
      } else {
        await this.wait(parent, { agentIds: [agentId], timeoutMs: agent.timeMs + this.#graceTurnMs }, signal);
      }
      agent = (await this.#repo.get(parent.tree.userId, agentId)) ?? agent;
    }
    return {
      agentId: agent.id,
      response: wait ? (agent.result ?? "") : "",
      depth: agent.depth,
      parentId: parent.record.id,
      status: agent.status,
      usage: agent.usage,
      template: agent.template,
      ...(wait && agent.note ? { note: agent.note } : {}),
    };
  }

  /**
   * Resumes here a running agent of a turn taken over: from its journal's state, its step's finished calls keep
   * their results and an unfinished side-effecting call is reported interrupted. An agent with no stored state (its
   * owner died before it started) ends `interrupted`.
   */
  async #takeOver(tree: AgentTree, agent: AgentRecord): Promise<void> {
    const journal = tree.journal;
    if (!journal) return;
    const fail = async (status: "interrupted" | "error", note: string) => {
      if (await this.#repo.finish(agent.id, status, { note }, journal.fence).catch(() => false)) {
        tree.emit({ type: "agent_finished", agent: tagOf(agent), status, response: "", usage: agent.usage, note });
      }
    };
    const state = await journal.resume(agent.id);
    if (state?.version !== 1) {
      await fail("interrupted", "The server running this agent stopped before it started; it was not resumed.");
      return;
    }
    let template: AgentTemplate;
    try {
      template = this.#templates.get(agent.template);
    } catch {
      await fail("error", `Template "${agent.template}" no longer exists.`);
      return;
    }
    const provider = (agent.provider as ProviderName | null) ?? tree.provider;
    let adapter = tree.adapter;
    if (provider !== tree.provider) {
      try {
        adapter = tree.adapterFactory(provider, tree.env);
      } catch (error) {
        await fail("error", (error as Error).message);
        return;
      }
    }
    tree.limits ??= state.limits;
    this.#logger?.info({ agentId: agent.id, rootId: agent.rootId }, "taking over a running agent");
    this.#startRun(agent.parentId ? this.#runs.get(agent.parentId) : undefined, agent, {
      adapter,
      model: state.model,
      template,
      tools: new Set(state.tools),
      messages: state.messages,
      limits: state.limits,
      task: agent.task,
      ...(state.step ? { resume: state.step } : {}),
      takenOver: true,
    });
  }

  /** Starts a run of a reserved (running) agent in the background; returns it. */
  #startRun(
    parent: AgentRun | undefined,
    record: AgentRecord,
    setup: {
      adapter: ProviderAdapter;
      model: string;
      template: AgentTemplate;
      tools: Set<string>;
      messages: ConversationMessage[];
      limits: AgentSpawnLimits;
      task: string;
      wokenByMail?: boolean;
      /** Resuming a run taken over from another instance: the step to resume (when a call had started). */
      resume?: LoopStepSnapshot;
      takenOver?: boolean;
    },
  ): AgentRun {
    const tree = (parent?.tree ?? this.#treeOf(record)) as AgentTree;
    let settle!: () => void;
    const run: AgentRun = {
      record,
      tree,
      hard: new AbortController(),
      loop: new AbortController(),
      tools: setup.tools,
      settled: new Promise<void>((resolve) => {
        settle = resolve;
      }),
      replyTo: new Set(),
      wokenByMail: setup.wokenByMail ?? false,
    };
    const parentRun = parent ?? (record.parentId ? this.#runs.get(record.parentId) : undefined);
    const linkTo = parentRun ?? this.#runs.get(record.rootId);
    this.#link(run, linkTo?.loop.signal, linkTo);
    this.#runs.set(record.id, run);
    agentsActive.inc();
    tree.emit({ type: "agent_started", agent: tagOf(record), task: setup.task.slice(0, 2000) });
    void withAgentSpan(
      { name: record.template, id: record.id, model: setup.model, conversationId: record.chatId ?? undefined },
      () => this.#execute(run, setup),
    )
      .catch(async (error) => {
        run.loop.abort();
        // The tree moved to another instance: the run goes on there.
        if (isStale(error)) return;
        this.#logger?.error({ err: (error as Error)?.stack ?? String(error), agentId: record.id }, "agent run failed");
        // Whatever failed, the run is over: its row must not stay running (that would hold a slot forever).
        const note = `The agent's run failed inside Toolhost: ${(error as Error)?.message ?? String(error)}`;
        if (await this.#repo.finish(record.id, "error", { note }, tree.journal?.fence).catch(() => false)) {
          agentSpawnsTotal.inc({ outcome: "error" });
          tree.emit({
            type: "agent_finished",
            agent: tagOf(record),
            status: "error",
            response: "",
            usage: record.usage,
            note,
          });
        }
      })
      .finally(() => {
        this.#runs.delete(record.id);
        agentsActive.dec();
        settle();
        for (const listener of [...this.#finishListeners]) listener();
        void this.#wakeIdle(tree).catch(() => {});
      });
    return run;
  }

  #treeOf(record: AgentRecord): AgentTree | undefined {
    return this.#runs.get(record.rootId)?.tree;
  }

  /**
   * The one place a sub-agent's tool loop is built and driven (approval routing and other per-loop wiring go
   * here): its tools, system prompt, limits, the queue delivery before each model turn, the token budget, and the
   * grace turn after a turn or time limit.
   */
  async #execute(
    run: AgentRun,
    setup: {
      adapter: ProviderAdapter;
      model: string;
      template: AgentTemplate;
      tools: Set<string>;
      messages: ConversationMessage[];
      limits: AgentSpawnLimits;
      resume?: LoopStepSnapshot;
      takenOver?: boolean;
    },
  ): Promise<void> {
    const { record, tree } = run;
    const started = performance.now();
    const usage: AgentUsage = { ...record.usage };
    const priorDuration = usage.durationMs;
    const journal = tree.journal;
    const fence = journal?.fence;
    // A run taken over keeps the time it had left (at least a second).
    const timeLeft = setup.takenOver ? Math.max(1000, record.timeMs - priorDuration) : record.timeMs;
    const timer = setTimeout(() => this.#stop(run, "timeout"), timeLeft);
    timer.unref?.();
    const scope = new AgentScope(this, run);
    const system = tree.systemPrompt(setup.template, record);
    const enabled = await this.#runtime.getEnabledToolRuntime(tree.userId);
    const tools: ToolDefinition[] = enabled.definitions.filter((d) => setup.tools.has(d.name));
    let transcript: ConversationMessage[] = [...setup.messages];
    let response = record.result ?? "";
    let current = "";
    const outcome: { reason: "text" | "max_iterations" | "aborted" | "error"; note?: string } = { reason: "error" };
    const tag = tagOf(record);
    const elapsed = () => priorDuration + Math.round(performance.now() - started);
    // Durable tree: what another instance needs to resume this run, stored before its first model turn.
    const base: AgentRunState = {
      version: 1,
      messages: setup.messages,
      tools: [...setup.tools],
      model: setup.model,
      limits: setup.limits,
    };
    if (journal && !setup.resume) await journal.begin(record.id, base);
    const onUsage = async (input: number, output: number) => {
      usage.inputTokens += input;
      usage.outputTokens += output;
      const total = await this.#repo.addTokens(record.id, record.rootId, input, output);
      // Spent: the tree stops once this model turn has finished streaming (its text is kept).
      if (total >= setup.limits.tokenBudget) budgetSpent = true;
    };
    let budgetSpent = false;

    const drive = async (
      loop: AsyncGenerator<LoopEvent, void, undefined>,
      base: ConversationMessage[],
    ): Promise<ConversationMessage[]> => {
      let added: ConversationMessage[] = [];
      for await (const event of loop) {
        switch (event.type) {
          case "iteration":
            usage.turns += 1;
            current = "";
            break;
          case "text_delta":
            current += event.delta;
            break;
          case "usage":
            await onUsage(event.inputTokens, event.outputTokens).catch((error) =>
              this.#logger?.warn({ err: String(error) }, "recording agent tokens failed"),
            );
            break;
          case "finish":
            if (current.trim() !== "") response = current;
            current = "";
            if (budgetSpent) this.#stopTree(tree, "budget");
            await this.#repo
              .saveProgress(record.id, { result: response, usage: { ...usage, durationMs: elapsed() } }, fence)
              .catch(() => {});
            break;
          case "tool_call_completed":
            usage.toolCalls += 1;
            tree.emit({ ...event, agent: tag });
            break;
          case "tool_progress":
          case "tool_result":
          case "approval_requested":
          case "approval_resolved":
            tree.emit({ ...event, agent: tag });
            break;
          case "error":
            if (event.code !== "max_iterations") outcome.note = event.message;
            tree.emit({ ...event, agent: tag });
            break;
          case "done":
            outcome.reason = event.reason;
            added = event.messages;
            break;
          default:
            break;
        }
      }
      // A model turn cut off mid-stream still produced text: keep it as the latest answer.
      if (current.trim() !== "") response = current;
      current = "";
      return [...base, ...added];
    };

    // The chat's approval gate, for this agent: same policy and surface, asks tagged with its path; its loop state
    // is not kept for an approval's resume. In a durable tree the journal gate wraps it: each call is journaled
    // before it runs and when it ends, with the step, so another instance can resume this run.
    const approvalGate = tree.gate?.child(record.path, {
      services: { agents: scope },
      turn: undefined,
    });
    const gate = journal ? journal.gate(record.id, base, approvalGate) : approvalGate;
    try {
      transcript = await drive(
        runToolLoop({
          adapter: setup.adapter,
          model: setup.model,
          system,
          messages: [...transcript, ...(setup.resume?.added ?? [])],
          runtime: this.#runtime,
          userId: tree.userId,
          chatId: tree.chatId,
          workingDirectory: tree.workingDirectory,
          maxIterations: record.maxTurns,
          signal: run.loop.signal,
          tools,
          services: { agents: scope },
          ...(gate ? { gate } : {}),
          ...(setup.resume ? { resume: setup.resume } : {}),
          beforeModelTurn: async () => {
            const messages = await this.#incoming(run);
            return messages;
          },
        }),
        transcript,
      );
    } finally {
      clearTimeout(timer);
    }

    const { reason } = outcome;
    let note = outcome.note;
    let status: Exclude<AgentStatus, "running">;
    if (reason === "text") status = "completed";
    else if (reason === "max_iterations") status = "max_turns";
    else if (reason === "error") status = "error";
    else if (run.stop === "timeout") status = "timeout";
    else if (run.stop === "budget") status = "budget_exhausted";
    else if (run.stop === "shutdown") status = "interrupted";
    else status = "cancelled";

    // This run is over: its own sub-agents stop with it.
    run.loop.abort();

    if ((status === "max_turns" || status === "timeout") && !run.hard.signal.aborted) {
      const limit =
        status === "max_turns"
          ? `its turn limit (${record.maxTurns} model turns)`
          : `its time limit (${Math.round(record.timeMs / 1000)} s)`;
      note = `Stopped at ${limit}; the response is what it produced by then${status === "max_turns" || status === "timeout" ? " plus one final answer" : ""}.`;
      const grace = new AbortController();
      const onHard = () => grace.abort();
      run.hard.signal.addEventListener("abort", onHard, { once: true });
      const graceTimer = setTimeout(() => grace.abort(), this.#graceTurnMs);
      graceTimer.unref?.();
      const before = response;
      response = "";
      try {
        transcript = await drive(
          runToolLoop({
            adapter: setup.adapter,
            model: setup.model,
            system,
            messages: [
              ...transcript,
              {
                role: "user",
                content: `[Toolhost] You reached ${limit}. You cannot call tools any more. Answer now with your final report: what you found or did so far, and what is left undone.`,
              },
            ],
            runtime: this.#runtime,
            userId: tree.userId,
            chatId: tree.chatId,
            workingDirectory: tree.workingDirectory,
            maxIterations: 1,
            signal: grace.signal,
            tools: [],
          }),
          transcript,
        );
      } finally {
        clearTimeout(graceTimer);
        run.hard.signal.removeEventListener("abort", onHard);
      }
      if (response.trim() === "") response = before;
    } else if (status === "budget_exhausted") {
      note = `Stopped: the agent tree used its token budget (${setup.limits.tokenBudget} tokens); the response is what it produced by then.`;
    } else if (status === "cancelled") {
      note =
        run.stop === "parent_finished"
          ? "Cancelled: the agent that spawned it finished its run; the response is what it produced by then."
          : "Cancelled; the response is what it produced by then.";
    } else if (status === "interrupted") {
      note = "The server stopped while this agent was running; its result is what it produced until then.";
    }

    usage.durationMs = elapsed();
    // A run woken by messages answers their senders (before its row is final, so whoever waits for it finds the
    // reply queued).
    if (run.wokenByMail && response.trim() !== "" && run.replyTo.size > 0) {
      const limits = tree.sendLimits;
      for (const sender of run.replyTo) {
        await this.#repo
          .enqueue({
            userId: tree.userId,
            rootId: record.rootId,
            senderId: record.id,
            targetId: sender,
            body: `[Reply] ${response}`.slice(0, limits?.messageMaxBytes ?? MESSAGE_MAX_BYTES),
            limits: { queueMax: limits?.queueMax ?? MESSAGE_QUEUE_MAX, pairRatePerMinute: Number.MAX_SAFE_INTEGER },
            skipRate: true,
          })
          .catch((error) => this.#logger?.warn({ err: String(error) }, "queueing an agent's reply failed"));
      }
    }
    usage.durationMs = elapsed();
    try {
      await this.#repo.finish(record.id, status, { result: response, note: note ?? null, transcript, usage }, fence);
    } catch (error) {
      // The tree moved to another instance (handed over, or taken over): this run's end is not its end there.
      if (isStale(error)) return;
      throw error;
    }
    agentSpawnsTotal.inc({ outcome: status });
    tree.emit({
      type: "agent_finished",
      agent: tag,
      status,
      response: response.slice(0, 4000),
      usage,
      ...(note ? { note } : {}),
    });
  }

  /** Stops every sub-agent of the tree running here (token budget spent). */
  #stopTree(tree: AgentTree, reason: StopReason): void {
    for (const run of this.#runs.values()) {
      if (run.tree === tree && run.record.kind === "child") this.#stop(run, reason);
    }
  }

  /** Starts a run for idle agents of the tree that have mail, while slots are free. */
  async #wakeIdle(tree: AgentTree): Promise<void> {
    if (!tree.open || this.#closed || !tree.limits) return;
    for (const agent of await this.#repo.idleWithMail(tree.rootId)) {
      if (this.#runs.has(agent.id)) continue;
      if (!(await this.#resume(tree, agent))) return;
    }
  }

  /** Resumes an idle agent in a new run (taking a running slot); false when it is not idle or no slot is free. */
  async #resume(tree: AgentTree, agent: AgentRecord): Promise<boolean> {
    const limits = tree.limits;
    if (!limits || !tree.open || this.#closed || agent.kind !== "child" || this.#runs.has(agent.id)) return false;
    if (!(await this.#repo.resume(agent.id, limits.maxConcurrent, this.instanceId))) return false;
    const parentRun = agent.parentId ? this.#runs.get(agent.parentId) : undefined;
    let template: AgentTemplate;
    try {
      template = this.#templates.get(agent.template);
    } catch {
      await this.#repo.finish(agent.id, "error", { note: `Template "${agent.template}" no longer exists.` });
      return true;
    }
    const provider = (agent.provider as ProviderName | null) ?? tree.provider;
    let adapter = tree.adapter;
    if (provider !== tree.provider) {
      try {
        adapter = tree.adapterFactory(provider, tree.env);
      } catch (error) {
        await this.#repo.finish(agent.id, "error", { note: (error as Error).message });
        return true;
      }
    }
    const parentTools = parentRun?.tools ?? this.#runs.get(tree.rootId)?.tools ?? new Set<string>();
    const names = new Set([...parentTools].filter((n) => template.tools === null || template.tools.includes(n)));
    if (agent.depth >= limits.maxDepth) for (const name of AGENT_TOOL_NAMES) names.delete(name);
    const transcript = (await this.#repo.transcript(tree.userId, agent.id)) as ConversationMessage[];
    const fresh = { ...agent, status: "running" as const };
    this.#startRun(parentRun, fresh, {
      adapter,
      model: agent.model ?? tree.model,
      template,
      tools: names,
      messages: transcript,
      limits,
      task: "(woken by a message)",
      wokenByMail: true,
    });
    return true;
  }

  /** Queues a message from `sender` (see AgentToolService.send); an idle target starts a run for it. */
  async send(
    sender: AgentRun,
    input: { targetAgentId: string; message: string },
    limits: AgentSendLimits,
  ): Promise<AgentSendResult> {
    const tree = sender.tree;
    tree.sendLimits = limits;
    const bytes = Buffer.byteLength(input.message, "utf8");
    if (bytes > limits.messageMaxBytes) {
      throw new LimitExceededError(
        `Message is ${bytes} bytes; MESSAGE_MAX_BYTES is ${limits.messageMaxBytes}. Shorten it or send the essentials.`,
        { limit: "MESSAGE_MAX_BYTES", value: limits.messageMaxBytes, argument: "message" },
      );
    }
    if (input.targetAgentId === sender.record.id) {
      throw new AccessDeniedError("An agent cannot send a message to itself.", { argument: "targetAgentId" });
    }
    const { messageId, queueDepth } = await this.#repo.enqueue({
      userId: tree.userId,
      rootId: sender.record.rootId,
      senderId: sender.record.id,
      targetId: input.targetAgentId,
      body: input.message,
      limits: { queueMax: limits.queueMax, pairRatePerMinute: limits.pairRatePerMinute },
    });
    let delivery: AgentSendResult["delivery"] = "queued";
    if (!this.#runs.has(input.targetAgentId)) {
      const target = await this.#repo.get(tree.userId, input.targetAgentId);
      if (target && target.kind === "child" && (await this.#resume(tree, target))) delivery = "started";
    }
    return { sent: true, targetAgentId: input.targetAgentId, messageId, queueDepth, delivery };
  }

  /** Waits for agents of `caller`'s subtree (see AgentToolService.wait). */
  async wait(
    caller: AgentRun,
    input: { agentIds?: string[]; timeoutMs: number },
    signal: AbortSignal,
  ): Promise<AgentWaitResult> {
    const userId = caller.tree.userId;
    let ids: string[];
    if (input.agentIds && input.agentIds.length > 0) {
      ids = [...new Set(input.agentIds)];
      for (const id of ids) {
        const agent = await this.#repo.get(userId, id);
        if (!agent || !isDescendant(caller.record, agent)) {
          throw new NotFoundError(
            `No sub-agent "${id}" below you. Wait only for agents you (or your sub-agents) spawned.`,
            {
              agentId: id,
            },
          );
        }
      }
    } else {
      ids = (await this.#repo.list(userId, { parentId: caller.record.id, limit: 1000 })).map((a) => a.id);
    }
    const deadline = Date.now() + input.timeoutMs;
    for (;;) {
      const agents = (await Promise.all(ids.map((id) => this.#repo.get(userId, id)))).filter(
        (a): a is AgentRecord => a !== undefined,
      );
      const running = agents.some((a) => a.status === "running");
      const remaining = deadline - Date.now();
      if (!running || remaining <= 0 || signal.aborted) {
        return {
          agents: agents.map((a) => ({
            agentId: a.id,
            status: a.status,
            response: a.result,
            usage: a.usage,
            ...(a.note ? { note: a.note } : {}),
          })),
          status: running ? "timed_out" : "done",
          timedOut: running,
        };
      }
      // Wake on any local run finishing, on the caller's cancel, or after a short poll (runs of other instances).
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#finishListeners.delete(done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, Math.min(remaining, 1000));
        timer.unref?.();
        this.#finishListeners.add(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** Closes a descendant of `caller` and its subtree (see AgentToolService.close). */
  async close(caller: AgentRun, agentId: string): Promise<AgentCloseResult> {
    const agent = await this.#repo.get(caller.tree.userId, agentId);
    if (!agent || !isDescendant(caller.record, agent)) {
      throw new NotFoundError(
        `No sub-agent "${agentId}" below you. Close only agents you (or your sub-agents) spawned.`,
        {
          agentId,
        },
      );
    }
    return this.#cancelSubtree(agent.userId, agent);
  }

  /**
   * Cancels an agent of the user and all its descendants (API and CLI). Throws NotFoundError for an unknown agent
   * or another user's.
   */
  async cancel(userId: string, agentId: string): Promise<AgentCloseResult> {
    const agent = await this.#repo.get(userId, agentId);
    if (agent?.kind !== "child") throw new NotFoundError(`No agent "${agentId}" for this user.`);
    return this.#cancelSubtree(userId, agent);
  }

  async #cancelSubtree(userId: string, agent: AgentRecord): Promise<AgentCloseResult> {
    const subtree = await this.#repo.subtree(userId, agent);
    const running = subtree.filter((a) => a.status === "running");
    const local = running.map((a) => this.#runs.get(a.id)).filter((r): r is AgentRun => r !== undefined);
    for (const run of local) this.#stop(run, "cancelled");
    // Runs of other instances stop there within a second (signal), or at their next heartbeat.
    for (const a of running) if (!this.#runs.has(a.id)) await this.#signals?.publish("agent_cancel", a.id);
    await this.#settle(local);
    const cancelled: string[] = [];
    for (const a of running) {
      // Runs that stopped here already wrote their final row; others (another instance's, or not yet stopped)
      // are marked now, which frees their slots; their instance stops them on the signal.
      await this.#repo.finish(a.id, "cancelled", { note: "Cancelled; the response is what it produced by then." });
      cancelled.push(a.id);
    }
    return { closed: true, agentId: agent.id, cancelled };
  }

  /** The user's sub-agents (newest first), optionally of one chat. */
  list(userId: string, filter: { chatId?: string; limit?: number } = {}): Promise<AgentRecord[]> {
    return this.#repo.list(userId, filter);
  }

  /** The user's agent with its conversation, or undefined (also for another user's agent). */
  async get(userId: string, agentId: string): Promise<(AgentRecord & { transcript: unknown[] }) | undefined> {
    const agent = await this.#repo.get(userId, agentId);
    if (!agent) return undefined;
    return { ...agent, transcript: await this.#repo.transcript(userId, agentId) };
  }

  /** Whether an agent runs in this process now. */
  isRunningHere(agentId: string): boolean {
    return this.#runs.has(agentId);
  }
}

/** The AgentToolService bound to one running agent. */
class AgentScope implements AgentToolService {
  readonly agentId: string;
  readonly depth: number;

  constructor(
    private readonly service: AgentService,
    private readonly run: AgentRun,
  ) {
    this.agentId = run.record.id;
    this.depth = run.record.depth;
  }

  spawn(input: { template: string; message: string; wait: boolean }, limits: AgentSpawnLimits, signal: AbortSignal) {
    return this.service.spawn(this.run, input, limits, signal);
  }

  send(input: { targetAgentId: string; message: string }, limits: AgentSendLimits) {
    return this.service.send(this.run, input, limits);
  }

  wait(input: { agentIds?: string[]; timeoutMs: number }, signal: AbortSignal) {
    return this.service.wait(this.run, input, signal);
  }

  close(agentId: string) {
    return this.service.close(this.run, agentId);
  }
}
