/**
 * Tool metrics (002_b22707b29eca2f2a.txt, "Metrics Wrapper"): every execution is counted by status and timed.
 *
 * - `tool_execution_total{tool,status}`: status is `success` or `failure`.
 * - `function_call_duration_ms{tool}`: histogram of execution time in milliseconds.
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
  help: "Tool execution duration in milliseconds.",
  labelNames: ["tool"] as const,
  buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 600000],
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
    functionCallDurationMs.observe({ tool }, performance.now() - started);
    toolExecutionTotal.inc({ tool, status: failed ? "failure" : "success" });
  }
}
