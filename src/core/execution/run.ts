/**
 * Stage 3 of a call, run: the tool's execute within its time budget, the caller's cancellation and the runtime's
 * shutdown, with the streams of full output the tool opens (ToolContext.captureFullOutput). Yields the result as
 * JSON data with its UTF-8 size (from one serialization) and the streams, for the cap stage.
 */
import { ToolAbortedError, ToolError, ToolExecutionError, ToolTimeoutError } from "../errors.js";
import type { SpillArea, SpillStream } from "../output-spill.js";
import { integerSetting } from "../settings-declaration.js";
import { DEFAULT_TOOL_TIMEOUT_MS } from "../settings-policy.js";
import type { EffectiveToolSettings, RegisteredTool, ToolContext } from "../types.js";
import { LazyAbort } from "./call-context.js";

/** Extra time (ms) given past the budget of a tool that manages its own timeout before the backstop fires. */
const OWN_TIMEOUT_GRACE_MS = 5_000;

/** What the run stage needs of the runtime. */
export interface RunEnvironment {
  /** Aborted when the runtime shuts down (its reason is the error calls end with). */
  readonly closing: AbortSignal;
  /** The cancellation of every call running now (shutdown aborts them). */
  readonly running: Set<LazyAbort>;
  /** Where captured full outputs go (null: nowhere). */
  readonly spill: SpillArea | null;
}

/** The running promise of a call and whether it settled: a cancelled call's audit line waits for it. */
export interface RunTracking {
  promise?: Promise<unknown>;
  done?: boolean;
}

/** What the run stage yields: the result as JSON data, its JSON size in UTF-8 bytes, the captured streams. */
export interface RunResult {
  value: unknown;
  bytes: number;
  /** The JSON text of `value` when it is 4 KiB or more (for {@link withResultJson}); undefined otherwise. */
  json: string | undefined;
  /** Full outputs the tool streamed, by field (undefined: it opened none). */
  streams: Map<string, SpillStream> | undefined;
}

/** The tool's own timeoutSeconds setting (a budget its users can change), or undefined when it has none. */
function timeoutSetting(tool: RegisteredTool) {
  return tool.settings.parameterDescriptors.find((p) => p.name === "timeoutSeconds");
}

/** The time budget (ms) of a call: the tool's own rule, else its timeoutSeconds setting, else the default. */
export function budgetMs(tool: RegisteredTool, args: Record<string, unknown>, settings: EffectiveToolSettings): number {
  if (tool.timeoutMs) return tool.timeoutMs(args, settings);
  const d = timeoutSetting(tool);
  if (d && typeof d.default === "number") return integerSetting(settings.values, d) * 1000;
  const seconds = settings.values.timeoutSeconds;
  return typeof seconds === "number" && seconds > 0 ? seconds * 1000 : DEFAULT_TOOL_TIMEOUT_MS;
}

/** One call to run: the checked call, where its full outputs go, and how its context is made. */
export interface RunRequest {
  tool: RegisteredTool;
  settings: EffectiveToolSettings;
  args: Record<string, unknown>;
  userId: string;
  chatId: string | null;
  /** The caller's cancel signal. */
  signal: AbortSignal | undefined;
  /** Byte limit of a captured stream (the cap's maxBytes). */
  maxBytes: number;
  /** Makes the tool's context around the call's (lazily made) signal. */
  context: (signal: () => AbortSignal) => ToolContext;
}

/**
 * Runs a checked call. Resolves with the serialized result; rejects with the tool's error, or the abort reason
 * (ToolAbortedError, ToolTimeoutError, the shutdown's error) as soon as the call is cancelled, timed out or shut
 * down, whether or not the tool stops. Discards the captured streams on failure.
 */
export async function runStage(env: RunEnvironment, request: RunRequest, tracking: RunTracking): Promise<RunResult> {
  const { tool, userId, chatId } = request;
  const name = tool.definition.name;
  const budget = budgetMs(tool, request.args, request.settings);
  const parent = request.signal;
  if (parent?.aborted) throw new ToolAbortedError();
  if (env.closing.aborted) throw env.closing.reason;
  // The call's signal is made only if the tool reads it (an AbortController is the costliest object of a call);
  // the race below is rejected directly, so a cancel, timeout or shutdown ends the call either way.
  const cancel = new LazyAbort();
  const onParentAbort = () => cancel.abort(new ToolAbortedError());
  parent?.addEventListener("abort", onParentAbort, { once: true });
  env.running.add(cancel);
  const backstopMs = tool.managesOwnTimeout ? budget + OWN_TIMEOUT_GRACE_MS : budget;
  const timer = setTimeout(() => {
    // Only a tool that declares timeoutSeconds has a budget a user can raise; the others' budget is fixed.
    const settable = timeoutSetting(tool) !== undefined;
    cancel.abort(
      new ToolTimeoutError(
        `Tool "${name}" did not finish within its ${Math.round(budget / 1000)}s budget and was cancelled. Narrow the request${settable ? ", or raise timeoutSeconds in the tool settings" : " (this tool's budget is fixed)"}.`,
        { tool: name, budgetMs: budget },
      ),
    );
  }, backstopMs);
  timer.unref?.();

  const context = request.context(() => cancel.signal);
  // The streams of full outputs the tool opened (made on the first one).
  let streams: Map<string, SpillStream> | undefined;
  const spill = env.spill;
  if (spill) {
    context.spillDirectory = spill.directoryFor(userId, chatId);
    context.openSpill = (spillName) => spill.open(userId, chatId, spillName);
    context.captureFullOutput = (field) => {
      streams ??= new Map();
      const existing = streams.get(field);
      if (existing) return existing;
      const stream = spill.openStream(userId, chatId, name, field, request.maxBytes);
      streams.set(field, stream);
      return stream;
    };
  }

  try {
    const running = tool.execute(request.args, context);
    tracking.promise = running;
    // The tool's result, or the abort reason as soon as the call is cancelled, timed out or shut down.
    const result = await new Promise((resolve, reject) => {
      cancel.onAbort(reject);
      running.then(
        (value) => {
          tracking.done = true;
          resolve(value);
        },
        (error) => {
          tracking.done = true;
          reject(error);
        },
      );
    });
    const serialized = toSerializable(name, result);
    return { value: serialized.value, bytes: serialized.bytes, json: serialized.json, streams };
  } catch (error) {
    if (streams) for (const stream of streams.values()) await stream.discard();
    // A tool that throws after the signal fired (e.g. its fetch rejected with AbortError) is reported by the
    // signal's reason, so timeout and cancel stay distinguishable.
    if (cancel.aborted && !(error instanceof ToolError && error.code !== "execution_failed")) {
      throw cancel.reason;
    }
    throw error;
  } finally {
    clearTimeout(timer);
    parent?.removeEventListener("abort", onParentAbort);
    env.running.delete(cancel);
  }
}

