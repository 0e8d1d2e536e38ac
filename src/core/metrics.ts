/**
 * Tool metrics ("Metrics Wrapper"): every execution is counted by status and timed.
 *
 * - `tool_execution_total{tool,status}`: status is `success` or `failure`.
 * - `function_call_duration_ms{tool,status}`: histogram of execution time in milliseconds (kept for existing
 *   dashboards).
 * - `tool_execution_duration_seconds{tool,status}`: the same durations in seconds, as Prometheus naming
 *   conventions expect (base unit in the name, seconds).
 * All three carry the same label set, so they can be joined and divided.
 *
 * Served in Prometheus text format by the HTTP service at `/metrics`.
 */
import { Counter, Histogram, Registry } from "prom-client";

/** The Prometheus registry holding Toolhost's metrics. */
export const metricsRegistry = new Registry();

/** Count of tool executions by tool and status (success | failure). */
export const toolExecutionTotal = new Counter({
  name: "tool_execution_total",
  help: "Tool executions by tool and status (success or failure).",
  labelNames: ["tool", "status"] as const,
  registers: [metricsRegistry],
});

/** Tool execution time in milliseconds. */
export const functionCallDurationMs = new Histogram({
  name: "function_call_duration_ms",
  help: "Tool execution duration in milliseconds, by tool and status.",
  labelNames: ["tool", "status"] as const,
  buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 600000],
  registers: [metricsRegistry],
});

/** Tool execution time in seconds (Prometheus base unit), by tool and status. */
export const toolExecutionDurationSeconds = new Histogram({
  name: "tool_execution_duration_seconds",
  help: "Tool execution duration in seconds, by tool and status (success or failure).",
  labelNames: ["tool", "status"] as const,
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600],
  registers: [metricsRegistry],
});

/** Tool results cut by the runtime's output cap (full output spilled), by tool. */
export const toolOutputTruncatedTotal = new Counter({
  name: "tool_output_truncated_total",
  help: "Tool results cut to the output cap (the full output went to a spill file), by tool.",
  labelNames: ["tool"] as const,
  registers: [metricsRegistry],
});

/**
 * Runs `fn`, recording its duration and whether it succeeded. `isFailure` decides failure for functions that
 * report failure in their return value rather than by throwing. Rethrows what `fn` throws.
 */
export async function withToolMetrics<T>(
  tool: string,
  fn: () => Promise<T>,
  isFailure?: (value: T) => boolean,
): Promise<T> {
  const started = performance.now();
  let failed = true;
  try {
    const value = await fn();
    failed = isFailure ? isFailure(value) : false;
    return value;
  } finally {
    const ms = performance.now() - started;
    const labels = { tool, status: failed ? "failure" : "success" };
    functionCallDurationMs.observe(labels, ms);
    toolExecutionDurationSeconds.observe(labels, ms / 1000);
    toolExecutionTotal.inc(labels);
  }
}
