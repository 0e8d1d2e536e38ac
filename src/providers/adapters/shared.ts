/**
 * Helpers shared by the four streaming adapters: error classification (abort vs provider failure) and argument
 * text handling. Adapters never execute tools.
 */

import { randomBytes } from "node:crypto";
import { type ConversationMessage, ProviderError, type ProviderName } from "../types.js";

/** Where each provider's SDK sends requests when no base URL is configured (named in connection errors). */
export const DEFAULT_BASE_URLS: Record<ProviderName, string> = {
  openai: "https://api.openai.com/v1",
  "openai-chat": "https://api.openai.com/v1",
  gemini: "https://generativelanguage.googleapis.com",
  anthropic: "https://api.anthropic.com",
};

/** Text without trailing dots, spaces or colons, so a sentence can be appended with exactly one full stop. */
export function sentence(text: string): string {
  return text.replace(/[.:;,\s]+$/u, "");
}

/**
 * Turns whatever an SDK threw into what the adapter contract promises: when the caller's signal fired, an Error
 * named "AbortError" (original in `cause`); otherwise a {@link ProviderError} whose message says which kind of
 * failure it was and what to do next:
 *
 * - an HTTP error response: the status and the provider's message (401/403 → check the key; 404 → the model name;
 *   429 and 5xx → retry, after the provider's retry-after when it sent one; 400 → the request or the chat's
 *   history was refused);
 * - an error event inside a stream that had started (the SDKs throw an APIError without a status): the provider's
 *   own code and message — the server was reached, so the base URL is not the problem;
 * - no response at all (connection refused, DNS, TLS, reset before any byte): names `baseURL` (the URL tried).
 */
export function classifyProviderError(
  provider: ProviderName,
  error: unknown,
  signal?: AbortSignal,
  baseURL?: string,
): Error {
  if (error instanceof ProviderError) return error;
  const err = error instanceof Error ? error : new Error(String(error));
  if (signal?.aborted || err.name === "AbortError" || err.constructor?.name === "APIUserAbortError") {
    const abort = new Error(`The ${provider} request was aborted by the caller.`, { cause: err });
    abort.name = "AbortError";
    return abort;
  }
  const status = statusOf(err);
  const detail = sentence(err.message || err.name);
  if (status !== undefined) {
    // The provider's own message (Anthropic's SDK puts the whole JSON body in `message`), without the SDK's
    // leading status code (the sentence names it already).
    const said = sentence(bodyMessage(err) ?? detail.replace(new RegExp(`^${status}\\s+`), "")) || detail;
    const wait = retryAfterSeconds(err);
    const later = wait === undefined ? "retry later" : `retry in ${wait} s (the provider's retry-after)`;
    const hint =
      status === 401 || status === 403
        ? " Check the API key."
        : status === 404
          ? " Check the model name and the base URL."
          : status === 429
            ? ` Rate limited: ${later}.`
            : status === 400
              ? " The provider refused the request as sent (for a chat, possibly its stored history)."
              : status >= 500
                ? ` The provider had a server error or is overloaded: ${later}.`
                : "";
    return new ProviderError(provider, `${provider} request failed (HTTP ${status}): ${said}.${hint}`, status, {
      cause: err,
    });
  }
  if (isConnectionError(err)) {
    const url = baseURL ?? DEFAULT_BASE_URLS[provider];
    const reason = connectionReason(err);
    // Reached, then dropped: the server accepted the connection and closed it before answering.
    if (closedAfterConnecting(err)) {
      return new ProviderError(
        provider,
        `${provider} at ${url} closed the connection before answering${reason ? ` (${reason})` : ""}. The server was reached: check that the base URL points at a ${provider}-compatible API and the server's logs, then retry.`,
        undefined,
        { cause: err },
      );
    }
    return new ProviderError(
      provider,
      `Could not reach ${provider} at ${url}${reason ? ` (${reason})` : ""}. Check the base URL and that the server is running, then retry.`,
      undefined,
      { cause: err },
    );
  }
  if (isSdkApiError(err)) return streamErrorEvent(provider, codeOf(err), bodyMessage(err) ?? detail, err);
  return new ProviderError(
    provider,
    `${provider} stream failed: ${detail}. The connection broke or the server sent something unexpected; retry the turn.`,
    undefined,
    { cause: err },
  );
}

/**
 * The error for an error event the provider sent inside a stream that had started (e.g. it rejected the tool
 * call the model generated, or hit an internal limit): reported as what it is, with the provider's code.
 */
