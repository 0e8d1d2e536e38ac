/**
 * Starting sub-agents: agent_spawn (limits reserved in the database before any model call), the answer of a spawn
 * run again after a takeover, and resuming here the running agents of a turn taken over from another instance.
 */
import type { AgentSpawnLimits, AgentSpawnResult } from "../core/agents.js";
import { AccessDeniedError, NotFoundError, ToolError, ToolExecutionError } from "../core/errors.js";
import { providerEntry } from "../providers/table.js";
import type { ProviderAdapter, ProviderName } from "../providers/types.js";
import type { AgentRecord } from "../storage/agent-records.js";
import { type AgentHost, tagOf, ZERO_USAGE } from "./host.js";
import { waitFor } from "./mail.js";
import { agentSpawnsTotal } from "./metrics.js";
import { adapterFor, offeredTools, startRun, storedAgentSetup } from "./run.js";
import type { AgentRun, AgentTree } from "./types.js";

/** Spawns a child of `parent` (see AgentToolService.spawn). */
export async function spawn(
  host: AgentHost,
  parent: AgentRun,
  input: { template: string; message: string; wait: boolean; callId?: string },
  limits: AgentSpawnLimits,
  signal: AbortSignal,
): Promise<AgentSpawnResult> {
  const tree = parent.tree;
  if (!tree.open || host.closed) {
    throw new AccessDeniedError("This agent tree has ended; start a new chat turn to spawn agents.");
  }
  const journal = tree.journal;
  const callId = input.callId;
  if (journal && callId) {
    // The same call run again after a takeover: the agent it spawned before is the answer, not a new one.
    const spawned = await journal.spawned(parent.record.id, callId);
    if (spawned) return attach(host, parent, spawned, input.wait, signal);
  }
  const template = host.templates.get(input.template);
  const provider = (template.provider as ProviderName | null) ?? tree.provider;
  // A template of another provider without a model gets that provider's default model (the provider table's).
  const model = template.model ?? (provider === tree.provider ? tree.model : providerEntry(provider).defaultModel);
  let adapter: ProviderAdapter;
  try {
    adapter = adapterFor(tree, provider);
  } catch (error) {
    throw new ToolExecutionError(
      `Template "${template.id}" needs provider ${provider}, which is not configured: ${(error as Error).message}`,
    );
  }
  const depth = parent.record.depth + 1;
  const names = offeredTools(parent.tools, template, depth, limits.maxDepth);
  const maxTurns = Math.min(template.maxTurns ?? limits.maxTurns, limits.maxTurns);
  const timeMs = Math.min(template.timeSeconds ?? limits.timeSeconds, limits.timeSeconds) * 1000;
  tree.limits = limits;
  let record: AgentRecord;
  try {
    record = await host.repo.reserveChild({
      userId: tree.userId,
      parentId: parent.record.id,
      template: template.id,
      task: input.message,
      provider,
      model,
      maxTurns,
      timeMs,
      instanceId: host.instanceId,
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
  const run = startRun(host, parent, record, {
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
  const final = (await host.repo.get(tree.userId, record.id)) ?? record;
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
export async function attach(
  host: AgentHost,
  parent: AgentRun,
  agentId: string,
  wait: boolean,
  signal: AbortSignal,
): Promise<AgentSpawnResult> {
  let agent = await host.repo.get(parent.tree.userId, agentId);
  if (!agent) throw new NotFoundError(`The agent this call spawned (${agentId}) no longer exists.`);
  if (wait && agent.status === "running") {
    const local = host.runs.get(agentId);
    if (local) {
      await Promise.race([
        local.settled,
        new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          else signal.addEventListener("abort", () => resolve(), { once: true });
        }),
      ]);
    } else {
      await waitFor(host, parent, { agentIds: [agentId], timeoutMs: agent.timeMs + host.graceTurnMs }, signal);
    }
    agent = (await host.repo.get(parent.tree.userId, agentId)) ?? agent;
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
export async function takeOver(host: AgentHost, tree: AgentTree, agent: AgentRecord): Promise<void> {
  const journal = tree.journal;
  if (!journal) return;
  const fail = async (status: "interrupted" | "error", note: string) => {
    if (await host.repo.finish(agent.id, status, { note }, journal.fence).catch(() => false)) {
      tree.emit({ type: "agent_finished", agent: tagOf(agent), status, response: "", usage: agent.usage, note });
    }
  };
  const state = await journal.resume(agent.id);
  if (state?.version !== 1) {
    await fail("interrupted", "The server running this agent stopped before it started; it was not resumed.");
    return;
  }
  const setup = storedAgentSetup(host, tree, agent);
  if ("error" in setup) {
    await fail("error", setup.error);
    return;
  }
  const { template, adapter } = setup;
  tree.limits ??= state.limits;
  host.logger?.info({ agentId: agent.id, rootId: agent.rootId }, "taking over a running agent");
  startRun(host, agent.parentId ? host.runs.get(agent.parentId) : undefined, agent, {
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
