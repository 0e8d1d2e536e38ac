/**
 * The tool loop: stream a model turn through a provider adapter, execute the tool calls it asks for concurrently
 * through the ToolRuntime, feed the results back, and repeat until the model answers in text or the iteration limit is
 * hit.
 */
import { type SerializedToolError, ToolAbortedError } from "../core/errors.js";
import type { ToolCallOutcome, ToolRuntime } from "../core/runtime.js";
import type { ToolDefinition } from "../core/types.js";
import {
  type ConversationMessage,
  type ConversationToolCall,
  type ConversationToolResult,
  type FinishReason,
  isAbortError,
  type ProviderAdapter,
} from "../providers/types.js";
import type { LoopEvent } from "./events.js";
import type { GateStep, LoopStepSnapshot, ToolCallGate } from "./gate.js";
import { hasProviderSpecificHistory, portableHistory } from "./portable-history.js";
import { toConversationToolResult } from "./serialize.js";
import { tracedProviderStream } from "./trace.js";

/** Default maximum number of model turns in one run of the loop. */
export const DEFAULT_MAX_ITERATIONS = 10;

/** Input of {@link runToolLoop}. */
export interface RunToolLoopOptions {
  /** The provider adapter that streams model turns. */
  adapter: ProviderAdapter;
  /** Provider model id, e.g. "gpt-5-mini". */
  model: string;
  /** System prompt (e.g. announcing the chat's working directory). */
  system?: string;
  /** The conversation so far, ending with the new user message. Not mutated. */
  messages: ConversationMessage[];
  /** Runtime whose enabled tools (for `userId`) are offered and executed. */
  runtime: ToolRuntime;
  userId: string;
  /** Chat id (freshness-ledger scope of file tools); null for one-off runs. */
  chatId?: string | null;
  /**
   * Directory relative tool paths resolve against; null: the process working directory, where the runtime's
   * processCwdFallback allows it for the user (the HTTP service allows it for admins only).
   */
  workingDirectory?: string | null;
  /** Maximum number of model turns (≥ 1; default {@link DEFAULT_MAX_ITERATIONS}). */
  maxIterations?: number;
  /** Cancels the model stream and the running tools; the run then ends with `done {reason: "aborted"}`. */
  signal?: AbortSignal;
  /** Upper bound on output tokens per model turn, passed to the provider. */
  maxOutputTokens?: number;
  /** Offered tools; default `runtime.getEnabledToolRuntime(userId).definitions`. */
  tools?: ToolDefinition[];
  /** Host services handed to tools (ToolContext.services). */
  services?: Record<string, unknown>;
  /**
   * Decides each call before it runs (the approval gate). Absent: every call runs (library use without a
   * policy). A call the gate refuses is fed back to the model as its classified error.
   */
  gate?: ToolCallGate;
  /**
   * Resumes a run at a step whose calls were already requested (after a restart, or when an approval came in):
   * the first iteration does not ask the provider again; its calls with a result keep it and the others go
   * through the gate (which finds their decided approvals) and run. `messages` must end just before the step
   * (i.e. include `resume.added`).
   */
  resume?: Pick<LoopStepSnapshot, "iterations" | "assistant" | "results" | "added"> & {
    /**
     * Indexes of `results` that were never reported (made by the caller, e.g. a call cut short when its server
     * died): each gets its `tool_result` event when the step resumes. The other known results were reported when
     * they were obtained.
     */
    report?: readonly number[];
  };
  /**
   * Called before each model turn; the messages it returns (e.g. messages other agents sent this one) are appended
   * to the conversation, and to `done.messages`, before the model is asked. A throw ends the run like a provider
   * failure would.
   */
  beforeModelTurn?: (iteration: number) => Promise<ConversationMessage[] | undefined>;
}

/**
 * Runs the tool loop and yields {@link LoopEvent}s. It never throws: a provider failure becomes an `error` event
 * (code `provider_error`) and `done {reason: "error"}`; a cancel through `signal` ends with `done {reason:
 * "aborted"}` once the running tools have stopped; reaching `maxIterations` while the model still asks for tools
 * yields `error {code: "max_iterations"}` and `done {reason: "max_iterations"}`. Tool failures (bad JSON
 * arguments, validation, timeouts, aborts) are `tool_result` events with `ok: false` and are fed back to the
 * model as results, never crash the loop.
 *
 * `done.messages` holds only complete messages: every assistant message with tool calls is followed by the tool
 * message answering all of them; a model turn interrupted mid-stream is dropped. Appending them to the
 * conversation therefore always leaves a history every provider accepts.
 */
