/**
 * Sub-agent metrics, served with the tool metrics at `/metrics`:
 * - `agent_spawns_total{outcome}`: spawns by how their run ended (completed, max_turns, timeout, budget_exhausted,
 *   cancelled, error, interrupted) or `refused` when a limit refused the spawn;
 * - `agents_active`: sub-agents running in this process now.
 */
// One class per module, as in core/metrics.ts (prom-client's index loads much more at import).
import Counter from "prom-client/lib/counter.js";
import Gauge from "prom-client/lib/gauge.js";
import { metricsRegistry } from "../core/metrics.js";

/** Spawns by outcome. */
export const agentSpawnsTotal = new Counter({
  name: "agent_spawns_total",
  help: "Sub-agent spawns by outcome (how the run ended, or refused by a limit).",
  labelNames: ["outcome"] as const,
  registers: [metricsRegistry],
});

/** Sub-agents running in this process. */
export const agentsActive = new Gauge({
  name: "agents_active",
  help: "Sub-agents running in this process now.",
  registers: [metricsRegistry],
});
