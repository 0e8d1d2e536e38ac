/**
 * OpenTelemetry tracing through `@opentelemetry/api`, following the GenAI semantic conventions (the
 * `gen_ai.*` attributes of OpenTelemetry's "Semantic conventions for generative AI systems"):
 *
 * - `execute_tool <tool>` (span kind INTERNAL) around every executeTool call: `gen_ai.operation.name` =
 *   "execute_tool", `gen_ai.tool.name`, `gen_ai.tool.call.id` (when the caller passes one), `gen_ai.tool.type` =
 *   "function", and on failure `error.type` = the classified error code with status ERROR;
 * - `chat <model>` (CLIENT) around every provider request: `gen_ai.operation.name` = "chat",
 *   `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens` / `gen_ai.usage.output_tokens`
 *   (plus `gen_ai.usage.reasoning_tokens` when the provider reports them), `gen_ai.response.finish_reasons`;
 * - `invoke_agent <name>` (INTERNAL) around every sub-agent run: see {@link withAgentSpan}.
 *
 * Everything is a no-op unless the host registers an OpenTelemetry SDK (the API's global tracer provider); without
 * one, executeTool does not even make the non-recording span ({@link tracerProviderRegistered}). Tool arguments and results are recorded
 * (`gen_ai.tool.call.arguments` / `gen_ai.tool.call.result`) only when `TOOLHOST_OTEL_CAPTURE_CONTENT=true` (or
 * {@link setTraceContentCapture}), since they can hold file contents and secrets.
 */

import { createRequire } from "node:module";
import type * as OtelApi from "@opentelemetry/api";
import type { Attributes, Span, Tracer } from "@opentelemetry/api";
import { VERSION } from "../version.js";
import { readConfig } from "./config.js";

/** The instrumentation scope every Toolhost span is created under. */
export const TRACER_NAME = "toolhost";

let tracer: Tracer | undefined;
let captureContent: boolean | undefined;

/**
 * Where `@opentelemetry/api` 1.x keeps its process-wide registrations (tracer provider, context manager), shared
 * by every copy of the API in the process: `trace` is set there while a provider is registered.
 */
const OTEL_GLOBALS = Symbol.for("opentelemetry.js.api.1");

let otelApi: typeof OtelApi | undefined;

/**
 * The OpenTelemetry API, loaded (synchronously) the first time a provider is found registered: a process that
 * traces nothing, such as a CLI call, never loads it. createRequire keeps bundlers from pulling it into the CLI's
 * startup chunks; the copy it loads sees the host's registrations through the API's globals.
 */
function otel(): typeof OtelApi {
  otelApi ??= createRequire(import.meta.url)("@opentelemetry/api") as typeof OtelApi;
  return otelApi;
}

function getTracer(): Tracer {
  // The global API returns a proxy that follows a provider registered later, so caching it is safe.
  tracer ??= otel().trace.getTracer(TRACER_NAME, VERSION);
  return tracer;
}

/** What the global proxy provider delegates to while no SDK is registered (the API's no-op provider). */
let noProvider: unknown;

/**
 * Whether a tracer provider is registered (an SDK set with `trace.setGlobalTracerProvider`). Without one every span
 * would be a non-recording no-op, so the span work is skipped (executeTool, chat requests and agent runs make no
 * span objects at all). A global provider this copy of the API does not recognise counts as registered (spans are
 * then made as usual).
 */
export function tracerProviderRegistered(): boolean {
  const globals = (globalThis as Record<symbol, { trace?: unknown } | undefined>)[OTEL_GLOBALS];
  if (!globals?.trace) return false;
  const { trace, ProxyTracerProvider } = otel();
  noProvider ??= new ProxyTracerProvider().getDelegate();
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider && provider.getDelegate() === noProvider);
}

/** Whether tool arguments and results go on spans (default: TOOLHOST_OTEL_CAPTURE_CONTENT is "true" or "1"). */
export function traceContentCapture(): boolean {
  captureContent ??= readConfig().traceContent;
  return captureContent;
}

/** Turns recording of tool arguments and results on or off for this process (overrides the environment). */
export function setTraceContentCapture(enabled: boolean | undefined): void {
  captureContent = enabled;
}

function stringify(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value) ?? "null";
  } catch {
    return String(value);
  }
}

/** What the caller knows about one tool call when it starts. */
export interface ToolSpanInput {
  tool: string;
  /** The provider's call id, when the call came from a model. */
  callId?: string;
  args?: unknown;
}

/**
 * Runs `fn` inside an `execute_tool <tool>` span (active for everything `fn` starts, so a sub-agent's spans nest
 * under it). `classify` maps the value `fn` returns to `{ ok, errorCode?, result? }`; a failure sets `error.type`
 * to the code and the span status to ERROR. An exception from `fn` is recorded and rethrown.
 */
