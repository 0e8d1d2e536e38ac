/**
 * Anthropic Messages streaming adapter, on the official `@anthropic-ai/sdk` (`client.messages.create({ stream: true
 * })`, raw events).
 *
 * Wire → normalized events:
 * - message_start → (input token count remembered)
 * - content_block_start text / content_block_delta text_delta → text_delta
 * - content_block_start tool_use → tool_call_started {id: toolu_…}; input_json_delta → tool_call_arguments_delta;
 *   content_block_stop → tool_call_completed with the concatenated JSON ("{}" when empty)
 * - thinking / redacted_thinking blocks are kept (with signatures) in providerData.anthropicThinking and echoed
 *   back before the turn's tool_use blocks, as extended thinking requires
 * - message_delta stop_reason → finish: end_turn/stop_sequence → stop, tool_use → tool_calls, max_tokens →
 *   length, refusal → content_filter, anything else (pause_turn…) → other; usage from message_start + message_delta
 * - a stream without message_stop, or an `error` event, is a thrown ProviderError.
 *
 * Conversation → messages: assistant turns as content blocks (thinking…, text, tool_use with the parsed input),
 * results as ONE user message of `tool_result` blocks (`tool_use_id`, `content`, `is_error: true` on failures).
 */

// The SDK loads on first use, not at import time (CLI and MCP start-up stay fast).
import type Anthropic from "@anthropic-ai/sdk";
import type {
  ContentBlockParam,
  MessageParam,
  RawMessageStreamEvent,
  Tool,
} from "@anthropic-ai/sdk/resources/messages/messages";
import { loadAnthropicSdk } from "../sdk.js";
import type {
  ConversationMessage,
  FinishReason,
  ProviderAdapter,
  ProviderConfig,
  ProviderRequest,
  ProviderStreamEvent,
} from "../types.js";
import { argumentsObject, classifyProviderError, lazily, truncatedStream } from "./shared.js";
import { mapTools } from "./tools.js";

/** Default `max_tokens` (required by the Messages API) when the request sets none. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

/** Renders the provider-neutral conversation as Anthropic messages. */
export function toAnthropicMessages(
  messages: ConversationMessage[],
  toWire: (name: string) => string = (n) => n,
): MessageParam[] {
  const out: MessageParam[] = [];
  for (const message of messages) {
    if (message.role === "user") {
      out.push({ role: "user", content: message.content });
    } else if (message.role === "assistant") {
      const blocks: ContentBlockParam[] = [];
      const thinking = message.providerData?.anthropicThinking;
      if (Array.isArray(thinking)) blocks.push(...(thinking as ContentBlockParam[]));
      if (message.content) blocks.push({ type: "text", text: message.content });
      for (const call of message.toolCalls ?? []) {
        blocks.push({ type: "tool_use", id: call.id, name: toWire(call.name), input: argumentsObject(call.arguments) });
      }
      if (blocks.length === 0) blocks.push({ type: "text", text: "" });
      out.push({ role: "assistant", content: blocks });
    } else {
      out.push({
        role: "user",
        content: message.results.map((r) => ({
          type: "tool_result" as const,
          tool_use_id: r.id,
          content: r.content,
          ...(r.ok ? {} : { is_error: true }),
        })),
      });
    }
  }
  return out;
}

const STOP: Record<string, FinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  model_context_window_exceeded: "length",
  refusal: "content_filter",
};

/** The Anthropic Messages adapter; `config.baseURL` overrides https://api.anthropic.com. */
export class AnthropicAdapter implements ProviderAdapter {
  readonly name = "anthropic" as const;
  /** The SDK client, created on first use. */
  readonly #sdk: () => Promise<Anthropic>;