export async function* runToolLoop(options: RunToolLoopOptions): AsyncGenerator<LoopEvent, void, undefined> {
  const { adapter, model, runtime, userId, signal } = options;
  const maxIterations = Math.max(1, Math.floor(options.maxIterations ?? DEFAULT_MAX_ITERATIONS));
  const added: ConversationMessage[] = [...(options.resume?.added ?? [])];
  const history: ConversationMessage[] = [...options.messages];
  let iterations = 0;
  let resume = options.resume;
  const done = (reason: "text" | "max_iterations" | "aborted" | "error"): LoopEvent => ({
    type: "done",
    reason,
    iterations,
    messages: added,
  });

  let tools: ToolDefinition[];
  try {
    tools = options.tools ?? (await runtime.getEnabledToolRuntime(userId)).definitions;
  } catch (error) {
    yield { type: "error", code: "internal_error", message: `Could not load the user's tools: ${errorMessage(error)}` };
    yield done("error");
    return;
  }
  const resolveName = toolNameResolver(tools);

  while (iterations < maxIterations) {
    if (signal?.aborted && !resume) {
      yield done("aborted");
      return;
    }
    if (resume) {
      // Resuming a step: its calls are known; do not ask the provider for them again.
      const step = resume;
      resume = undefined;
      // Not a new model turn: its `iteration` event came when the step first ran (a follower has it already).
      iterations = step.iterations;
      const calls = step.assistant.role === "assistant" ? (step.assistant.toolCalls ?? []) : [];
      const results: ConversationToolResult[] = new Array(calls.length);
      const known = step.results.map((r) => r ?? undefined);
      for (const index of step.report ?? []) {
        const call = calls[index];
        const result = known[index];
        if (call && result) yield resultEvent(call, result);
      }
      if (signal?.aborted) {
        // Cancelled before the step could resume: nothing runs. Every call the model asked for still gets its result
        // (cancelled), and the step is kept, as a cancel during the step would have kept it.
        calls.forEach((call, index) => {
          results[index] = known[index] ?? cancelledResult(call);
        });
        for (const [index, call] of calls.entries()) if (!known[index]) yield resultEvent(call, results[index]!);
        added.push(step.assistant, { role: "tool", results });
        yield done("aborted");
        return;
      }
      yield* executeCalls(calls, results, options, { iterations, added: [...added], assistant: step.assistant }, known);
      const toolMessage: ConversationMessage = { role: "tool", results };
      added.push(step.assistant, toolMessage);
      history.push(step.assistant, toolMessage);
      if (signal?.aborted) {
        yield done("aborted");
        return;
      }
      continue;
    }
    iterations += 1;
    yield { type: "iteration", n: iterations };
    if (options.beforeModelTurn) {
      let incoming: ConversationMessage[] | undefined;
      try {
        incoming = await options.beforeModelTurn(iterations);
      } catch (error) {
        if (signal?.aborted) {
          yield done("aborted");
        } else {
          yield {
            type: "error",
            code: "internal_error",
            message: `Could not prepare the model turn: ${errorMessage(error)}`,
          };
          yield done("error");
        }
        return;
      }
      if (incoming && incoming.length > 0) {
        added.push(...incoming);
        history.push(...incoming);
      }
    }

    let text = "";
    const calls: ConversationToolCall[] = [];
    let providerData: Record<string, unknown> | undefined;
    let finishReason: FinishReason | undefined;
    for (let attempt = 0; ; attempt++) {
      let received = 0;
      try {
        const stream = tracedProviderStream(
          adapter.name,
          model,
          adapter.stream({
            model,
            system: options.system,
            messages: history,
            tools,
            signal,
            maxOutputTokens: options.maxOutputTokens,
          }),
        );
        for await (const event of stream) {
          received++;
          switch (event.type) {
            case "text_delta":
              text += event.delta;
              yield event;
              break;
            case "tool_call_started":
              yield { ...event, name: resolveName(event.name) };
              break;
            case "tool_call_completed": {
              const name = resolveName(event.name);
              calls.push({ id: event.id, name, arguments: event.arguments });
              yield { ...event, name };
              break;
            }
            case "finish":
              finishReason = event.reason;
              if (event.providerData) providerData = event.providerData;
              yield event;
              break;
            default:
              yield event;
          }
        }
        break;
      } catch (error) {
        if (signal?.aborted || isAbortError(error)) {
          yield done("aborted");
          return;
        }
        // The provider refused the request before answering and the earlier turns hold provider-specific parts
        // (tool calls, reasoning, signatures): retry once with those turns as plain text, so the chat can go on.
        if (attempt === 0 && received === 0 && isRequestRejection(error) && hasProviderSpecificHistory(history)) {
          history.splice(0, history.length, ...portableHistory(history));
          yield {
            type: "history_rewritten",
            message: `The ${adapter.name} provider refused this chat's earlier turns (${errorMessage(error).replace(/[.\s]+$/u, "")}); they were sent again as plain text.`,
          };
          continue;
        }
        yield { type: "error", code: "provider_error", message: providerErrorMessage(adapter.name, error) };
        yield done("error");
        return;
      }
    }
    if (signal?.aborted) {
      yield done("aborted");
      return;
    }

    const assistant: ConversationMessage = { role: "assistant", content: text };
    if (calls.length > 0) assistant.toolCalls = calls;
    if (providerData) assistant.providerData = providerData;

    if (calls.length === 0) {
      added.push(assistant);
      history.push(assistant);
      yield done("text");
      return;
    }

    const results: ConversationToolResult[] = new Array(calls.length);
    const cut = calls.map((call) => cutShortResult(call, finishReason));
    for (const [index, result] of cut.entries()) if (result) yield resultEvent(calls[index]!, result);
    yield* executeCalls(calls, results, options, { iterations, added: [...added], assistant }, cut);
    const toolMessage: ConversationMessage = { role: "tool", results };
    added.push(assistant, toolMessage);
    history.push(assistant, toolMessage);

    if (signal?.aborted) {
      yield done("aborted");
      return;
    }
  }

  yield {
    type: "error",
    code: "max_iterations",
    message: `Stopped after ${maxIterations} model turns while the model was still calling tools. Send another message to let it continue, or raise the iteration limit.`,
  };
  yield done("max_iterations");
}

