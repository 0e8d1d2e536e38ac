/**
 * Helpers shared by the four streaming adapters: error classification (abort vs provider failure) and argument
 * text handling. Adapters never execute tools.
 */

import { ProviderError, type ProviderName } from "../types.js";

/**
 * Turns whatever an SDK threw into what the adapter contract promises: when the caller's signal fired, an Error
 * named "AbortError" (original in `cause`); otherwise a {@link ProviderError} carrying the HTTP status when there
 * was one and a message that says what to check next.
 */
export function classifyProviderError(provider: ProviderName, error: unknown, signal?: AbortSignal): Error {
  if (error instanceof ProviderError) return error;
  const err = error instanceof Error ? error : new Error(String(error));
  if (signal?.aborted || err.name === "AbortError" || err.constructor?.name === "APIUserAbortError") {
    const abort = new Error(`The ${provider} request was aborted by the caller.`, { cause: err });
    abort.name = "AbortError";
    return abort;
  }
  const status = statusOf(err);
  const detail = (err.message || err.name).replace(/[.\s]+$/, "");
  const hint =
    status === 401 || status === 403
      ? " Check the API key."
      : status === 404
        ? " Check the model name and the base URL."
        : status === 429
          ? " Rate limited: retry later."
          : status === undefined
            ? " The connection failed or the stream broke; check the base URL and retry."
            : "";
  return new ProviderError(
    provider,
    `${provider} request failed${status ? ` (HTTP ${status})` : ""}: ${detail}.${hint}`,
    status,
    {
      cause: err,
    },
  );
}

function statusOf(error: Error): number | undefined {
  const candidate = (error as { status?: unknown; statusCode?: unknown }).status ?? (error as any).statusCode;
  if (typeof candidate === "number" && candidate >= 100) return candidate;
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error && cause !== error) return statusOf(cause);
  return undefined;
}

/**
 * Parses tool-call arguments text into the JSON object a provider wants echoed back (Anthropic `input`, Gemini
 * `arguments`). Text that is not a JSON object (a model's malformed arguments) becomes `{}`; the tool result the
 * loop feeds back already explains the validation failure to the model.
 */
export function argumentsObject(text: string): Record<string, unknown> {
  if (!text.trim()) return {};
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/**
 * The error for a stream that ended without its terminal event: an AbortError when the caller's signal fired
 * (the SDK may end the iteration quietly on abort), else a ProviderError for a truncated or broken stream.
 */
export function truncatedStream(provider: ProviderName, expected: string, signal?: AbortSignal): Error {
  if (signal?.aborted) return classifyProviderError(provider, new Error("aborted"), signal);
  return new ProviderError(
    provider,
    `${provider} stream ended before ${expected}: the connection was cut or the server misbehaved. Retry the turn.`,
  );
}

/**
 * A value created on first use and shared afterwards: the adapters load their SDK this way, so importing Toolhost
 * (every CLI command, every MCP session) does not pay for SDKs a chat may never use.
 */
export function lazily<T>(create: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => {
    value ??= create();
    return value;
  };
}