export async function withToolSpan<T>(
  input: ToolSpanInput,
  fn: () => Promise<T>,
  classify: (value: T) => { ok: boolean; errorCode?: string; message?: string; result?: unknown },
): Promise<T> {
  // Without a provider the span would not record: skip making it (executeTool's hot path).
  if (!tracerProviderRegistered()) return fn();
  const { SpanKind, SpanStatusCode } = otel();
  const span = getTracer().startSpan(`execute_tool ${input.tool}`, { kind: SpanKind.INTERNAL });
  if (!span.isRecording()) return fn();
  const attributes: Attributes = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": input.tool,
    "gen_ai.tool.type": "function",
  };
  if (input.callId) attributes["gen_ai.tool.call.id"] = input.callId;
  if (traceContentCapture() && input.args !== undefined) {
    attributes["gen_ai.tool.call.arguments"] = stringify(input.args);
  }
  span.setAttributes(attributes);
  return runActive(span, async () => {
    const value = await fn();
    const outcome = classify(value);
    if (!outcome.ok) {
      span.setAttribute("error.type", outcome.errorCode ?? "_OTHER");
      span.setStatus({ code: SpanStatusCode.ERROR, ...(outcome.message ? { message: outcome.message } : {}) });
    } else if (traceContentCapture() && outcome.result !== undefined) {
      span.setAttribute("gen_ai.tool.call.result", stringify(outcome.result));
    }
    return value;
  });
}

/** Token counts and finish reason of one model request, as the chat span records them. */
export interface ChatSpanUsage {
  inputTokens?: number;
  outputTokens?: number;
  reasoningTokens?: number;
  finishReason?: string;
}

/** A started `chat <model>` span: call {@link ChatSpan.end} exactly once. */
export interface ChatSpan {
  /** Records usage (may be called once the provider reports it). */
  usage(usage: ChatSpanUsage): void;
  /** Ends the span; with an error, sets `error.type` (the error's name or `code`) and status ERROR. */
  end(error?: unknown): void;
}

const NOOP_CHAT_SPAN: ChatSpan = { usage() {}, end() {} };

/**
 * Starts a `chat <model>` span (kind CLIENT) for one provider request. `serverAddress` is the base URL's host when
 * known. Returns a no-op handle when no SDK is recording.
 */
export function startChatSpan(provider: string, model: string, serverAddress?: string): ChatSpan {
  if (!tracerProviderRegistered()) return NOOP_CHAT_SPAN;
  const { SpanKind, SpanStatusCode } = otel();
  const span = getTracer().startSpan(`chat ${model}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": provider,
      "gen_ai.request.model": model,
      ...(serverAddress ? { "server.address": serverAddress } : {}),
    },
  });
  if (!span.isRecording()) return NOOP_CHAT_SPAN;
  let ended = false;
  return {
    usage(usage) {
      if (usage.inputTokens !== undefined) span.setAttribute("gen_ai.usage.input_tokens", usage.inputTokens);
      if (usage.outputTokens !== undefined) span.setAttribute("gen_ai.usage.output_tokens", usage.outputTokens);
      if (usage.reasoningTokens !== undefined) {
        span.setAttribute("gen_ai.usage.reasoning_tokens", usage.reasoningTokens);
      }
      if (usage.finishReason) span.setAttribute("gen_ai.response.finish_reasons", [usage.finishReason]);
    },
    end(error) {
      if (ended) return;
      ended = true;
      if (error !== undefined) {
        const type =
          (error as { code?: unknown })?.code ??
          (error as { name?: unknown })?.name ??
          (typeof error === "string" ? error : "_OTHER");
        span.setAttribute("error.type", String(type));
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      }
      span.end();
    },
  };
}

/** What {@link withAgentSpan} records about a sub-agent. */
export interface AgentSpanInput {
  /** Agent (template) name, e.g. "general"; the span is named `invoke_agent <name>`. */
  name: string;
  /** The agent's id (e.g. its row id or path). */
  id?: string;
  /** Provider id and model the agent runs on. */
  provider?: string;
  model?: string;
  /** Chat (conversation) the agent belongs to. */
  conversationId?: string;
}

/**
 * Runs a sub-agent inside an `invoke_agent <name>` span (GenAI conventions: `gen_ai.operation.name` =
 * "invoke_agent", `gen_ai.agent.name`, `gen_ai.agent.id`, `gen_ai.provider.name`, `gen_ai.request.model`,
 * `gen_ai.conversation.id`). The span is active while `fn` runs, so the child's `chat` and `execute_tool` spans
 * nest under it. An exception from `fn` sets `error.type` and is rethrown; `fn` may also report a failure by
 * returning — pass `failed(value)` to return an error type for it.
 */
export async function withAgentSpan<T>(
  input: AgentSpanInput,
  fn: () => Promise<T>,
  failed?: (value: T) => string | undefined,
): Promise<T> {
  if (!tracerProviderRegistered()) return fn();
  const { SpanKind, SpanStatusCode } = otel();
  const span = getTracer().startSpan(`invoke_agent ${input.name}`, {
    kind: SpanKind.INTERNAL,
    attributes: {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": input.name,
      ...(input.id ? { "gen_ai.agent.id": input.id } : {}),
      ...(input.provider ? { "gen_ai.provider.name": input.provider } : {}),
      ...(input.model ? { "gen_ai.request.model": input.model } : {}),
      ...(input.conversationId ? { "gen_ai.conversation.id": input.conversationId } : {}),
    },
  });
  if (!span.isRecording()) return fn();
  return runActive(span, async () => {
    const value = await fn();
    const errorType = failed?.(value);
    if (errorType) {
      span.setAttribute("error.type", errorType);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    return value;
  });
}

/** Runs `fn` with `span` active, recording a thrown error, and always ends the span. */
async function runActive<T>(span: Span, fn: () => Promise<T>): Promise<T> {
  const { context, trace, SpanStatusCode } = otel();
  try {
    return await context.with(trace.setSpan(context.active(), span), fn);
  } catch (error) {
    const type = (error as { code?: unknown })?.code ?? (error as Error)?.name ?? "_OTHER";
    span.setAttribute("error.type", String(type));
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
    throw error;
  } finally {
    span.end();
  }
}
