/**
 * The provider adapter contract. Every provider adapter streams one model turn and normalizes the provider's wire
 * events into {@link ProviderStreamEvent}s; the tool loop (src/loop) executes tools and feeds results back through the
 * same adapter, which renders the provider-neutral {@link ConversationMessage}s into the provider's own format.
 * Adapters never execute tools.
 */

import { BrandedError, errorBrand } from "../core/errors.js";
import type { Logger, ToolDefinition } from "../core/types.js";

/** The four supported wire formats. `openai-chat` is any OpenAI-compatible Chat Completions server. */
export type ProviderName = "openai" | "openai-chat" | "gemini" | "anthropic";

/** Why a model turn ended, normalized across providers. */
export type FinishReason = "stop" | "tool_calls" | "length" | "content_filter" | "other";

/**
 * Normalized stream events every adapter yields, in this order per turn: any number of `text_delta` and
 * tool-call events (`tool_call_started` → `tool_call_arguments_delta`* → `tool_call_completed` per call; calls of
 * one turn may interleave), then `usage` (when the provider reports it), then exactly one `finish`.
 * `arguments` in `tool_call_completed` is the complete JSON text as the model sent it (not parsed, not validated:
 * "{}" when the model sent nothing). Token counts are in tokens.
 */
export type ProviderStreamEvent =
  | {
      type: "text_delta";
      delta: string;
      /**
       * The provider's id of the output item the text belongs to, where a response can hold several message items
       * (Responses: commentary, then the final answer). Between two items the adapter sends a paragraph break.
       */
      itemId?: string;
    }
  | {
      /** Reasoning ("thinking") text the provider streams apart from the answer (Chat Completions `reasoning_content`). */
      type: "reasoning_delta";
      delta: string;
    }
  | { type: "tool_call_started"; id: string; name: string }
  | { type: "tool_call_arguments_delta"; id: string; delta: string }
  | { type: "tool_call_completed"; id: string; name: string; arguments: string }
  | {
      /**
       * Token usage of the turn, the same quantities for every provider: `inputTokens` every prompt token
       * (cached ones included), `outputTokens` every generated token INCLUDING reasoning ("thinking") tokens, and
       * `reasoningTokens` the part of `outputTokens` spent on reasoning, when the provider reports it (OpenAI
       * `reasoning_tokens`, Gemini thought tokens — which Gemini itself reports apart from its output count).
       */
      type: "usage";
      inputTokens: number;
      outputTokens: number;
      reasoningTokens?: number;
    }
  | {
      type: "finish";
      reason: FinishReason;
      providerReason?: string;
      /**
       * Opaque provider data of this turn's assistant message (e.g. Responses item ids, Gemini thought signatures,
       * Anthropic thinking blocks); the loop stores it as `ConversationMessage.providerData` and passes it back.
       */
      providerData?: Record<string, unknown>;
    };

/** One tool call the assistant made: `id` is the provider's call id (Responses call_id, Anthropic tool_use id…). */
export interface ConversationToolCall {
  id: string;
  name: string;
  /** Raw JSON arguments text as the model sent it. */
  arguments: string;
}

/** One tool result fed back to the model; `ok: false` marks a failure (Anthropic is_error, etc.). */
export interface ConversationToolResult {
  /** The call id this result answers. */
  id: string;
  name: string;
  ok: boolean;
  /** The text the model sees (a JSON-serialized result or an error message). */
  content: string;
}

/** Provider-neutral conversation the loop keeps and stores. */
export type ConversationMessage =
  | { role: "user"; content: string }
  | {
      role: "assistant";
      content: string;
      toolCalls?: ConversationToolCall[];
      /** Opaque provider data that must be echoed back (e.g. Gemini thought signatures, Responses item ids). */
      providerData?: Record<string, unknown>;
    }
  | { role: "tool"; results: ConversationToolResult[] };

/** One model turn to stream. `maxOutputTokens` is in tokens. */
export interface ProviderRequest {
  model: string;
  system?: string;
  messages: ConversationMessage[];
  tools: ToolDefinition[];
  signal?: AbortSignal;
  maxOutputTokens?: number;
}

/**
 * A streaming adapter over one provider's official SDK. `stream()` yields normalized events; a transport or
 * protocol failure (connection reset, HTTP error, stream ending without its terminal event) is thrown from the
 * iterator as an Error (a {@link ProviderError}); an abort through `request.signal` cancels the HTTP
 * request and ends iteration by throwing an Error named "AbortError" (the SDK's error in `cause`), which
 * {@link isAbortError} recognizes.
 */
export interface ProviderAdapter {
  readonly name: ProviderName;
  stream(request: ProviderRequest): AsyncIterable<ProviderStreamEvent>;
}

/** Credentials and endpoint for one provider; `baseURL` points the SDK at a compatible or local server. */
export interface ProviderConfig {
  apiKey?: string;
  baseURL?: string;
  /** Receives the tool mapper's warnings (a tool sent non-strict, and why). */
  logger?: Pick<Logger, "warn">;
  /**
   * openai-chat only: send OpenAI strict-mode tool schemas. Default: true when no baseURL is set or it points at
   * api.openai.com, false for other (local, compatible) servers, many of which reject `strict`.
   */
  chatStrict?: boolean;
  /**
   * How many times the SDK retries a request that failed before streaming began (connection error, 408/409/429,
   * 5xx). Default 0: a failure surfaces at once and the loop reports it. A stream cut mid-way is never retried.
   */
  maxRetries?: number;
}

/**
 * A provider call failed (HTTP error, broken stream, protocol violation). `status` is the HTTP status when there
 * was one; `cause` holds the SDK's original error.
 */
export class ProviderError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ProviderError");
  override readonly name = "ProviderError";
  constructor(
    readonly provider: ProviderName,
    message: string,
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** True for the errors SDKs throw when the caller's AbortSignal fired (checked by name and by message shape). */
export function isAbortError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return (
    error.name === "AbortError" ||
    error.name === "APIUserAbortError" ||
    error.constructor?.name === "APIUserAbortError" ||
    /aborted|abort/i.test(error.name)
  );
}
