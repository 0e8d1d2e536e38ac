/**
 * OpenAI-compatible Chat Completions streaming adapter, on the official `openai` SDK (`client.chat.completions.create({
 * stream: true })`). The base URL is configurable, so local servers that speak Chat Completions (llama.cpp, vLLM,
 * Ollama's /v1, LM Studio…) work too.
 *
 * Wire → normalized events:
 * - `choices[0].delta.content` → text_delta
 * - `delta.tool_calls[i]` with an `id` → tool_call_started; later pieces for the same `index` →
 *   tool_call_arguments_delta (a server that sends the name/arguments in the first piece is handled too); a call
 *   without an id, or with one used before in the chat or the turn (servers that number every turn's calls from
 *   call_0), gets an id of its own
 * - `finish_reason` → tool_call_completed for every call of the turn, then (after the usage chunk requested with
 *   `stream_options.include_usage`) finish: stop / tool_calls (also legacy function_call) / length / content_filter
 * - a stream that ends without any finish_reason is a thrown ProviderError; `data: [DONE]` alone is not enough.
 *
 * - `delta.reasoning_content` (or `delta.reasoning`) → reasoning_delta; the turn's whole reasoning is kept as
 *   providerData.reasoningContent
 *
 * Conversation → messages: system first, user messages, assistant messages with `tool_calls`
 * (`{id, type:'function', function:{name, arguments}}`) and the turn's `reasoning_content` when it had one (servers
 * with a thinking mode reject a tool-calling history without it), then one `role: 'tool'` message per result with
 * its `tool_call_id`.
 */

// The SDK loads on first use, not at import time (CLI and MCP start-up stay fast).
import type OpenAI from "openai";
import type {
  ChatCompletionChunk,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import { createOpenAIClient } from "../sdk.js";
import type {
  ConversationMessage,
  FinishReason,
  ProviderAdapter,
  ProviderConfig,
  ProviderRequest,
  ProviderStreamEvent,
} from "../types.js";
import { classifyProviderError, historyCallIds, lazily, syntheticCallId, truncatedStream } from "./shared.js";
import { mapTools } from "./tools.js";

/** Renders the provider-neutral conversation as Chat Completions messages. */
export function toChatMessages(
  system: string | undefined,
  messages: ConversationMessage[],
  toWire: (name: string) => string = (n) => n,
): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  if (system) out.push({ role: "system", content: system });
  for (const message of messages) {
    if (message.role === "user") {
      out.push({ role: "user", content: message.content });
    } else if (message.role === "assistant") {
      const calls = message.toolCalls ?? [];
      const reasoning = message.providerData?.reasoningContent;
      out.push({
        role: "assistant",
        content: message.content || (calls.length > 0 ? null : ""),
        // Thinking-mode servers require the reasoning back on the assistant message that carries tool calls (and
        // ignore it elsewhere): it is sent wherever the turn produced some.
        ...(typeof reasoning === "string" && reasoning ? { reasoning_content: reasoning } : {}),
        ...(calls.length > 0
          ? {
              tool_calls: calls.map((c) => ({
                id: c.id,
                type: "function" as const,
                function: { name: toWire(c.name), arguments: c.arguments },
              })),
            }
          : {}),
      });
    } else {
      for (const result of message.results) {
        out.push({ role: "tool", tool_call_id: result.id, content: result.content });
      }
    }
  }
  return out;
}

const FINISH: Record<string, FinishReason> = {
  stop: "stop",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  length: "length",
  content_filter: "content_filter",
};

/** The reasoning text of one streamed delta, whichever field the server uses for it. */
function reasoningOf(delta: object): string | undefined {
  const { reasoning_content: content, reasoning } = delta as { reasoning_content?: unknown; reasoning?: unknown };
  if (typeof content === "string" && content) return content;
  if (typeof reasoning === "string" && reasoning) return reasoning;
  return undefined;
}

