/**
 * Sub-agent trees at run time: a chat turn is the root agent of a tree; agent_spawn creates children that run
 * their own tool loop with the provider adapter factory of the chat, within limits reserved atomically in the
 * database before any model call. Lineage, quotas and queues live in the database (AgentRepository); the running
 * loops, their AbortControllers and the event stream live here.
 *
 * Cancellation follows the tree: each run has a controller linked to its parent's, so cancelling a chat turn,
 * closing an agent, a parent's time limit or a parent's run ending stops every descendant's model stream and tool
 * processes. A run cut short by its turn or time limit gets one short grace turn (no tools) to answer.
 *
 * This is the room's facade; the work lives in run.ts (an agent's loop), spawn.ts (spawn, takeover), mail.ts
 * (send, wait, delivery) and liveness.ts (heartbeat, sweep, cancel).
 */
import {
  AGENT_GRACE_TURN_MS,
  type AgentCloseResult,
  type AgentSendLimits,
  type AgentSendResult,
  type AgentSpawnLimits,
  type AgentSpawnResult,
  type AgentToolService,
  type AgentWaitResult,
} from "../core/agents.js";
import { NotFoundError, quote, shorten } from "../core/errors.js";
import { newInstanceId } from "../core/instance.js";
import type { AgentRecord } from "../storage/agent-records.js";
import { type AgentHost, defaultSystemPrompt, isDescendant, isStale, linkRun, settleRuns, stopRun } from "./host.js";
import { cancelSubtree, heartbeat, sweep } from "./liveness.js";
import { incoming, send, waitFor } from "./mail.js";
import { resumeIdle } from "./run.js";
import { spawn, takeOver } from "./spawn.js";
import type { AgentTemplateCatalog } from "./templates.js";
import type { AgentRun, AgentServiceOptions, AgentTree, AgentTurn, OpenTurnOptions } from "./types.js";

export type {
  AgentAdapterFactory,
  AgentRun,
  AgentRunState,
  AgentServiceOptions,
  AgentSignals,
  AgentStreamEvent,
  AgentTag,
  AgentTree,
  AgentTurn,
  OpenTurnOptions,
  StopReason,
  TreeJournal,
} from "./types.js";