/**
 * Executes the calls of one turn concurrently through the gate, yielding approval events, progress and results as
 * they happen. `known` holds results already obtained (a resumed step); those calls do not run again.
 */
async function* executeCalls(
  calls: ConversationToolCall[],
  results: ConversationToolResult[],
  options: RunToolLoopOptions,
  step: Omit<LoopStepSnapshot, "results">,
  known: (ConversationToolResult | undefined)[] = [],
): AsyncGenerator<LoopEvent, void, undefined> {
  const queue: LoopEvent[] = [];
  let wake: (() => void) | undefined;
  const push = (event: LoopEvent) => {
    queue.push(event);
    wake?.();
    wake = undefined;
  };
  let pending = calls.length;
  const gateStep: GateStep = {
    emit: push,
    snapshot: () => structuredClone({ ...step, results: calls.map((_, i) => results[i] ?? null) }),
    signal: options.signal,
  };
  const offered = options.tools ? new Set(options.tools.map((t) => t.name)) : undefined;

  calls.forEach((call, index) => {
    const previous = known[index];
    if (previous) {
      results[index] = previous;
      pending -= 1;
      return;
    }
    const run = async (): Promise<ToolCallOutcome> => {
      // A tool the run was not offered is never executed, whatever the model asks (a sub-agent's tools are a
      // subset of its parent's).
      if (offered && !offered.has(call.name)) {
        return {
          ok: false,
          error: {
            code: "access_denied",
            message: `Tool "${call.name}" is not available to you. Call one of the tools you were given.`,
            details: { tool: call.name, rule: "not_offered" },
          },
          durationMs: 0,
        };
      }
      try {
        const verdict = options.gate ? await options.gate.check(call, gateStep) : undefined;
        if (verdict && !verdict.run) return verdict.outcome;
        return await options.runtime.executeTool(call.name, call.arguments, {
          userId: options.userId,
          chatId: options.chatId ?? null,
          workingDirectory: options.workingDirectory ?? null,
          signal: options.signal,
          toolCallId: call.id,
          services: options.services,
          onProgress: (progress) => push({ type: "tool_progress", id: call.id, name: call.name, progress }),
          ...(verdict?.run ? { approval: verdict.approval } : {}),
        });
      } catch (error) {
        // executeTool classifies tool failures itself; this only guards against a bug in a custom runtime.
        return {
          ok: false,
          error: { code: "execution_failed", message: `Tool "${call.name}" failed: ${errorMessage(error)}` },
          durationMs: 0,
        };
      }
    };
    void run().then(async (outcome) => {
      results[index] = toConversationToolResult(call.id, call.name, outcome);
      try {
        await options.gate?.onResult?.(index, results[index]!, gateStep);
      } catch {
        // the gate's bookkeeping never fails the call
      }
      push(
        outcome.ok
          ? {
              type: "tool_result",
              id: call.id,
              name: call.name,
              ok: true,
              result: outcome.result,
              durationMs: outcome.durationMs,
            }
          : {
              type: "tool_result",
              id: call.id,
              name: call.name,
              ok: false,
              error: outcome.error,
              durationMs: outcome.durationMs,
            },
      );
    });
  });

  while (pending > 0 || queue.length > 0) {
    if (queue.length === 0) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      continue;
    }
    const event = queue.shift()!;
    if (event.type === "tool_result") pending -= 1;
    yield event;
  }
}