export function streamErrorEvent(provider: ProviderName, code: string | undefined, message: string, cause?: unknown) {
  return new ProviderError(
    provider,
    `${provider} reported an error during the response${code ? ` (${code})` : ""}: ${sentence(message) || "no details given"}. The turn stopped there; retry it, or rephrase the request if it fails again.`,
    undefined,
    cause === undefined ? undefined : { cause },
  );
}

function isConnectionError(error: Error): boolean {
  const name = error.constructor?.name ?? error.name;
  if (name === "APIConnectionError" || name === "APIConnectionTimeoutError") return true;
  const code = errnoOf(error);
  return (
    code !== undefined &&
    /^(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|CERT_|UND_ERR_CONNECT)/.test(code)
  );
}

/**
 * Whether a connection error happened after the connection was made: the peer reset or closed it (ECONNRESET,
 * undici's UND_ERR_SOCKET "other side closed", "socket hang up"), as opposed to failing to connect at all.
 */
function closedAfterConnecting(error: Error): boolean {
  const code = errnoOf(error);
  if (code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET") return true;
  if (code !== undefined) return false;
  const cause = (error as { cause?: unknown }).cause;
  const text = `${error.message} ${cause instanceof Error ? cause.message : ""}`;
  return /socket hang up|other side closed|connection reset/i.test(text);
}

function errnoOf(error: unknown, depth = 0): string | undefined {
  if (!(error instanceof Error) || depth > 4) return undefined;
  const code = (error as NodeJS.ErrnoException).code;
  if (typeof code === "string" && /^[A-Z_]+$/.test(code)) return code;
  return errnoOf((error as { cause?: unknown }).cause, depth + 1);
}

function connectionReason(error: Error): string | undefined {
  const code = errnoOf(error);
  if (code) return code;
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error && cause.message ? sentence(cause.message) : undefined;
}

/** An SDK API error without an HTTP status: what the openai and Anthropic SDKs throw for an in-stream error event. */
function isSdkApiError(error: Error): boolean {
  return "headers" in error && "error" in error;
}

/** The error object of an SDK error's body: `{error: {...}}` (Anthropic) unwrapped, else the body itself. */
function errorBody(error: Error): { code?: unknown; type?: unknown; message?: unknown } | undefined {
  const body = (error as { error?: unknown }).error as Record<string, any> | undefined;
  if (!body || typeof body !== "object") return undefined;
  return body.error && typeof body.error === "object" ? body.error : body;
}

function codeOf(error: Error): string | undefined {
  const body = errorBody(error);
  const code = body?.code ?? body?.type ?? (error as { code?: unknown }).code;
  // Some gateways send a numeric code (OpenRouter: the upstream's HTTP status).
  if (typeof code === "number" && Number.isFinite(code)) return String(code);
  return typeof code === "string" && code ? code : undefined;
}

function bodyMessage(error: Error): string | undefined {
  const message = errorBody(error)?.message;
  return typeof message === "string" && message ? message : undefined;
}

/**
 * How long the provider asked the client to wait, in whole seconds, from the error's response headers:
 * `retry-after-ms`, else `retry-after` (seconds or an HTTP date). Undefined when absent or unreadable.
 */
function retryAfterSeconds(error: Error): number | undefined {
  const headers = (error as { headers?: unknown }).headers;
  const get = (name: string): string | undefined => {
    if (headers && typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
    const value = (headers as Record<string, unknown> | undefined)?.[name];
    return typeof value === "string" ? value : undefined;
  };
  const ms = Number(get("retry-after-ms"));
  if (get("retry-after-ms") && Number.isFinite(ms) && ms >= 0) return Math.ceil(ms / 1000);
  const after = get("retry-after")?.trim();
  if (!after) return undefined;
  const seconds = /^\d+(\.\d+)?$/.test(after) ? Number(after) : (Date.parse(after) - Date.now()) / 1000;
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds) : undefined;
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

/**
 * A call id for a tool call the provider streamed without one (some compatible servers omit it), unique across
 * turns: results, approvals and the history sent back all name a call by its id, so two calls must never share one.
 */
export function syntheticCallId(provider: ProviderName): string {
  return `${provider === "gemini" ? "fc" : "call"}_${randomBytes(9).toString("base64url")}`;
}

/**
 * The ids of the tool calls in a request's history: a call streamed with one of them (servers that number every
 * turn's calls from call_0) is given a {@link syntheticCallId} instead, since a chat's call ids must be unique.
 */
export function historyCallIds(messages: readonly ConversationMessage[]): Set<string> {
  const ids = new Set<string>();
  for (const m of messages) if (m.role === "assistant") for (const call of m.toolCalls ?? []) ids.add(call.id);
  return ids;
}
