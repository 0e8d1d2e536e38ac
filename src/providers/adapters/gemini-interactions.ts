/**
 * Gemini Interactions API streaming adapter, on the official `@google/genai` SDK (`ai.interactions.create({ stream:
 * true })`, POST /v1beta/interactions). The base URL is set through the SDK's `httpOptions.baseUrl`.
 *
 * The adapter is stateless (`store: false`): every turn sends the whole conversation as input steps, so the loop's
 * stored conversation stays the single source of truth.
 *
 * Wire → normalized events (SSE `event:` names equal each payload's `event_type`):
 * - step.start {step: function_call {id, name, arguments, signature}} → tool_call_started
 * - step.delta {delta: arguments_delta {arguments}} → tool_call_arguments_delta (bound to the function_call step
 *   in flight, since a delta's index may point at a thought step); step.delta {delta: text} → text_delta
 * - step.stop of a function_call step → tool_call_completed (a complete `arguments` object on step.start, when a
 *   server sends one instead of deltas, is used as the arguments)
 * - thought steps and their signatures, and each function_call's signature, are kept in
 *   providerData.geminiSignatures / geminiThoughts and echoed back, as Gemini 3 requires in stateless mode
 * - interaction.completed {interaction: {status, usage}} → usage (total_input_tokens / total_output_tokens) and
 *   finish: requires_action → tool_calls, completed → stop (tool_calls when calls were made), incomplete →
 *   length, failed → thrown ProviderError, anything else → other
 * - an `error` event, or a stream without interaction.completed, is a thrown ProviderError.
 *
 * Conversation → input steps: user_input {content:[text]}, model_output {content:[text]}, thought (replayed),
 * function_call {id, name, arguments (object), signature}, function_result {call_id, name, result, is_error}.
 */

// The SDK loads on first use, not at import time (CLI and MCP start-up stay fast).
import type { GoogleGenAI } from "@google/genai";
import { loadGoogleGenAISdk } from "../sdk.js";
import type {
  ConversationMessage,
  FinishReason,
  ProviderAdapter,
  ProviderConfig,
  ProviderRequest,
  ProviderStreamEvent,
} from "../types.js";
import {
  argumentsObject,
  classifyProviderError,
  historyCallIds,
  lazily,
  streamErrorEvent,
  syntheticCallId,
  truncatedStream,
} from "./shared.js";
import { mapTools } from "./tools.js";

type Step = Record<string, unknown>;

/** Renders the provider-neutral conversation as Interactions input steps. */
export function toInteractionSteps(
  messages: ConversationMessage[],
  toWire: (name: string) => string = (n) => n,
): Step[] {
  const steps: Step[] = [];
  for (const message of messages) {
    if (message.role === "user") {
      steps.push({ type: "user_input", content: [{ type: "text", text: message.content }] });
    } else if (message.role === "assistant") {
      const thoughts = message.providerData?.geminiThoughts;
      if (Array.isArray(thoughts)) steps.push(...(thoughts as Step[]));
      if (message.content) steps.push({ type: "model_output", content: [{ type: "text", text: message.content }] });
      const signatures = (message.providerData?.geminiSignatures ?? {}) as Record<string, string>;
      for (const call of message.toolCalls ?? []) {
        steps.push({
          type: "function_call",
          id: call.id,
          name: toWire(call.name),
          arguments: argumentsObject(call.arguments),
          ...(signatures[call.id] ? { signature: signatures[call.id] } : {}),
        });
      }
    } else {
      for (const result of message.results) {
        steps.push({
          type: "function_result",
          call_id: result.id,
          name: toWire(result.name),
          result: result.content,
          ...(result.ok ? {} : { is_error: true }),
        });
      }
    }
  }
  return steps;
}

/** The Gemini Interactions adapter; `config.baseURL` overrides https://generativelanguage.googleapis.com. */
export class GeminiInteractionsAdapter implements ProviderAdapter {
  readonly name = "gemini" as const;
  /** The SDK client, created on first use. */
  readonly #sdk: () => Promise<GoogleGenAI>;

