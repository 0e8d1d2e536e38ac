/**
 * Running a sub-agent: its tool loop (tools, system prompt, limits, mail before each model turn, token budget, the
 * grace turn after a turn or time limit), its final row and events, and waking idle agents that got mail.
 */
import {
  AGENT_TOOL_NAMES,
  type AgentSpawnLimits,
  type AgentStatus,
  type AgentUsage,
  MESSAGE_MAX_BYTES,
  MESSAGE_QUEUE_MAX,
} from "../core/agents.js";
import { cutMarker, headOf, utf8Bytes } from "../core/cut-rules.js";
import { withAgentSpan } from "../core/tracing.js";
import type { ToolDefinition } from "../core/types.js";
import type { LoopEvent } from "../loop/events.js";
import type { LoopStepSnapshot } from "../loop/gate.js";
import { runToolLoop } from "../loop/run-tool-loop.js";
import type { ConversationMessage, ProviderAdapter, ProviderName } from "../providers/types.js";
import type { AgentRecord } from "../storage/agent-records.js";
import { type AgentHost, isStale, linkRun, stopRun, tagOf } from "./host.js";
import { stopTree } from "./liveness.js";
import { incoming } from "./mail.js";
import { agentSpawnsTotal, agentsActive } from "./metrics.js";
import type { AgentTemplate } from "./templates.js";
import type { AgentRun, AgentRunState, AgentTree } from "./types.js";

/** What a run of an agent is started with. */
export interface RunSetup {
  adapter: ProviderAdapter;
  model: string;
  template: AgentTemplate;
  tools: Set<string>;
  messages: ConversationMessage[];
  limits: AgentSpawnLimits;
  /** Resuming a run taken over from another instance: the step to resume (when a call had started). */
  resume?: LoopStepSnapshot;
  takenOver?: boolean;
}

/** The adapter for `provider` in `tree`: the tree's own for its provider, else a new one (throws what the factory throws). */
export function adapterFor(tree: AgentTree, provider: ProviderName): ProviderAdapter {
  return provider === tree.provider ? tree.adapter : tree.adapterFactory(provider, tree.env);
}

