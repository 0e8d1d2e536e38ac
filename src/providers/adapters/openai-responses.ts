/**
 * OpenAI Responses API streaming adapter, on the official `openai` SDK (`client.responses.create({ stream: true })`).
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
 * `function_call_output` items matched by `call_id` (the call's `arguments` echoed verbatim). A turn that reasoned
 * (providerData.openaiReasoning) goes back in its output order (openaiOrder), its messages and calls with their
 * item ids, since the API pairs each reasoning item with the item that followed it.
 */

// The SDK loads on first use, not at import time (CLI and MCP start-up stay fast).
import type OpenAI from "openai";
import type { ResponseInputItem, ResponseStreamEvent, Tool } from "openai/resources/responses/responses";
import { createOpenAIClient } from "../sdk.js";
import type {
  ConversationMessage,
  FinishReason,
  ProviderAdapter,
  ProviderConfig,
  ProviderRequest,
  ProviderStreamEvent,
} from "../types.js";
import { classifyProviderError, lazily, streamErrorEvent, truncatedStream } from "./shared.js";
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
      const ordered = orderedOutputItems(message, toWire);
      if (ordered) {
        items.push(...ordered);
        continue;
      }
      const reasoning = message.providerData?.openaiReasoning;
      if (Array.isArray(reasoning)) items.push(...(reasoning as ResponseInputItem[]));
      const parts = messageItems(message.providerData?.openaiMessages);
      if (parts) {
        // Each message item goes back as it came (id and phase kept), so commentary stays commentary.
        for (const part of parts) items.push(messageItem(part));
      } else if (message.content) items.push({ role: "assistant", content: message.content });
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

/**
 * The output items of a turn that reasoned, in the order the response produced them and with their ids
 * (providerData.openaiOrder): the API pairs each reasoning item with the item that followed it, by id, and
 * refuses ("Item 'rs_…' of type 'reasoning' was provided without its required following item") a reasoning item
 * followed by anything else. A reasoning item that nothing followed is left out. Undefined when the turn did not
 * record its order (stored before it was kept, or no reasoning): the caller then uses the plain layout.
 */
function orderedOutputItems(
  message: Extract<ConversationMessage, { role: "assistant" }>,
  toWire: (name: string) => string,
): ResponseInputItem[] | undefined {
  const data = message.providerData;
  const order = data?.openaiOrder;
  const reasoning = data?.openaiReasoning;
  const callItems = (data?.openaiCallItems ?? {}) as Record<string, unknown>;
  if (!Array.isArray(order) || !Array.isArray(reasoning)) return undefined;
  const messages = messageItems(data?.openaiMessages) ?? [];
  const calls = message.toolCalls ?? [];
  const entries: { reasoning: boolean; item: ResponseInputItem; callId?: string; messageId?: string }[] = [];
  for (const id of order) {
    if (typeof id !== "string") return undefined;
    const thought = reasoning.find((r) => (r as { id?: unknown })?.id === id);
    const part = messages.find((m) => m.id === id);
    const call = calls.find((c) => callItems[c.id] === id);
    if (thought) entries.push({ reasoning: true, item: thought as ResponseInputItem });
    else if (part) entries.push({ reasoning: false, item: messageItem(part), messageId: part.id });
    else if (call) {
      const item = { type: "function_call", id, call_id: call.id, name: toWire(call.name), arguments: call.arguments };
      entries.push({ reasoning: false, item: item as ResponseInputItem, callId: call.id });
    }
  }
  const kept = entries.filter((e, i) => !e.reasoning || (entries[i + 1] && !entries[i + 1]!.reasoning));
  const items = kept.map((e) => e.item);
  // Whatever the order did not cover still goes back: the text (when no message item carried it), the calls.
  if (message.content && !kept.some((e) => e.messageId)) items.push({ role: "assistant", content: message.content });
  for (const call of calls) {
    if (!kept.some((e) => e.callId === call.id)) {
      items.push({ type: "function_call", call_id: call.id, name: toWire(call.name), arguments: call.arguments });
    }
  }
  return items;
}

/** A message output item sent back as it came (id and phase kept). */
function messageItem(part: MessageItem): ResponseInputItem {
  return {
    type: "message",
    role: "assistant",
    id: part.id,
    status: "completed",
    content: [{ type: "output_text", text: part.text, annotations: [] }],
    ...(part.phase ? { phase: part.phase } : {}),
  } as ResponseInputItem;
}

/** One assistant message item of a response as stored in providerData.openaiMessages. */
interface MessageItem {
  id: string;
  text: string;
  phase?: "commentary" | "final_answer";
}