  constructor(private readonly config: ProviderConfig = {}) {
    this.#sdk = lazily(() =>
      loadGoogleGenAISdk().then(
        ({ GoogleGenAI: Client }) =>
          new Client({
            apiKey: config.apiKey ?? "",
            ...(config.baseURL ? { httpOptions: { baseUrl: config.baseURL } } : {}),
          }),
      ),
    );
  }

  async *stream(request: ProviderRequest): AsyncIterable<ProviderStreamEvent> {
    const { signal } = request;
    const mapped = mapTools(this.name, request.tools, { logger: this.config.logger });
    const body: Record<string, unknown> = {
      model: request.model,
      input: toInteractionSteps(request.messages, mapped.toWire),
      stream: true,
      store: false,
      ...(request.system ? { system_instruction: request.system } : {}),
      ...(request.tools.length > 0 ? { tools: mapped.tools } : {}),
      ...(request.maxOutputTokens ? { generation_config: { max_output_tokens: request.maxOutputTokens } } : {}),
    };
    let stream: AsyncIterable<any>;
    try {
      stream = (await (
        await this.#sdk()
      ).interactions.create(
        body as any,
        {
          signal,
          retries: this.config.maxRetries
            ? { strategy: "attempt-count-backoff", maxRetries: this.config.maxRetries, retryConnectionErrors: true }
            : { strategy: "none" },
        } as any,
      )) as unknown as AsyncIterable<any>;
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    const stepsByIndex = new Map<
      number,
      { type: string; id?: string; name?: string; args: string; fullArgs?: string; step: any }
    >();
    let currentCall: { id: string; name: string; args: string; fullArgs?: string } | undefined;
    const signatures: Record<string, string> = {};
    const thoughts: Step[] = [];
    const completedCalls = new Set<string>();
    const callIds = historyCallIds(request.messages);
    let finish: { status: string; usage?: any; error?: { code?: unknown; message?: unknown } } | undefined;
    const completeCall = function* (call: { id: string; name: string; args: string; fullArgs?: string }) {
      if (completedCalls.has(call.id)) return;
      completedCalls.add(call.id);
      yield {
        type: "tool_call_completed" as const,
        id: call.id,
        name: call.name,
        arguments: call.args || call.fullArgs || "{}",
      };
    };
    try {
      // Reading stops at interaction.completed: a server that keeps the connection open after it must not hold
      // the turn.
      read: for await (const event of stream) {
        switch (event.event_type) {
          case "step.start": {
            const step = event.step ?? {};
            if (step.type === "function_call") {
              const args =
                step.arguments && Object.keys(step.arguments).length > 0 ? JSON.stringify(step.arguments) : undefined;
              const call = {
                type: "function_call",
                // A call without an id, or with the id of an earlier call of the turn or the chat, gets one of its
                // own: the calls are told apart (and answered) by id.
                id:
                  typeof step.id === "string" && step.id && !callIds.has(step.id)
                    ? step.id
                    : syntheticCallId(this.name),
                name: mapped.fromWire(String(step.name)),
                args: "",
                fullArgs: args,
                step,
              };
              callIds.add(call.id);
              stepsByIndex.set(event.index, call);
              currentCall = call;
              if (typeof step.signature === "string") signatures[call.id] = step.signature;
              yield { type: "tool_call_started", id: call.id, name: call.name };
            } else {
              stepsByIndex.set(event.index, { type: String(step.type), args: "", step: { ...step } });
              if (step.type === "model_output" && Array.isArray(step.content)) {
                for (const part of step.content) {
                  if (part?.type === "text" && part.text) yield { type: "text_delta", delta: part.text };
                }
              }
            }
            break;
          }
          case "step.delta": {
            const delta = event.delta ?? {};
            const state = stepsByIndex.get(event.index);
            if (delta.type === "text") {
              if (delta.text) yield { type: "text_delta", delta: delta.text };
            } else if (delta.type === "arguments_delta") {
              const call = state?.type === "function_call" ? state : currentCall;
              if (call && typeof delta.arguments === "string" && delta.arguments) {
                call.args += delta.arguments;
                yield { type: "tool_call_arguments_delta", id: call.id!, delta: delta.arguments };
              }
            } else if (delta.type === "thought_signature" && state?.type === "thought") {
              state.step.signature = delta.signature;
            }
            break;
          }
          case "step.stop": {
            const state = stepsByIndex.get(event.index);
            if (state?.type === "function_call") {
              yield* completeCall(state as { id: string; name: string; args: string; fullArgs?: string });
              if (currentCall === state) currentCall = undefined;
            } else if (state?.type === "thought" && state.step.signature) {
              thoughts.push({ type: "thought", signature: state.step.signature });
            }
            break;
          }
          case "interaction.completed":
            finish = {
              status: event.interaction?.status ?? "completed",
              usage: event.interaction?.usage,
              error: Array.isArray(event.interaction?.errors) ? event.interaction.errors[0] : undefined,
            };
            break read;
          case "interaction.status_update":
            if (event.status === "failed") {
              throw streamErrorEvent(this.name, "failed", "the interaction failed");
            }
            break;
          case "error":
            throw streamErrorEvent(
              this.name,
              event.error?.code === undefined ? undefined : String(event.error.code),
              event.error?.message ?? "",
            );
          default:
            break;
        }
      }
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    if (!finish) {
      throw truncatedStream(this.name, "interaction.completed", signal);
    }
    if (finish.status === "failed") {
      // The interaction's own diagnostic (its first recorded error), when it gives one.
      const { code, message } = finish.error ?? {};
      throw streamErrorEvent(
        this.name,
        typeof code === "string" && code ? code : "failed",
        typeof message === "string" && message ? message : "the interaction failed",
      );
    }
    // Calls whose step.stop never came (a server that goes straight to interaction.completed) complete here.
    for (const state of stepsByIndex.values()) {
      if (state.type === "function_call")
        yield* completeCall(state as { id: string; name: string; args: string; fullArgs?: string });
    }
    if (finish.usage) {
      yield {
        type: "usage",
        inputTokens: finish.usage.total_input_tokens ?? 0,
        // Gemini counts thought tokens apart from its output tokens; the normalized count includes them.
        outputTokens: (finish.usage.total_output_tokens ?? 0) + (finish.usage.total_thought_tokens ?? 0),
        ...(typeof finish.usage.total_thought_tokens === "number"
          ? { reasoningTokens: finish.usage.total_thought_tokens }
          : {}),
      };
    }
    let reason: FinishReason;
    // A turn cut short says so even when it was calling tools (its last call's arguments may be incomplete).
    if (finish.status === "incomplete" || finish.status === "budget_exceeded") reason = "length";
    else if (completedCalls.size > 0 || finish.status === "requires_action") reason = "tool_calls";
    else if (finish.status === "completed") reason = "stop";
    else reason = "other";
    const providerData: Record<string, unknown> = {};
    if (Object.keys(signatures).length > 0) providerData.geminiSignatures = signatures;
    if (thoughts.length > 0) providerData.geminiThoughts = thoughts;
    yield {
      type: "finish",
      reason,
      providerReason: finish.status,
      ...(Object.keys(providerData).length > 0 ? { providerData } : {}),
    };
  }
}
