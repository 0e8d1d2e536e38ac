/**
 * The state an AgentService shares with its run, mail and liveness modules (the runs of this process, its
 * dependencies and knobs), and the small operations on a run they all use: stop, link to a parent, settle.
 */
import type { AgentToolService, AgentUsage } from "../core/agents.js";
import type { ToolRuntime } from "../core/runtime.js";
import type { Logger } from "../core/types.js";
import type { AgentRecord } from "../storage/agent-records.js";
import type { AgentRepository } from "../storage/agent-repository.js";
import type { AgentTemplate, AgentTemplateCatalog } from "./templates.js";
import type { AgentRun, AgentSignals, AgentTag, StopReason } from "./types.js";

/** What an AgentService's modules share (internal to src/agents/). */
export interface AgentHost {
  readonly instanceId: string;
  readonly repo: AgentRepository;
  readonly runtime: ToolRuntime;
  readonly templates: AgentTemplateCatalog;
  readonly logger: Logger | undefined;
  readonly staleAfterMs: number;
  readonly graceTurnMs: number;
  readonly settleMs: number;
  readonly signals: AgentSignals | undefined;
  /** The agents running in this process, by id. */
  readonly runs: Map<string, AgentRun>;
  /** Called whenever a local run finished (waits poll on them). */
  readonly finishListeners: Set<() => void>;
  /** Set by shutdown: no new runs start. */
  closed: boolean;
  /** The AgentToolService a run's tools get (bound to that run). */
  scopeOf(run: AgentRun): AgentToolService;
}

/** Whether an error is a refused write of a stale owner (the tree moved to another instance). */
export function isStale(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "lease_lost";
}

export const ZERO_USAGE: AgentUsage = { inputTokens: 0, outputTokens: 0, turns: 0, toolCalls: 0, durationMs: 0 };

export function tagOf(record: AgentRecord): AgentTag {
  return {
    id: record.id,
    parentId: record.parentId,
    depth: record.depth,
    path: record.path,
    template: record.template,
  };
}

export function isDescendant(ancestor: Pick<AgentRecord, "path">, agent: Pick<AgentRecord, "path">): boolean {
  return agent.path.startsWith(`${ancestor.path}/`);
}

/** The default system prompt of a sub-agent: its template's prompt and who it is. */
export function defaultSystemPrompt(template: AgentTemplate, agent: AgentRecord): string {
  return `${template.systemPrompt}\n\nYour agent id is ${agent.id} (depth ${agent.depth}); agent ${agent.parentId} spawned you.`;
}

export function stopRun(run: AgentRun, reason: StopReason): void {
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

/**
 * Links a run's controllers: `hard` aborts `loop`, and the parent's signal stops the run — with the reason the
 * parent was stopped for (a chat cancel cancels, a shutdown interrupts, a spent budget exhausts), or
 * `parent_finished` when the parent's run simply ended.
 */
export function linkRun(run: AgentRun, parent: AbortSignal | undefined, parentRun?: AgentRun): void {
  run.hard.signal.addEventListener("abort", () => run.loop.abort(), { once: true });
  if (!parent) return;
  const reason = (): StopReason => {
    if (!parentRun) return "cancelled";
    if (parentRun.stop === undefined) return "parent_finished";
    if (parentRun.stop === "shutdown" || parentRun.stop === "budget") return parentRun.stop;
    return "cancelled";
  };
  const onParent = () => stopRun(run, reason());
  if (parent.aborted) onParent();
  else parent.addEventListener("abort", onParent, { once: true });
  // Drop the listener once this run is over, so long-lived parents do not accumulate them.
  void run.settled.then(() => parent.removeEventListener("abort", onParent));
}

/** Waits until the runs settled, at most settleMs. */
export async function settleRuns(host: AgentHost, runs: AgentRun[]): Promise<void> {
  if (runs.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(runs.map((r) => r.settled)),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, host.settleMs);
      timer.unref?.();
    }),
  ]);
  clearTimeout(timer);
}