/** A stored agent's template and adapter, or why it cannot run now (its template is gone, its provider unconfigured). */
export function storedAgentSetup(
  host: AgentHost,
  tree: AgentTree,
  agent: AgentRecord,
): { template: AgentTemplate; adapter: ProviderAdapter } | { error: string } {
  let template: AgentTemplate;
  try {
    template = host.templates.get(agent.template);
  } catch {
    return { error: `Template "${agent.template}" no longer exists.` };
  }
  try {
    return { template, adapter: adapterFor(tree, (agent.provider as ProviderName | null) ?? tree.provider) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Starts a run of a reserved (running) agent in the background; returns it. */
export function startRun(
  host: AgentHost,
  parent: AgentRun | undefined,
  record: AgentRecord,
  setup: RunSetup & { task: string; wokenByMail?: boolean },
): AgentRun {
  const tree = (parent?.tree ?? host.runs.get(record.rootId)?.tree) as AgentTree;
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
  const parentRun = parent ?? (record.parentId ? host.runs.get(record.parentId) : undefined);
  const linkTo = parentRun ?? host.runs.get(record.rootId);
  linkRun(run, linkTo?.loop.signal, linkTo);
  host.runs.set(record.id, run);
  agentsActive.inc();
  tree.emit({ type: "agent_started", agent: tagOf(record), task: setup.task.slice(0, 2000) });
  void withAgentSpan(
    { name: record.template, id: record.id, model: setup.model, conversationId: record.chatId ?? undefined },
    () => execute(host, run, setup),
  )
    .catch(async (error) => {
      run.loop.abort();
      // The tree moved to another instance: the run goes on there.
      if (isStale(error)) return;
      host.logger?.error({ err: (error as Error)?.stack ?? String(error), agentId: record.id }, "agent run failed");
      // Whatever failed, the run is over: its row must not stay running (that would hold a slot forever).
      const note = `The agent's run failed inside Toolhost: ${(error as Error)?.message ?? String(error)}`;
      if (await host.repo.finish(record.id, "error", { note }, tree.journal?.fence).catch(() => false)) {
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
      host.runs.delete(record.id);
      agentsActive.dec();
      settle();
      for (const listener of [...host.finishListeners]) listener();
      void wakeIdle(host, tree).catch(() => {});
    });
  return run;
}

/**
 * The one place a sub-agent's tool loop is built and driven (approval routing and other per-loop wiring go
 * here): its tools, system prompt, limits, the queue delivery before each model turn, the token budget, and the
 * grace turn after a turn or time limit.
 */
export async function execute(host: AgentHost, run: AgentRun, setup: RunSetup): Promise<void> {
  const { record, tree } = run;
  const started = performance.now();
  const usage: AgentUsage = { ...record.usage };
  const priorDuration = usage.durationMs;
  const journal = tree.journal;
  const fence = journal?.fence;
  // A run taken over keeps the time it had left (at least a second).
  const timeLeft = setup.takenOver ? Math.max(1000, record.timeMs - priorDuration) : record.timeMs;
  const timer = setTimeout(() => stopRun(run, "timeout"), timeLeft);
  timer.unref?.();
  const scope = host.scopeOf(run);
  const system = tree.systemPrompt(setup.template, record);
  const enabled = await host.runtime.getEnabledToolRuntime(tree.userId);
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
    const total = await host.repo.addTokens(record.id, record.rootId, input, output);
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
            host.logger?.warn({ err: String(error) }, "recording agent tokens failed"),
          );
          break;
        case "finish":
          if (current.trim() !== "") response = current;
          current = "";
          if (budgetSpent) stopTree(host, tree, "budget");
          await host.repo
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
        runtime: host.runtime,
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
          const messages = await incoming(host, run);
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
    const graceTimer = setTimeout(() => grace.abort(), host.graceTurnMs);
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
          runtime: host.runtime,
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
      await host.repo
        .enqueue({
          userId: tree.userId,
          rootId: record.rootId,
          senderId: record.id,
          targetId: sender,
          body: replyBody(response, limits?.messageMaxBytes ?? MESSAGE_MAX_BYTES),
          limits: { queueMax: limits?.queueMax ?? MESSAGE_QUEUE_MAX, pairRatePerMinute: Number.MAX_SAFE_INTEGER },
          reply: true,
        })
        .catch((error) => host.logger?.warn({ err: String(error) }, "queueing an agent's reply failed"));
    }
  }
  usage.durationMs = elapsed();
  try {
    await host.repo.finish(record.id, status, { result: response, note: note ?? null, transcript, usage }, fence);
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

/**
 * The message that answers a woken run's senders: `[Reply] ` and its response, within `maxBytes` of UTF-8 — a longer
 * one keeps its head and ends with the cut marker (never a split character).
 */
export function replyBody(response: string, maxBytes: number): string {
  const full = `[Reply] ${response}`;
  const total = utf8Bytes(full);
  if (total <= maxBytes) return full;
  const reserve = utf8Bytes(cutMarker({ bytes: total })) + 1;
  if (reserve >= maxBytes) return headOf(full, maxBytes, Number.MAX_SAFE_INTEGER, true);
  const head = headOf(full, maxBytes - reserve, Number.MAX_SAFE_INTEGER, true);
  return `${head}\n${cutMarker({ bytes: total - utf8Bytes(head) })}`;
}

/** Starts a run for idle agents of the tree that have mail, while slots are free. */
export async function wakeIdle(host: AgentHost, tree: AgentTree): Promise<void> {
  if (!tree.open || host.closed || !tree.limits) return;
  for (const agent of await host.repo.idleWithMail(tree.rootId)) {
    if (host.runs.has(agent.id)) continue;
    if (!(await resumeIdle(host, tree, agent))) return;
  }
}

/**
 * The tools an agent of `depth` is offered: its parent's tools intersected with its template's, without the agent
 * tools at the depth limit. The one rule of a sub-agent's tools (a spawn and a woken run both apply it).
 */
export function offeredTools(
  parentTools: Iterable<string>,
  template: Pick<AgentTemplate, "tools">,
  depth: number,
  maxDepth: number,
): Set<string> {
  const names = new Set([...parentTools].filter((name) => template.tools === null || template.tools.includes(name)));
  if (depth >= maxDepth) for (const name of AGENT_TOOL_NAMES) names.delete(name);
  return names;
}

/**
 * The tools of a stored agent, derived from its whole lineage: the root's tools narrowed by every ancestor's template
 * and then its own (see offeredTools), so a run that starts while its parent's is over (woken by a message) gets no
 * tool one of its ancestors lacked. An ancestor whose template is gone offers nothing.
 */
export async function lineageTools(
  host: AgentHost,
  tree: AgentTree,
  agent: AgentRecord,
  maxDepth: number,
): Promise<Set<string>> {
  let tools: Set<string> = new Set(host.runs.get(tree.rootId)?.tools ?? []);
  for (const id of agent.path.split("/").slice(1)) {
    const record = id === agent.id ? agent : await host.repo.get(tree.userId, id);
    let template: Pick<AgentTemplate, "tools">;
    try {
      if (!record) throw new Error("gone");
      template = host.templates.get(record.template);
    } catch {
      template = { tools: [] };
    }
    tools = offeredTools(tools, template, record?.depth ?? agent.depth, maxDepth);
  }
  return tools;
}

/**
 * Resumes an idle agent in a new run (taking a running slot); false when it is not idle, no slot is free or the
 * tree's token budget is spent.
 */
export async function resumeIdle(host: AgentHost, tree: AgentTree, agent: AgentRecord): Promise<boolean> {
  const limits = tree.limits;
  if (!limits || !tree.open || host.closed || agent.kind !== "child" || host.runs.has(agent.id)) return false;
  if (!(await host.repo.resume(agent.id, limits, host.instanceId))) return false;
  const parentRun = agent.parentId ? host.runs.get(agent.parentId) : undefined;
  // From here the agent holds a running slot: whatever fails before its run starts ends it, freeing the slot.
  const fail = async (note: string) => {
    await host.repo.finish(agent.id, "error", { note }, tree.journal?.fence).catch(() => false);
  };
  const setup = storedAgentSetup(host, tree, agent);
  if ("error" in setup) {
    await fail(setup.error);
    return true;
  }
  const { template, adapter } = setup;
  let names: Set<string>;
  let transcript: ConversationMessage[];
  try {
    names = await lineageTools(host, tree, agent, limits.maxDepth);
    transcript = (await host.repo.transcript(tree.userId, agent.id)) as ConversationMessage[];
  } catch (error) {
    host.logger?.error({ err: String(error), agentId: agent.id }, "waking an agent failed");
    await fail(`The agent could not be woken: ${(error as Error)?.message ?? String(error)}`);
    return true;
  }
  const fresh = { ...agent, status: "running" as const };
  startRun(host, parentRun, fresh, {
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