/**
 * A tool-call arguments piece as text. Some compatible servers send the arguments as an already-parsed JSON object
 * instead of a string (in one piece): that object is serialized, never concatenated as `[object Object]`.
 */
function argumentsText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === null || value === undefined) return "";
  return JSON.stringify(value) ?? "";
}

/** The Chat Completions adapter; `config.baseURL` selects the server (default api.openai.com/v1). */
export class OpenAIChatAdapter implements ProviderAdapter {
  readonly name = "openai-chat" as const;
  /** The SDK client, created on first use. */
  readonly #sdk: () => Promise<OpenAI>;

  private readonly chatStrict: boolean;

  constructor(private readonly config: ProviderConfig = {}) {
    this.#sdk = lazily(() => createOpenAIClient(config));
    this.chatStrict =
      config.chatStrict ?? (!config.baseURL || /^https:\/\/api\.openai\.com(\/|$)/.test(config.baseURL));
  }

  async *stream(request: ProviderRequest): AsyncIterable<ProviderStreamEvent> {
    const { signal } = request;
    const mapped = mapTools(this.name, request.tools, { logger: this.config.logger, chatStrict: this.chatStrict });
    let stream: AsyncIterable<ChatCompletionChunk>;
    try {
      stream = await (await this.#sdk()).chat.completions.create(
        {
          model: request.model,
          messages: toChatMessages(request.system, request.messages, mapped.toWire),
          ...(request.tools.length > 0 ? { tools: mapped.tools as ChatCompletionTool[] } : {}),
          ...(request.maxOutputTokens ? { max_tokens: request.maxOutputTokens } : {}),
          stream: true,
          stream_options: { include_usage: true },
        },
        { signal },
      );
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    // The turn's calls in the order they appeared, and the call each wire `index` last referred to. A call keeps the
    // id the server sent (`wire`, which its later pieces name) unless that id was used before, in the chat or earlier
    // in this turn (some compatible servers number every turn's calls from call_0): it then gets an id of its own,
    // since a chat turn's journal, approvals and sub-agent links are keyed by call id.
    const calls: { wire: string; id: string; name: string; args: string; started: boolean }[] = [];
    const usedIds = historyCallIds(request.messages);
    const callId = (call: (typeof calls)[number]): string => {
      if (!call.id) {
        call.id = call.wire && !usedIds.has(call.wire) ? call.wire : syntheticCallId(this.name);
        usedIds.add(call.id);
      }
      return call.id;
    };
    const byIndex = new Map<number, (typeof calls)[number]>();
    let finishReason: string | undefined;
    let refused = false;
    let reasoningText = "";
    let usage: { inputTokens: number; outputTokens: number; reasoningTokens?: number } | undefined;
    try {
      for await (const chunk of stream) {
        if (chunk.usage) usage = chatCompletionUsage(chunk.usage);
        const choice = chunk.choices?.[0];
        if (!choice) {
          // The usage chunk after the finish_reason is the last one with data: stop reading there (a server that
          // keeps the connection open after it would otherwise hold the turn forever).
          if (finishReason && chunk.usage) break;
          continue;
        }
        const delta = choice.delta ?? {};
        // Thinking-mode servers stream the reasoning apart from the answer: `reasoning_content` (DeepSeek and
        // compatible servers) or `reasoning` (some gateways).
        const thought = reasoningOf(delta);
        if (thought) {
          reasoningText += thought;
          yield { type: "reasoning_delta", delta: thought };
        }
        if (delta.content) yield { type: "text_delta", delta: delta.content };
        if (delta.refusal) {
          refused = true;
          yield { type: "text_delta", delta: delta.refusal };
        }
        for (const piece of delta.tool_calls ?? []) {
          // Pieces are matched to calls by `index`. Some compatible servers omit it: a new id opens a new call, a
          // piece without one continues the last. Some number every call 0: a piece with another id and a name of
          // its own under the index of a started call opens a new call instead of joining that one.
          const known = piece.id ? calls.findLast((c) => c.wire === piece.id) : undefined;
          let call = typeof piece.index === "number" ? byIndex.get(piece.index) : piece.id ? known : calls.at(-1);
          if (call && piece.id && piece.id !== call.wire) {
            if (known) call = known;
            else if (call.started && piece.function?.name) call = undefined;
          }
          if (!call) {
            call = { wire: piece.id ?? "", id: "", name: "", args: "", started: false };
            calls.push(call);
          }
          if (typeof piece.index === "number") byIndex.set(piece.index, call);
          // The id and name are fixed once the call has started (some servers repeat them on every piece).
          if (piece.id && !call.started) call.wire = piece.id;
          if (piece.function?.name && !call.started) call.name += piece.function.name;
          if (!call.started && call.name) {
            call.started = true;
            yield { type: "tool_call_started", id: callId(call), name: mapped.fromWire(call.name) };
          }
          const args = argumentsText(piece.function?.arguments);
          if (args) {
            call.args += args;
            if (call.started) yield { type: "tool_call_arguments_delta", id: call.id, delta: args };
          }
        }
        if (choice.finish_reason) finishReason = choice.finish_reason;
        if (finishReason && chunk.usage) break;
      }
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    if (!finishReason) {
      throw truncatedStream(this.name, "a finish_reason", signal);
    }
    for (const call of calls) {
      const name = mapped.fromWire(call.name);
      if (!call.started) yield { type: "tool_call_started", id: callId(call), name };
      yield { type: "tool_call_completed", id: callId(call), name, arguments: call.args || "{}" };
    }
    if (usage) yield { type: "usage", ...usage };
    // A turn cut short (output limit, content filter) says so even when it was calling tools: its last call's
    // arguments may be incomplete, and the loop does not run such a call.
    const mappedReason = FINISH[finishReason];
    const reason: FinishReason =
      mappedReason === "length" || mappedReason === "content_filter"
        ? mappedReason
        : calls.length > 0
          ? "tool_calls"
          : refused && finishReason === "stop"
            ? "content_filter"
            : (mappedReason ?? "other");
    yield {
      type: "finish",
      reason,
      providerReason: finishReason,
      ...(reasoningText ? { providerData: { reasoningContent: reasoningText } } : {}),
    };
  }
}

/** The usage numbers of a Chat Completions response (OpenAI's shape; compatible servers fill it their own way). */
export interface ChatCompletionUsageNumbers {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
}

/**
 * Normalized usage of a Chat Completions response, so that `outputTokens` means every generated token, reasoning
 * included, on every server. OpenAI counts reasoning inside `completion_tokens`; some compatible servers count it
 * beside it. Which one a response did is decided from its own numbers: reasoning counts outside when
 * `total_tokens` equals prompt + completion + reasoning (and not prompt + completion), or, without a total, when
 * the reasoning alone exceeds `completion_tokens` (it cannot be a part of it); otherwise inside, as OpenAI
 * documents. `reasoningTokens` is the reasoning count as reported, when reported.
 */
export function chatCompletionUsage(usage: ChatCompletionUsageNumbers): {
  inputTokens: number;
  outputTokens: number;
  reasoningTokens?: number;
} {
  const input = usage.prompt_tokens ?? 0;
  const completion = usage.completion_tokens ?? 0;
  const reasoning = usage.completion_tokens_details?.reasoning_tokens;
  const total = usage.total_tokens;
  let outside = false;
  if (typeof reasoning === "number" && reasoning > 0) {
    if (typeof total === "number" && total !== input + completion) outside = total === input + completion + reasoning;
    else if (typeof total !== "number") outside = reasoning > completion;
  }
  return {
    inputTokens: input,
    outputTokens: outside ? completion + (reasoning ?? 0) : completion,
    ...(typeof reasoning === "number" ? { reasoningTokens: reasoning } : {}),
  };
}