/**
 * Maps a tool name as the provider reported it back to the registered name. The built-in adapters already
 * translate names the tool mapper sanitized (ToolNameMap.fromWire); this is the safety net for custom adapters
 * that do not: characters outside `[a-zA-Z0-9_]` read as `_`, case folded, cut to 64.
 */
function toolNameResolver(tools: ToolDefinition[]): (name: string) => string {
  const exact = new Set(tools.map((t) => t.name));
  const normalize = (name: string) =>
    name
      .replace(/[^a-zA-Z0-9_]/g, "_")
      .toLowerCase()
      .slice(0, 64);
  const byNormalized = new Map<string, string>();
  for (const tool of tools) {
    const key = normalize(tool.name);
    if (!byNormalized.has(key)) byNormalized.set(key, tool.name);
  }
  return (name) => (exact.has(name) ? name : (byNormalized.get(normalize(name)) ?? name));
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** An HTTP 400/422 answer: the provider refused the request as sent (not an outage, a key or a rate limit). */
function isRequestRejection(error: unknown): boolean {
  const status = (error as { status?: unknown })?.status;
  return status === 400 || status === 422;
}

function providerErrorMessage(provider: string, error: unknown): string {
  const status = (error as { status?: unknown })?.status;
  const prefix =
    typeof status === "number" ? `The ${provider} provider failed (HTTP ${status})` : `The ${provider} provider failed`;
  // The provider's message already ends a sentence: strip its final punctuation so exactly one full stop follows.
  const detail = errorMessage(error).replace(/[.:;,\s]+$/u, "");
  return `${prefix}: ${detail}. The turn was not saved past its last complete step; retry the message.`;
}

/** The result of a call that never ran because its run was cancelled first (what a cancelled call reports). */
function cancelledResult(call: ConversationToolCall): ConversationToolResult {
  const error = new ToolAbortedError("The turn was cancelled before this call ran.").toJSON();
  return toConversationToolResult(call.id, call.name, { ok: false, error, durationMs: 0 });
}

/**
 * The result of a call whose turn was cut short (finish reason `length` or `content_filter`) before its arguments
 * were complete JSON: it is neither gated nor run, and the model is told why and what to do instead. Undefined for
 * every other call (a complete call of a cut-short turn runs as usual).
 */
function cutShortResult(
  call: ConversationToolCall,
  reason: FinishReason | undefined,
): ConversationToolResult | undefined {
  if (reason !== "length" && reason !== "content_filter") return undefined;
  try {
    JSON.parse(call.arguments);
    return undefined;
  } catch {
    const why =
      reason === "length"
        ? "the response reached the output token limit"
        : "the provider's content filter stopped the response";
    const error: SerializedToolError = {
      code: "validation_failed",
      message: `The call to ${call.name} was cut off: ${why} before its arguments were complete, so it was not run. Call ${call.name} again with shorter arguments (for a large file, write it in parts).`,
      details: { rule: "cut_off", finishReason: reason },
    };
    return toConversationToolResult(call.id, call.name, { ok: false, error, durationMs: 0 });
  }
}

/** The `tool_result` event of a result known as a conversation message (its content is the JSON the model got). */
function resultEvent(call: ConversationToolCall, result: ConversationToolResult): LoopEvent {
  let content: unknown = result.content;
  try {
    content = JSON.parse(result.content);
  } catch {
    // plain text
  }
  if (result.ok) return { type: "tool_result", id: call.id, name: call.name, ok: true, result: content, durationMs: 0 };
  const error = (content as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return {
    type: "tool_result",
    id: call.id,
    name: call.name,
    ok: false,
    // The error the model got, as it got it (a result made by the caller may carry its own code, e.g. interrupted).
    error:
      typeof error?.code === "string" && typeof error.message === "string"
        ? (error as SerializedToolError)
        : { code: "execution_failed", message: String(result.content) },
    durationMs: 0,
  };
}
