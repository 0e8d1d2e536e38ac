/**
 * OpenAI Responses API streaming adapter (issue 3, "Streaming and the loop"), on the official `openai` SDK
 * (`client.responses.create({ stream: true })`).
 *
 * Wire → normalized events:
 * - `response.output_text.delta` → text_delta
 * - `response.output_item.added` (function_call) → tool_call_started {id: call_id}
 * - `response.function_call_arguments.delta` → tool_call_arguments_delta (matched by item_id)
 * - `response.output_item.done` (function_call) → tool_call_completed with the full arguments
 * - `response.completed` / `response.incomplete` → usage + finish (tool_calls when the turn called tools;
 *   incomplete max_output_tokens → length, content_filter → content_filter)
 * - `response.failed` / `error` events → a thrown ProviderError.
 *
 * Conversation → input items: user/assistant text as messages, tool calls as `function_call` items and results as
 * `function_call_output` items matched by `call_id` (the call's `arguments` echoed verbatim). Reasoning items of
 * a turn (providerData.openaiReasoning) are echoed back before that turn's calls.
 */

// The SDK loads on first use, not at import time (CLI and MCP start-up stay fast).
import type OpenAI from "openai";
import type { ResponseInputItem, ResponseStreamEvent, Tool } from "openai/resources/responses/responses";
import { loadOpenAISdk } from "../sdk.js";
import type {
  ConversationMessage,
  FinishReason,
  ProviderAdapter,
  ProviderConfig,
  ProviderRequest,
  ProviderStreamEvent,
} from "../types.js";
import { classifyProviderError, lazily, truncatedStream } from "./shared.js";
import { mapTools } from "./tools.js";

/** Renders the provider-neutral conversation as Responses API input items. */
export function toResponsesInput(
  messages: ConversationMessage[],
  toWire: (name: string) => string = (n) => n,
): ResponseInputItem[] {
  const items: ResponseInputItem[] = [];
  for (const message of messages) {
    if (message.role === "user") {
      items.push({ role: "user", content: message.content });
    } else if (message.role === "assistant") {
      const reasoning = message.providerData?.openaiReasoning;
      if (Array.isArray(reasoning)) items.push(...(reasoning as ResponseInputItem[]));
      if (message.content) items.push({ role: "assistant", content: message.content });
      for (const call of message.toolCalls ?? []) {
        items.push({ type: "function_call", call_id: call.id, name: toWire(call.name), arguments: call.arguments });
      }
    } else {
      for (const result of message.results) {
        items.push({ type: "function_call_output", call_id: result.id, output: result.content });
      }
    }
  }
  return items;
}

/** The OpenAI Responses adapter. `config.baseURL` points it at any server speaking the Responses API. */
export class OpenAIResponsesAdapter implements ProviderAdapter {
  readonly name = "openai" as const;
  /** The SDK client, created on first use. */
  readonly #sdk: () => Promise<OpenAI>;

  constructor(private readonly config: ProviderConfig = {}) {
    this.#sdk = lazily(() =>
      loadOpenAISdk().then(
        ({ default: Client }) =>
          new Client({ apiKey: config.apiKey ?? "", baseURL: config.baseURL, maxRetries: config.maxRetries ?? 0 }),
      ),
    );
  }

  async *stream(request: ProviderRequest): AsyncIterable<ProviderStreamEvent> {
    const { signal } = request;
    const calls = new Map<string, { callId: string; name: string; args: string; completed: boolean }>();
    const reasoning: unknown[] = [];
    let refused = false;
    const mapped = mapTools(this.name, request.tools, { logger: this.config.logger });
    let stream: AsyncIterable<ResponseStreamEvent>;
    try {
      stream = await (await this.#sdk()).responses.create(
        {
          model: request.model,
          input: toResponsesInput(request.messages, mapped.toWire),
          ...(request.system ? { instructions: request.system } : {}),
          ...(request.tools.length > 0 ? { tools: mapped.tools as Tool[], parallel_tool_calls: true } : {}),
          ...(request.maxOutputTokens ? { max_output_tokens: request.maxOutputTokens } : {}),
          stream: true,
        },
        { signal },
      );
    } catch (error) {
      throw classifyProviderError(this.name, error, signal);
    }
    let finished = false;
    try {
      for await (const event of stream) {
        switch (event.type) {
          case "response.output_text.delta":
            if (event.delta) yield { type: "text_delta", delta: event.delta };
            break;
          case "response.refusal.delta":
            // A refusal is shown to the user as text; the turn then finishes as content_filter.
            refused = true;
            if (event.delta) yield { type: "text_delta", delta: event.delta };
            break;
          case "response.output_item.added":
            if (event.item.type === "function_call") {
              const key = event.item.id ?? event.item.call_id;
              calls.set(key, {
                callId: event.item.call_id,
                name: mapped.fromWire(event.item.name),
                args: "",
                completed: false,
              });
              yield { type: "tool_call_started", id: event.item.call_id, name: mapped.fromWire(event.item.name) };
            }
            break;
          case "response.function_call_arguments.delta": {
            const call = calls.get(event.item_id);
            if (call && event.delta) {
              call.args += event.delta;
              yield { type: "tool_call_arguments_delta", id: call.callId, delta: event.delta };
            }
            break;
          }
          case "response.output_item.done":
            if (event.item.type === "function_call") {
              const key = event.item.id ?? event.item.call_id;
              const call = calls.get(key) ?? {
                callId: event.item.call_id,
                name: mapped.fromWire(event.item.name),
                args: "",
                completed: false,
              };
              call.completed = true;
              calls.set(key, call);
              const args = event.item.arguments || call.args || "{}";
              yield {
                type: "tool_call_completed",
                id: call.callId,
                name: mapped.fromWire(event.item.name),
                arguments: args,
              };
            } else if (event.item.type === "reasoning") {
              reasoning.push(event.item);
            }
            break;
          case "response.completed":
          case "response.incomplete": {
            const usage = event.response.usage;
            if (usage) yield { type: "usage", inputTokens: usage.input_tokens, outputTokens: usage.output_tokens };
            let reason: FinishReason = "stop";
            let providerReason: string = event.response.status ?? "completed";
            if (event.type === "response.incomplete") {
              providerReason = event.response.incomplete_details?.reason ?? "incomplete";
              reason =
                providerReason === "max_output_tokens"
                  ? "length"
                  : providerReason === "content_filter"
                    ? "content_filter"
                    : "other";
            } else if (calls.size > 0) {
              reason = "tool_calls";
            } else if (refused) {
              reason = "content_filter";
              providerReason = "refusal";
            }
            finished = true;
            yield {
              type: "finish",
              reason,
              providerReason,
              providerData: {
                openaiResponseId: event.response.id,
                ...(reasoning.length ? { openaiReasoning: reasoning } : {}),
              },
            };
            break;
          }
          case "response.failed":
            throw classifyProviderError(
              this.name,
              new Error(event.response.error?.message ?? "the response failed"),
              signal,
            );
          case "error":
            throw classifyProviderError(this.name, new Error(`${event.code ?? "error"}: ${event.message}`), signal);
          default:
            break;
        }
      }
    } catch (error) {
      throw classifyProviderError(this.name, error, signal);
    }
    if (!finished) {
      throw truncatedStream(this.name, "response.completed", signal);
    }
  }
}
