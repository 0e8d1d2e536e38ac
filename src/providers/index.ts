/**
 * Provider adapters: one streaming adapter per supported API, created by name (issue 3, "Streaming and the
 * loop"; "Chats (server and CLI)" for the environment variables).
 */

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
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

/** Per-provider settings in the config file: `{ "providers": { "<name>": { "apiKey", "baseURL" } } }`. */
export interface ProviderFileConfig {
  providers?: Partial<Record<ProviderName, { apiKey?: string; baseURL?: string }>>;
}

/**
 * Path of the config file: `TOOLHOST_CONFIG`, else `$XDG_CONFIG_HOME/toolhost/config.json`, else
 * `~/.config/toolhost/config.json`.
 */
export function providerConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TOOLHOST_CONFIG) return resolve(env.TOOLHOST_CONFIG);
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "toolhost", "config.json");
}

/**
 * Reads the config file; returns `{}` when it does not exist. Throws an Error naming the file when it is not a
 * JSON object or a provider entry has a non-string `apiKey`/`baseURL`.
 */
export function loadProviderFileConfig(env: NodeJS.ProcessEnv = process.env): ProviderFileConfig {
  const path = providerConfigPath(env);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new Error(`Cannot read the config file ${path}: ${(error as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`The config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  const providers = (value as ProviderFileConfig | null)?.providers;
  if (
    !value ||
    typeof value !== "object" ||
    Array.isArray(value) ||
    (providers !== undefined && (typeof providers !== "object" || providers === null))
  ) {
    throw new Error(`The config file ${path} must be a JSON object like {"providers": {"openai": {"apiKey": "..."}}}.`);
  }
  for (const [name, entry] of Object.entries(providers ?? {})) {
    for (const key of ["apiKey", "baseURL"] as const) {
      const v = (entry as Record<string, unknown> | null)?.[key];
      if (v !== undefined && typeof v !== "string") {
        throw new Error(`The config file ${path}: providers.${name}.${key} must be a string.`);
      }
    }
  }
  return value as ProviderFileConfig;
}

/**
 * Reads a provider's key and base URL from the environment, then from the config file (see providerConfigPath;
 * the environment wins): OPENAI_API_KEY / OPENAI_BASE_URL (openai and openai-chat), ANTHROPIC_API_KEY /
 * ANTHROPIC_BASE_URL, GEMINI_API_KEY (GOOGLE_API_KEY accepted too) / GEMINI_BASE_URL. A missing key throws an Error
 * naming the variable to set — except for openai-chat with a base URL, since local OpenAI-compatible servers
 * usually need no key (a placeholder is sent).
 */
export function providerConfigFromEnv(
  name: ProviderName,
  env: NodeJS.ProcessEnv = process.env,
  file: ProviderFileConfig = loadProviderFileConfig(env),
): ProviderConfig {
  const vars = PROVIDER_ENV[name];
  if (!vars) throw new Error(`Unknown provider ${JSON.stringify(name)}: use one of ${PROVIDER_NAMES.join(", ")}.`);
  const fromFile = file.providers?.[name] ?? (name === "openai-chat" ? file.providers?.openai : undefined);
  const baseURL = env[vars.baseURL]?.trim() || fromFile?.baseURL?.trim() || undefined;
  let apiKey = env[vars.apiKey]?.trim() || undefined;
  if (!apiKey && name === "gemini") apiKey = env.GOOGLE_API_KEY?.trim() || undefined;
  if (!apiKey) apiKey = fromFile?.apiKey?.trim() || undefined;
  if (!apiKey && name === "openai-chat" && baseURL) apiKey = "not-needed";
  if (!apiKey) {
    throw new Error(
      `Missing API key for provider ${name}: set ${vars.apiKey} in the environment${
        name === "openai-chat" ? ` (or set ${vars.baseURL} to a local OpenAI-compatible server)` : ""
      }, or providers.${name}.apiKey in ${providerConfigPath(env)}.`,
    );
  }
  return { apiKey, ...(baseURL ? { baseURL } : {}) };
}