function messageItems(value: unknown): MessageItem[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  const items = value.filter(
    (v): v is MessageItem => typeof v?.id === "string" && typeof v?.text === "string" && v.id.startsWith("msg"),
  );
  return items.length === value.length ? items : undefined;
}

/** Separator written between the texts of two message items of one response (stream and stored content). */
export const MESSAGE_ITEM_SEPARATOR = "\n\n";

/** The OpenAI Responses adapter. `config.baseURL` points it at any server speaking the Responses API. */
export class OpenAIResponsesAdapter implements ProviderAdapter {
  readonly name = "openai" as const;
  /** The SDK client, created on first use. */
  readonly #sdk: () => Promise<OpenAI>;

  constructor(private readonly config: ProviderConfig = {}) {
    this.#sdk = lazily(() => createOpenAIClient(config));
  }

  async *stream(request: ProviderRequest): AsyncIterable<ProviderStreamEvent> {
    const { signal } = request;
    const calls = new Map<string, { callId: string; name: string; args: string; completed: boolean }>();
    const reasoning: unknown[] = [];
    // Output item ids in output order, and each call's item id: a turn that reasoned is sent back in that order.
    const order: string[] = [];
    const callItems: Record<string, string> = {};
    // Message items in output order; texts of separate items are never run together.
    const messages: MessageItem[] = [];
    let textSoFar = false;
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
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    let finished = false;
    try {
      // Reading stops at the terminal event: a server that keeps the connection open after it must not hold the turn.
      read: for await (const event of stream) {
        switch (event.type) {
          case "response.output_text.delta":
            if (event.delta) {
              textSoFar = true;
              yield { type: "text_delta", delta: event.delta, itemId: event.item_id };
            }
            break;
          case "response.refusal.delta":
            // A refusal is shown to the user as text; the turn then finishes as content_filter.
            refused = true;
            if (event.delta) yield { type: "text_delta", delta: event.delta };
            break;
          case "response.output_item.added":
            if (event.item.type === "message") {
              // A second message item (e.g. the final answer after commentary) starts a new paragraph.
              if (textSoFar) yield { type: "text_delta", delta: MESSAGE_ITEM_SEPARATOR, itemId: event.item.id };
              textSoFar = false;
            } else if (event.item.type === "function_call") {
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
            if (typeof event.item.id === "string" && event.item.id) order.push(event.item.id);
            if (event.item.type === "function_call") {
              if (event.item.id) callItems[event.item.call_id] = event.item.id;
              const key = event.item.id ?? event.item.call_id;
              let call = calls.get(key);
              if (!call) {
                // A call announced only by its done event still starts before it completes.
                call = {
                  callId: event.item.call_id,
                  name: mapped.fromWire(event.item.name),
                  args: "",
                  completed: false,
                };
                yield { type: "tool_call_started", id: call.callId, name: call.name };
              }
              if (call.completed) break;
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
            } else if (event.item.type === "message") {
              const text = event.item.content
                .map((part) => (part.type === "output_text" ? part.text : part.type === "refusal" ? part.refusal : ""))
                .join("");
              const phase = event.item.phase ?? undefined;
              messages.push({ id: event.item.id, text, ...(phase ? { phase } : {}) });
            }
            break;
          case "response.completed":
          case "response.incomplete": {
            // A call still streaming when the response stopped (output limit) completes with what arrived: the
            // loop answers it as cut short instead of losing it.
            for (const call of calls.values()) {
              if (call.completed) continue;
              call.completed = true;
              yield { type: "tool_call_completed", id: call.callId, name: call.name, arguments: call.args };
            }
            const usage = event.response.usage;
            if (usage) {
              const reasoning = usage.output_tokens_details?.reasoning_tokens;
              yield {
                type: "usage",
                inputTokens: usage.input_tokens,
                outputTokens: usage.output_tokens,
                ...(typeof reasoning === "number" ? { reasoningTokens: reasoning } : {}),
              };
            }
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
                ...(reasoning.length
                  ? { openaiReasoning: reasoning, openaiOrder: order, openaiCallItems: callItems }
                  : {}),
                ...(messages.length > 1 || messages.some((m) => m.phase) || (reasoning.length && messages.length)
                  ? { openaiMessages: messages }
                  : {}),
              },
            };
            break read;
          }
          case "response.failed":
            throw streamErrorEvent(
              this.name,
              event.response.error?.code ?? undefined,
              event.response.error?.message ?? "the response failed",
            );
          case "error":
            throw streamErrorEvent(this.name, event.code ?? undefined, event.message);
          default:
            break;
        }
      }
    } catch (error) {
      throw classifyProviderError(this.name, error, signal, this.config.baseURL);
    }
    if (!finished) {
      throw truncatedStream(this.name, "response.completed", signal);
    }
  }
}