  constructor(private readonly config: ProviderConfig = {}) {
    this.#sdk = lazily(() =>
      loadAnthropicSdk().then(
        ({ default: Client }) =>
          new Client({ apiKey: config.apiKey ?? "", baseURL: config.baseURL, maxRetries: config.maxRetries ?? 0 }),
      ),
    );
  }

  async *stream(request: ProviderRequest): AsyncIterable<ProviderStreamEvent> {
    const { signal } = request;
    const mapped = mapTools(this.name, request.tools, { logger: this.config.logger });
    let stream: AsyncIterable<RawMessageStreamEvent>;
    try {
      stream = await (await this.#sdk()).messages.create(
        {
          model: request.model,
          max_tokens: request.maxOutputTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
          messages: toAnthropicMessages(request.messages, mapped.toWire),
          ...(request.system ? { system: request.system } : {}),
          ...(request.tools.length > 0 ? { tools: mapped.tools as Tool[] } : {}),
          stream: true,
        },
        { signal },
      );
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    const blocks = new Map<
      number,
      { kind: "tool"; id: string; name: string; json: string; whole?: string } | { kind: "thinking"; block: any }
    >();
    const thinking: unknown[] = [];
    let inputTokens = 0;
    let outputTokens = 0;
    let stopReason: string | null | undefined;
    let stopped = false;
    try {
      // Reading stops at message_stop: a server that keeps the connection open after it must not hold the turn.
      read: for await (const event of stream) {
        switch (event.type) {
          case "message_start":
            inputTokens = event.message.usage?.input_tokens ?? 0;
            outputTokens = event.message.usage?.output_tokens ?? 0;
            break;
          case "content_block_start": {
            const block = event.content_block;
            if (block.type === "tool_use") {
              const name = mapped.fromWire(block.name);
              // The input streams as input_json_delta; a server that sends it whole at the start is read too.
              const whole =
                block.input && typeof block.input === "object" && Object.keys(block.input).length > 0
                  ? JSON.stringify(block.input)
                  : undefined;
              blocks.set(event.index, { kind: "tool", id: block.id, name, json: "", ...(whole ? { whole } : {}) });
              yield { type: "tool_call_started", id: block.id, name };
            } else if (block.type === "text") {
              if (block.text) yield { type: "text_delta", delta: block.text };
            } else if (block.type === "thinking" || block.type === "redacted_thinking") {
              blocks.set(event.index, { kind: "thinking", block: { ...block } });
            }
            break;
          }
          case "content_block_delta": {
            const delta = event.delta;
            const state = blocks.get(event.index);
            if (delta.type === "text_delta") {
              if (delta.text) yield { type: "text_delta", delta: delta.text };
            } else if (delta.type === "input_json_delta") {
              if (state?.kind === "tool" && delta.partial_json) {
                state.json += delta.partial_json;
                yield { type: "tool_call_arguments_delta", id: state.id, delta: delta.partial_json };
              }
            } else if (state?.kind === "thinking") {
              if (delta.type === "thinking_delta") state.block.thinking = (state.block.thinking ?? "") + delta.thinking;
              if (delta.type === "signature_delta")
                state.block.signature = (state.block.signature ?? "") + delta.signature;
            }
            break;
          }
          case "content_block_stop": {
            const state = blocks.get(event.index);
            if (state?.kind === "tool") {
              yield {
                type: "tool_call_completed",
                id: state.id,
                name: state.name,
                arguments: state.json || state.whole || "{}",
              };
            } else if (state?.kind === "thinking") {
              thinking.push(state.block);
            }
            blocks.delete(event.index);
            break;
          }
          case "message_delta":
            stopReason = event.delta.stop_reason;
            if (event.usage?.output_tokens !== undefined && event.usage.output_tokens !== null) {
              outputTokens = event.usage.output_tokens;
            }
            if (typeof event.usage?.input_tokens === "number") inputTokens = event.usage.input_tokens;
            break;
          case "message_stop":
            stopped = true;
            break read;
          default:
            break;
        }
      }
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    if (!stopped) {
      throw truncatedStream(this.name, "message_stop", signal);
    }
    // A tool_use block the message stopped inside (no content_block_stop) completes with what arrived.
    for (const state of blocks.values()) {
      if (state.kind === "tool") {
        yield {
          type: "tool_call_completed",
          id: state.id,
          name: state.name,
          arguments: state.json || state.whole || "{}",
        };
      }
    }
    yield { type: "usage", inputTokens, outputTokens };
    yield {
      type: "finish",
      reason: STOP[stopReason ?? ""] ?? "other",
      ...(stopReason ? { providerReason: stopReason } : {}),
      ...(thinking.length > 0 ? { providerData: { anthropicThinking: thinking } } : {}),
    };
  }
}
