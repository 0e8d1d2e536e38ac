/**
 * What watches a call's stages without taking part in them: the `execute_tool` trace span (only when a tracer
 * provider is registered; otherwise no span object is made) and the execution metrics (duration, failed or not).
 */
import { recordToolExecution } from "../metrics.js";
import { tracerProviderRegistered, withToolSpan } from "../tracing.js";
import type { ToolCallOutcome } from "./types.js";

/** How an outcome reads on its `execute_tool` span: failures carry their error code as `error.type`. */
function spanOutcome(outcome: ToolCallOutcome): {
  ok: boolean;
  errorCode?: string;
  message?: string;
  result?: unknown;
} {
  return outcome.ok
    ? { ok: true, result: outcome.result }
    : { ok: false, errorCode: outcome.error.code, message: outcome.error.message };
}

/** When a call's execution began (ms of performance.now()), and whether it counts in the execution metrics. */
export interface CallClock {
  /** Moved forward by the time the call waited for its approval, which is not execution time. */
  started: number;
  /** False for a call the approval stage refused: it never executed. */
  executed: boolean;
}

/**
 * Runs a call's stages (check → approve → run → cap; they never throw) inside its span when spans record, and
 * records the call in the execution metrics (duration from `clock.started`) unless it never executed.
 */
export async function observeCall(
  tool: string,
  input: { callId: string | undefined; args: unknown },
  clock: CallClock,
  stages: () => Promise<ToolCallOutcome>,
): Promise<ToolCallOutcome> {
  const outcome = tracerProviderRegistered()
    ? await withToolSpan({ tool, callId: input.callId, args: input.args }, stages, spanOutcome)
    : await stages();
  if (clock.executed) recordToolExecution(tool, performance.now() - clock.started, !outcome.ok);
  return outcome;
}
