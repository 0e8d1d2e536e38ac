/**
 * Liveness of agents across instances: this instance's heartbeat, the sweep that marks `interrupted` the running
 * agents of instances that are gone, stopping a tree (token budget spent) and cancelling a subtree (here, and on
 * other instances through the signal bus).
 */
import type { AgentCloseResult } from "../core/agents.js";
import { ownerIsGone } from "../core/instance.js";
import type { AgentRecord } from "../storage/agent-records.js";
import { type AgentHost, settleRuns, stopRun } from "./host.js";
import type { AgentRun, AgentTree, StopReason } from "./types.js";

/**
 * Marks `interrupted` the running agents of instances that are gone: at once for an instance of this machine
 * whose process no longer exists (a restart after a crash), else once its heartbeat is older than staleAfterMs on
 * the database's clock (another machine, or a pid reused meanwhile).
 */
export async function sweep(host: AgentHost): Promise<string[]> {
  const marked: string[] = [];
  for (const instance of await host.repo.runningInstances()) {
    if (instance === host.instanceId || !ownerIsGone(instance)) continue;
    marked.push(...(await host.repo.interrupt({ instanceId: instance })));
  }
  marked.push(...(await host.repo.interrupt({ exceptInstance: host.instanceId, staleForMs: host.staleAfterMs })));
  return marked;
}

/** Writes this instance's heartbeat, sweeps gone instances, and stops runs cancelled elsewhere. */
export async function heartbeat(host: AgentHost): Promise<void> {
  await host.repo.heartbeat(host.instanceId);
  await sweep(host);
  // Agents cancelled through another instance (or the API of one) stop here too.
  const stopped = await host.repo.stoppedElsewhere([...host.runs.keys()]);
  for (const id of stopped) {
    const run = host.runs.get(id);
    if (run && run.record.kind === "child") stopRun(run, "cancelled");
  }
}

/** Stops every sub-agent of the tree running here (token budget spent). */
export function stopTree(host: AgentHost, tree: AgentTree, reason: StopReason): void {
  for (const run of host.runs.values()) {
    if (run.tree === tree && run.record.kind === "child") stopRun(run, reason);
  }
}

/** Cancels an agent and its subtree: runs here stop, runs elsewhere are signalled, and every row is marked. */
export async function cancelSubtree(host: AgentHost, userId: string, agent: AgentRecord): Promise<AgentCloseResult> {
  const subtree = await host.repo.subtree(userId, agent);
  const running = subtree.filter((a) => a.status === "running");
  const local = running.map((a) => host.runs.get(a.id)).filter((r): r is AgentRun => r !== undefined);
  for (const run of local) stopRun(run, "cancelled");
  // Runs of other instances stop there within a second (signal), or at their next heartbeat.
  for (const a of running) if (!host.runs.has(a.id)) await host.signals?.publish("agent_cancel", a.id);
  await settleRuns(host, local);
  const cancelled: string[] = [];
  for (const a of running) {
    // Runs that stopped here already wrote their final row; others (another instance's, or not yet stopped)
    // are marked now, which frees their slots; their instance stops them on the signal.
    await host.repo.finish(a.id, "cancelled", { note: "Cancelled; the response is what it produced by then." });
    cancelled.push(a.id);
  }
  return { closed: true, agentId: agent.id, cancelled };
}
