/**
 * Tool metrics: every execution is counted by status and timed.
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
// prom-client's classes one by one, not its index (see prom-client-lib.d.ts): the index loads default process
// metrics, the Pushgateway client and cluster support at import.

import type { Metric } from "prom-client";
import Counter from "prom-client/lib/counter.js";
import Registry from "prom-client/lib/registry.js";

/** The Prometheus registry holding Toolhost's metrics. */
export const metricsRegistry = new Registry();

/** Upper bounds (ms) of `function_call_duration_ms`; `tool_execution_duration_seconds` uses the same in seconds. */
const DURATION_BUCKETS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 600000];
const DURATION_BUCKETS_S = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600];

/** The running totals of one tool and status: what the three execution metrics export. */
interface ExecutionSeries {
  labels: { tool: string; status: "success" | "failure" };
  count: number;
  sumMs: number;
  sumSeconds: number;
  /** Observations per bucket (not cumulative), one more than the bounds for +Inf. */
  bucketsMs: number[];
  bucketsSeconds: number[];
}

/** One exported value in prom-client's shape (what Registry.metrics() formats). */
interface ExportedValue {
  value: number;
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  metricName?: string;
}

/** One metric as prom-client's registry reads it (getForPromString and get). */
interface ExportedMetric {
  name: string;
  help: string;
  type: "counter" | "histogram";
  values: ExportedValue[];
  aggregator: "sum";
}

/**
 * The series of the execution metrics, kept as plain numbers: recording a call is one map lookup and a few
 * additions (no label hashing or validation per call). The three metric objects below read them when scraped.
 */
const executionSeries = new Map<string, [ExecutionSeries | undefined, ExecutionSeries | undefined]>();

function seriesFor(tool: string, failed: boolean): ExecutionSeries {
  let pair = executionSeries.get(tool);
  if (!pair) {
    pair = [undefined, undefined];
    executionSeries.set(tool, pair);
  }
  const index = failed ? 1 : 0;
  let series = pair[index];
  if (!series) {
    series = {
      labels: { tool, status: failed ? "failure" : "success" },
      count: 0,
      sumMs: 0,
      sumSeconds: 0,
      bucketsMs: new Array(DURATION_BUCKETS_MS.length + 1).fill(0),
      bucketsSeconds: new Array(DURATION_BUCKETS_S.length + 1).fill(0),
    };
    pair[index] = series;
  }
  return series;
}

/** Index of the first bound `value` does not exceed (bounds.length: +Inf). */
function bucketIndex(bounds: readonly number[], value: number): number {
  let i = 0;
  while (i < bounds.length && value > (bounds[i] as number)) i++;
  return i;
}

function everySeries(): ExecutionSeries[] {
  const out: ExecutionSeries[] = [];
  for (const pair of executionSeries.values()) for (const series of pair) if (series) out.push(series);
  return out;
}

/**
 * A metric of the execution series in the interface prom-client's Registry formats (`name`, `help`, `type`,
 * `aggregator`, `get()`, `getForPromString()`, `reset()`): the text it serves is the one prom-client's own
 * Counter/Histogram would serve for the same observations.
 */
class ExecutionMetric {
  readonly aggregator = "sum" as const;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: "counter" | "histogram",
    readonly labelNames: readonly string[],
    private readonly values: (series: ExecutionSeries) => ExportedValue[],
  ) {}

  /** Values with bucket labels kept apart from the series labels (the form Registry.metrics() prints). */
  async getForPromString(): Promise<ExportedMetric> {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values: everySeries().flatMap(this.values),
      aggregator: this.aggregator,
    };
  }

  /** Values with every label merged into `labels` (prom-client's `get()` shape, used by getMetricsAsJSON). */
  async get(): Promise<ExportedMetric> {
    const data = await this.getForPromString();
    data.values = data.values.map(({ sharedLabels, ...v }) => ({ ...v, labels: { ...v.labels, ...sharedLabels } }));
    return data;
  }

  /** Clears every series (all three execution metrics share them). */
  reset(): void {
    executionSeries.clear();
  }
}

function histogramValues(
  name: string,
  bounds: readonly number[],
  pick: (s: ExecutionSeries) => { buckets: number[]; sum: number },
): (series: ExecutionSeries) => ExportedValue[] {
  return (series) => {
    const { buckets, sum } = pick(series);
    const out: ExportedValue[] = [];
    let cumulative = 0;
    bounds.forEach((le, i) => {
      cumulative += buckets[i] as number;
      out.push({ labels: { le }, sharedLabels: series.labels, value: cumulative, metricName: `${name}_bucket` });
    });
    out.push(
      { labels: { le: "+Inf" }, sharedLabels: series.labels, value: series.count, metricName: `${name}_bucket` },
      { labels: {}, sharedLabels: series.labels, value: sum, metricName: `${name}_sum` },
      { labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${name}_count` },
    );
    return out;
  };
}

/** Count of tool executions by tool and status (success | failure). */
export const toolExecutionTotal = new ExecutionMetric(
  "tool_execution_total",
  "Tool executions by tool and status (success or failure).",
  "counter",
  ["tool", "status"],
  (series) => [{ value: series.count, labels: series.labels }],
);

/** Tool execution time in milliseconds. */
export const functionCallDurationMs = new ExecutionMetric(
  "function_call_duration_ms",
  "Tool execution duration in milliseconds, by tool and status.",
  "histogram",
  ["tool", "status"],
  histogramValues("function_call_duration_ms", DURATION_BUCKETS_MS, (s) => ({ buckets: s.bucketsMs, sum: s.sumMs })),
);

/** Tool execution time in seconds (Prometheus base unit), by tool and status. */
export const toolExecutionDurationSeconds = new ExecutionMetric(
  "tool_execution_duration_seconds",
  "Tool execution duration in seconds, by tool and status (success or failure).",
  "histogram",
  ["tool", "status"],
  histogramValues("tool_execution_duration_seconds", DURATION_BUCKETS_S, (s) => ({
    buckets: s.bucketsSeconds,
    sum: s.sumSeconds,
  })),
);

for (const metric of [toolExecutionTotal, functionCallDurationMs, toolExecutionDurationSeconds]) {
  // The Registry types want prom-client's classes; it only uses the members ExecutionMetric has.
  metricsRegistry.registerMetric(metric as unknown as Metric);
}

/**
 * Records one finished tool execution in the three execution metrics: `ms` is its duration in milliseconds,
 * `failed` whether it ended in failure.
 */
export function recordToolExecution(tool: string, ms: number, failed: boolean): void {
  const series = seriesFor(tool, failed);
  const seconds = ms / 1000;
  series.count += 1;
  series.sumMs += ms;
  series.sumSeconds += seconds;
  (series.bucketsMs[bucketIndex(DURATION_BUCKETS_MS, ms)] as number) += 1;
  (series.bucketsSeconds[bucketIndex(DURATION_BUCKETS_S, seconds)] as number) += 1;
}

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
    recordToolExecution(tool, performance.now() - started, failed);
  }
}
