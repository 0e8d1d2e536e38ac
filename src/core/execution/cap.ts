/**
 * Stage 4 of a call, cap: the runtime-wide output cap (core/result-cap.ts) on the run stage's result. A result
 * within the cap with no full output captured is returned as it is (most calls); anything else is cut, its full
 * output spilled, and the cut counted per tool.
 */
import { toolOutputTruncatedTotal } from "../metrics.js";
import type { SpillArea } from "../output-spill.js";
import { capToolResult, fitsResultCap, resultCapLimits, type SpillReaders } from "../result-cap.js";
import type { EffectiveToolSettings, RegisteredTool } from "../types.js";
import type { RunResult } from "./run.js";

/** The output cap's limits of one call (bytes of JSON, lines of text). */
export interface CapLimits {
  maxBytes: number;
  maxLines: number;
}

/** The output cap's limits by effective settings object (cached settings are frozen, so the limits stay true). */
const capLimitsCache = new WeakMap<EffectiveToolSettings, CapLimits>();

/** resultCapLimits of a call's settings, read once per frozen settings object. */
export function capLimitsOf(settings: EffectiveToolSettings): CapLimits {
  if (!Object.isFrozen(settings)) return resultCapLimits(settings.values);
  let limits = capLimitsCache.get(settings);
  if (!limits) {
    limits = resultCapLimits(settings.values);
    capLimitsCache.set(settings, limits);
  }
  return limits;
}

/** Who the call is for, where full outputs go, and (asked only when something is cut) who may read them. */
export interface CapRequestParts {
  tool: RegisteredTool;
  limits: CapLimits;
  area: SpillArea | null;
  userId: string;
  chatId: string | null;
  readers: () => Promise<SpillReaders>;
}

/** Applies the cap to a run's result; resolves with what the model receives. */
export async function capStage(ran: RunResult, parts: CapRequestParts): Promise<unknown> {
  const { limits } = parts;
  if (ran.streams === undefined && fitsResultCap(ran.value, ran.bytes, limits)) return ran.value;
  const name = parts.tool.definition.name;
  const outcome = await capToolResult(ran.value, {
    tool: name,
    style: parts.tool.outputCapStyle ?? "head",
    ...limits,
    jsonBytes: ran.bytes,
    streams: ran.streams ?? new Map(),
    area: parts.area,
    userId: parts.userId,
    chatId: parts.chatId,
    readers: parts.readers,
    ...(parts.tool.resultPaging ? { paging: parts.tool.resultPaging } : {}),
  });
  if (outcome.truncated) {
    toolOutputTruncatedTotal.inc({ tool: name });
    if (parts.area) void parts.area.cleanupUser(parts.userId).catch(() => {});
  }
  return outcome.result;
}