/** The hidden field of an outcome that carries its result's JSON text (see {@link withResultJson}). */
const RESULT_JSON = Symbol("toolhost.resultJson");

/**
 * `outcome` carrying `json`, the JSON text of its result, in a field of its own that is not enumerable (so neither
 * JSON.stringify nor a spread of the outcome sees it). The text dies with the outcome. Kept on the outcome rather
 * than in a WeakMap keyed by the result: every entry of a WeakMap costs each young-generation GC an ephemeron to
 * process, which for large results was most of a read_file call's GC time.
 */
export function withResultJson<T extends object>(outcome: T, json: string | undefined): T {
  if (json !== undefined) Object.defineProperty(outcome, RESULT_JSON, { value: json });
  return outcome;
}

/**
 * `JSON.stringify(outcome.result)` of a large result executeTool returned uncut (4 KiB of JSON or more), without
 * serializing it again (the run stage already did); undefined for any other outcome (serialize it yourself).
 */
export function resultJsonText(outcome: object): string | undefined {
  return (outcome as { [RESULT_JSON]?: string })[RESULT_JSON];
}

/**
 * `JSON.stringify(outcome)` of an executeTool outcome, with the result's JSON text spliced in when the outcome
 * carries it (see {@link resultJsonText}) instead of serializing the result a second time.
 */
export function outcomeJsonText(outcome: { ok: boolean; result?: unknown; durationMs: number }): string {
  const json = outcome.ok ? resultJsonText(outcome) : undefined;
  if (json === undefined || Object.keys(outcome).join() !== "ok,result,durationMs") return JSON.stringify(outcome);
  return `{"ok":true,"result":${json},"durationMs":${JSON.stringify(outcome.durationMs)}}`;
}

/**
 * A tool's result as JSON data (its JSON round trip: undefined becomes null, class instances plain objects) and
 * the UTF-8 size of its JSON, from one serialization. Throws ToolExecutionError when the value cannot be serialized.
 */
function toSerializable(tool: string, value: unknown): { value: unknown; bytes: number; json: string | undefined } {
  if (value === undefined) return { value: null, bytes: 4, json: undefined };
  try {
    const json = JSON.stringify(value);
    // A result that is JSON data already (every built-in's) is its own round trip: parsing it again would only
    // copy it (a tenth of an MCP call's CPU for a directory listing, most of it garbage).
    const parsed: unknown = isJsonData(value, { left: MAX_JSON_DATA_NODES }) ? value : JSON.parse(json);
    const bytes = Buffer.byteLength(json, "utf8");
    // Kept for results worth not serializing twice; a small one is cheaper to serialize again than to remember.
    return { value: parsed, bytes, json: bytes >= KEEP_JSON_TEXT_BYTES ? json : undefined };
  } catch (error) {
    throw new ToolExecutionError(
      `Tool "${tool}" returned a value that is not JSON-serializable: ${(error as Error).message}`,
    );
  }
}

/** Results of at least this many bytes of JSON keep their JSON text (see {@link withResultJson}). */
const KEEP_JSON_TEXT_BYTES = 4096;

/** How many values {@link isJsonData} looks at before it gives up (the result is then parsed from its JSON). */
const MAX_JSON_DATA_NODES = 20_000;

/**
 * Whether `value` is JSON data as it is: what `JSON.parse(JSON.stringify(value))` would give back equal, made only
 * of plain objects, arrays without holes, strings, finite numbers, booleans and null (no undefined, no class
 * instances, no toJSON, no cycles). False once `budget.left` values were seen.
 */
function isJsonData(value: unknown, budget: { left: number }): boolean {
  if (--budget.left < 0) return false;
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0);
    case "object": {
      if (value === null) return true;
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== Array.prototype) return false;
        for (let i = 0; i < value.length; i++) {
          if (!(i in value) || !isJsonData(value[i], budget)) return false;
        }
        return true;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      if ("toJSON" in value) return false;
      for (const key in value) {
        if (!Object.hasOwn(value, key)) return false;
        if (!isJsonData((value as Record<string, unknown>)[key], budget)) return false;
      }
      // Symbol keys and non-enumerable properties are not in the JSON: such an object is not its own round trip.
      return Object.getOwnPropertySymbols(value).length === 0;
    }
    default:
      return false;
  }
}