/** Runs and tracks sub-agent trees over an AgentRepository. */
export class AgentService {
  readonly instanceId: string;
  readonly #host: AgentHost;
  readonly #heartbeatMs: number;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: AgentServiceOptions) {
    this.instanceId = options.instanceId ?? newInstanceId();
    this.#heartbeatMs = options.heartbeatMs ?? 15_000;
    this.#host = {
      instanceId: this.instanceId,
      repo: options.repository,
      runtime: options.runtime,
      templates: options.templates,
      logger: options.logger,
      staleAfterMs: options.staleAfterMs ?? 60_000,
      graceTurnMs: options.graceTurnMs ?? AGENT_GRACE_TURN_MS,
      settleMs: options.settleMs ?? 2_000,
      signals: options.signals,
      runs: new Map<string, AgentRun>(),
      finishListeners: new Set<() => void>(),
      closed: false,
      scopeOf: (run) => new AgentScope(this, run),
    };
    options.signals?.subscribe((signal) => {
      if (signal.kind !== "agent_cancel") return;
      const run = this.#host.runs.get(signal.target);
      if (run && run.record.kind === "child") stopRun(run, "cancelled");
    });
  }

  /** The template catalog (for listing). */
  get templates(): AgentTemplateCatalog {
    return this.#host.templates;
  }

  /**
   * Marks `interrupted` the running agents of instances that stopped (heartbeat older than staleAfterMs), and
   * starts this instance's heartbeat. Returns the ids marked.
   */
  async start(): Promise<string[]> {
    const marked = await sweep(this.#host);
    if (!this.#timer && this.#heartbeatMs > 0) {
      this.#timer = setInterval(() => {
        void heartbeat(this.#host).catch((error) =>
          this.#host.logger?.warn({ err: String(error) }, "agent heartbeat failed"),
        );
      }, this.#heartbeatMs);
      this.#timer.unref?.();
    }
    return marked;
  }

  /**
   * Stops this instance: every running agent is stopped. Agents of a turn this instance handed over (their tree is
   * durable and its lease moved on) stay running for the instance that takes the turn over; the others are marked
   * `interrupted` with what they produced so far.
   */
  async shutdown(): Promise<void> {
    this.#host.closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    const runs = [...this.#host.runs.values()];
    for (const run of runs) stopRun(run, "shutdown");
    // Sub-agents stop here; a root settles when its chat turn ends, which its own caller drives.
    await settleRuns(
      this.#host,
      runs.filter((r) => r.record.kind === "child"),
    );
    await this.#host.repo.interrupt({ instanceId: this.instanceId }).catch(() => []);
  }

  /** Opens the tree of a chat turn: records its root agent and returns what the turn's loop needs. */
  async openTurn(options: OpenTurnOptions): Promise<AgentTurn> {
    const journal = options.journal;
    const adopted =
      journal && options.adoptRootId
        ? await this.#host.repo.adopt(options.adoptRootId, this.instanceId, journal.fence)
        : [];
    const root =
      adopted[0]?.kind === "root" && adopted[0].id === options.adoptRootId
        ? adopted[0]
        : await this.#host.repo.createRoot({
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
          this.#host.logger?.warn({ err: String(error) }, "agent event listener threw");
        }
      },
      systemPrompt: options.systemPrompt ?? defaultSystemPrompt,
      ...(options.gate ? { gate: options.gate } : {}),
      ...(journal ? { journal } : {}),
      open: true,
    };
    const enabled = await this.#host.runtime.getEnabledToolRuntime(options.userId);
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
    linkRun(run, options.signal);
    this.#host.runs.set(root.id, run);
    const scope = new AgentScope(this, run);
    let finished = false;
    // A turn taken over: its running sub-agents continue here, parents before children.
    for (const agent of adopted) if (agent.kind === "child") await takeOver(this.#host, tree, agent);
    return {
      rootId: root.id,
      services: { agents: scope },
      beforeModelTurn: () => incoming(this.#host, run),
      recordUsage: async (input, output) => {
        await this.#host.repo.addTokens(root.id, root.id, input, output);
      },
      finish: async (status) => {
        if (finished) return;
        finished = true;
        tree.open = false;
        // The turn is over: sub-agents still running have no one to answer to.
        const descendants = [...this.#host.runs.values()].filter((r) => r.tree === tree && r !== run);
        run.loop.abort();
        await settleRuns(this.#host, descendants);
        // Rows of runs that did not stop in time are marked anyway (their loops end on their own shortly).
        for (const r of descendants) {
          if (this.#host.runs.has(r.record.id)) {
            await this.#host.repo
              .finish(r.record.id, "cancelled", { note: "The chat turn ended." }, journal?.fence)
              .catch(() => false);
          }
        }
        // Fenced: a turn handed over (or taken from this instance) keeps its tree running for its new owner.
        const ended = await this.#host.repo
          .finish(root.id, status, {}, journal?.fence)
          .catch((error) => !isStale(error));
        if (journal && ended) {
          await journal
            .drop(await this.#host.repo.treeIds(root.id))
            .catch((error) => this.#host.logger?.warn({ err: String(error) }, "dropping the agent journals failed"));
        }
        this.#host.runs.delete(root.id);
        settle();
      },
    };
  }

  /** Spawns a child of `parent` (see AgentToolService.spawn). */
  spawn(
    parent: AgentRun,
    input: { template: string; message: string; wait: boolean; callId?: string },
    limits: AgentSpawnLimits,
    signal: AbortSignal,
  ): Promise<AgentSpawnResult> {
    return spawn(this.#host, parent, input, limits, signal);
  }

  /** Queues a message from `sender` (see AgentToolService.send); an idle target starts a run for it. */
  send(
    sender: AgentRun,
    input: { targetAgentId: string; message: string },
    limits: AgentSendLimits,
  ): Promise<AgentSendResult> {
    return send(this.#host, sender, input, limits, (tree, agent) => resumeIdle(this.#host, tree, agent));
  }

  /** Waits for agents of `caller`'s subtree (see AgentToolService.wait). */
  wait(
    caller: AgentRun,
    input: { agentIds?: string[]; timeoutMs: number },
    signal: AbortSignal,
  ): Promise<AgentWaitResult> {
    return waitFor(this.#host, caller, input, signal);
  }

  /** Closes a descendant of `caller` and its subtree (see AgentToolService.close). */
  async close(caller: AgentRun, agentId: string): Promise<AgentCloseResult> {
    const agent = await this.#host.repo.get(caller.tree.userId, agentId);
    if (!agent || !isDescendant(caller.record, agent)) {
      throw new NotFoundError(
        `No sub-agent ${quote(agentId)} below you. Close only agents you (or your sub-agents) spawned.`,
        {
          agentId: shorten(agentId),
        },
      );
    }
    return cancelSubtree(this.#host, agent.userId, agent);
  }

  /**
   * Cancels an agent of the user and all its descendants (API and CLI). Throws NotFoundError for an unknown agent
   * or another user's.
   */
  async cancel(userId: string, agentId: string): Promise<AgentCloseResult> {
    const agent = await this.#host.repo.get(userId, agentId);
    if (agent?.kind !== "child") throw new NotFoundError(`No agent ${quote(agentId)} for this user.`);
    return cancelSubtree(this.#host, userId, agent);
  }

  /** The user's sub-agents (newest first), optionally of one chat. */
  list(userId: string, filter: { chatId?: string; limit?: number } = {}): Promise<AgentRecord[]> {
    return this.#host.repo.list(userId, filter);
  }

  /** The user's agent with its conversation, or undefined (also for another user's agent). */
  async get(userId: string, agentId: string): Promise<(AgentRecord & { transcript: unknown[] }) | undefined> {
    const agent = await this.#host.repo.get(userId, agentId);
    if (!agent) return undefined;
    return { ...agent, transcript: await this.#host.repo.transcript(userId, agentId) };
  }

  /** Whether an agent runs in this process now. */
  isRunningHere(agentId: string): boolean {
    return this.#host.runs.has(agentId);
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
