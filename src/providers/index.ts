/**
 * Provider adapters: one streaming adapter per supported API, created by name (issue 3, "Streaming and the
 * loop"; "Chats (server and CLI)" for the environment variables).
 */

import { AnthropicAdapter } from "./adapters/anthropic.js";
import { GeminiInteractionsAdapter } from "./adapters/gemini-interactions.js";
import { OpenAIChatAdapter } from "./adapters/openai-chat.js";
import { OpenAIResponsesAdapter } from "./adapters/openai-responses.js";
import type { ProviderAdapter, ProviderConfig, ProviderName } from "./types.js";

export { AnthropicAdapter } from "./adapters/anthropic.js";
export { GeminiInteractionsAdapter } from "./adapters/gemini-interactions.js";
export { OpenAIChatAdapter } from "./adapters/openai-chat.js";
export { OpenAIResponsesAdapter } from "./adapters/openai-responses.js";
export * from "./types.js";

/** Every supported provider name, in display order. */
export const PROVIDER_NAMES: readonly ProviderName[] = ["openai", "openai-chat", "gemini", "anthropic"];

/** True when `value` names a supported provider. */
export function isProviderName(value: unknown): value is ProviderName {
  return typeof value === "string" && (PROVIDER_NAMES as readonly string[]).includes(value);
}

/**
 * Creates the streaming adapter for `name` (openai = Responses API, openai-chat = Chat Completions, gemini =
 * Interactions API, anthropic = Messages API) on the provider's official SDK. `config.baseURL` points the SDK at
 * another server (a proxy, a local OpenAI-compatible server, a test fake). Throws an Error for an unknown name.
 */
export function createProviderAdapter(name: ProviderName, config: ProviderConfig = {}): ProviderAdapter {
  switch (name) {
    case "openai":
      return new OpenAIResponsesAdapter(config);
    case "openai-chat":
      return new OpenAIChatAdapter(config);
    case "gemini":
      return new GeminiInteractionsAdapter(config);
    case "anthropic":
      return new AnthropicAdapter(config);
    default:
      throw new Error(`Unknown provider ${JSON.stringify(name)}: use one of ${PROVIDER_NAMES.join(", ")}.`);
  }
}

/** The environment variables each provider reads: [api key, base URL]. */
export const PROVIDER_ENV: Record<ProviderName, { apiKey: string; baseURL: string }> = {
  openai: { apiKey: "OPENAI_API_KEY", baseURL: "OPENAI_BASE_URL" },
  "openai-chat": { apiKey: "OPENAI_API_KEY", baseURL: "OPENAI_BASE_URL" },
  gemini: { apiKey: "GEMINI_API_KEY", baseURL: "GEMINI_BASE_URL" },
  anthropic: { apiKey: "ANTHROPIC_API_KEY", baseURL: "ANTHROPIC_BASE_URL" },
};

/**
 * Reads a provider's key and base URL from the environment: OPENAI_API_KEY / OPENAI_BASE_URL (openai and
 * openai-chat), ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL, GEMINI_API_KEY (GOOGLE_API_KEY accepted too) /
 * GEMINI_BASE_URL. A missing key throws an Error naming the variable to set — except for openai-chat with a base
 * URL, since local OpenAI-compatible servers usually need no key (a placeholder is sent).
 */
export function providerConfigFromEnv(name: ProviderName, env: NodeJS.ProcessEnv = process.env): ProviderConfig {
  const vars = PROVIDER_ENV[name];
  if (!vars) throw new Error(`Unknown provider ${JSON.stringify(name)}: use one of ${PROVIDER_NAMES.join(", ")}.`);
  const baseURL = env[vars.baseURL]?.trim() || undefined;
  let apiKey = env[vars.apiKey]?.trim() || undefined;
  if (!apiKey && name === "gemini") apiKey = env.GOOGLE_API_KEY?.trim() || undefined;
  if (!apiKey && name === "openai-chat" && baseURL) apiKey = "not-needed";
  if (!apiKey) {
    throw new Error(
      `Missing API key for provider ${name}: set ${vars.apiKey} in the environment${
        name === "openai-chat" ? ` (or set ${vars.baseURL} to a local OpenAI-compatible server)` : ""
      }.`,
    );
  }
  return { apiKey, ...(baseURL ? { baseURL } : {}) };
}
