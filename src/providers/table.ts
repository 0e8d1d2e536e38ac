/**
 * The provider table: everything Toolhost knows about each model provider, in one place. Chats, sub-agents and
 * generate_image all read it — through {@link providerEntry}, {@link providerCredentials} and
 * {@link createProviderAdapter} here, and (for tools, which may not import providers/) through the credential
 * source this module registers in core (`core/credentials.ts`). Adding a provider is one entry here plus its
 * adapter and tests; see CONTRIBUTING.md.
 */
import {
  type CredentialSpec,
  type ProviderCredentials,
  type ProviderFileConfig,
  resolveCredentials,
  setDefaultCredentialSource,
} from "../core/credentials.js";
import { AnthropicAdapter } from "./adapters/anthropic.js";
import { GeminiInteractionsAdapter } from "./adapters/gemini-interactions.js";
import { OpenAIChatAdapter } from "./adapters/openai-chat.js";
import { OpenAIResponsesAdapter } from "./adapters/openai-responses.js";
import { loadAnthropicSdk, loadGoogleGenAISdk, loadOpenAISdk } from "./sdk.js";
import type { ProviderAdapter, ProviderConfig, ProviderName } from "./types.js";

/** What a provider can do, as Toolhost uses it. */
export interface ProviderCapabilities {
  /** The chat API its streaming adapter speaks. */
  chatApi: "responses" | "chat-completions" | "interactions" | "messages";
  /** generate_image can make images with this provider's image models. */
  images: boolean;
  /**
   * Strict tool schemas: "always" (OpenAI's own API), "when-official" (only against the provider's own endpoint;
   * compatible servers often reject `strict`), or "never".
   */
  strictTools: "always" | "when-official" | "never";
  /** The adapter reports reasoning ("thinking") token counts separately in usage. */
  reasoningUsage: boolean;
}

/** One row of the provider table. */
export interface ProviderEntry {
  /** Provider id used in chats, settings, the CLI and the config file. */
  id: ProviderName;
  /** Human name, e.g. "OpenAI (Responses API)". */
  title: string;
  /** The official SDK: its npm package name and a loader that imports it on first use. */
  sdk: { package: string; load: () => Promise<unknown> };
  /** Where its key and base URL come from (environment variables, config-file key). */
  credentials: CredentialSpec;
  /** Model used when a CLI chat or a sub-agent names none (TOOLHOST_CHAT_MODEL overrides for chats). */
  defaultModel: string;
  capabilities: ProviderCapabilities;
  /** Builds the streaming adapter over the official SDK. */
  createAdapter(config: ProviderConfig): ProviderAdapter;
}

const openaiCredentials = {
  apiKeyEnv: ["OPENAI_API_KEY"],
  baseURLEnv: "OPENAI_BASE_URL",
} as const;

/** Every provider, in display order. */
export const PROVIDER_TABLE: readonly ProviderEntry[] = [
  {
    id: "openai",
    title: "OpenAI (Responses API)",
    sdk: { package: "openai", load: loadOpenAISdk },
    credentials: { provider: "openai", ...openaiCredentials, configKeys: ["openai"] },
    defaultModel: "gpt-5.4-mini",
    capabilities: { chatApi: "responses", images: true, strictTools: "always", reasoningUsage: true },
    createAdapter: (config) => new OpenAIResponsesAdapter(config),
  },
  {
    id: "openai-chat",
    title: "OpenAI-compatible Chat Completions",
    sdk: { package: "openai", load: loadOpenAISdk },
    credentials: {
      provider: "openai-chat",
      ...openaiCredentials,
      configKeys: ["openai-chat", "openai"],
      placeholderKeyWithBaseURL: "not-needed",
    },
    defaultModel: "gpt-5.4-mini",
    capabilities: { chatApi: "chat-completions", images: false, strictTools: "when-official", reasoningUsage: true },
    createAdapter: (config) => new OpenAIChatAdapter(config),
  },
  {
    id: "gemini",
    title: "Google Gemini (Interactions API)",
    sdk: { package: "@google/genai", load: loadGoogleGenAISdk },
    credentials: {
      provider: "gemini",
      apiKeyEnv: ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
      baseURLEnv: "GEMINI_BASE_URL",
      configKeys: ["gemini"],
    },
    defaultModel: "gemini-flash-latest",
    capabilities: { chatApi: "interactions", images: true, strictTools: "never", reasoningUsage: true },
    createAdapter: (config) => new GeminiInteractionsAdapter(config),
  },
  {
    id: "anthropic",
    title: "Anthropic (Messages API)",
    sdk: { package: "@anthropic-ai/sdk", load: loadAnthropicSdk },
    credentials: {
      provider: "anthropic",
      apiKeyEnv: ["ANTHROPIC_API_KEY"],
      baseURLEnv: "ANTHROPIC_BASE_URL",
      configKeys: ["anthropic"],
    },
    defaultModel: "claude-sonnet-5-5",
    capabilities: { chatApi: "messages", images: false, strictTools: "never", reasoningUsage: false },
    createAdapter: (config) => new AnthropicAdapter(config),
  },
];

const BY_ID = new Map<string, ProviderEntry>(PROVIDER_TABLE.map((entry) => [entry.id, entry]));

/** Every provider id, in display order. */
export const PROVIDER_NAMES: readonly ProviderName[] = PROVIDER_TABLE.map((entry) => entry.id);

/** True when `value` is a provider id of the table. */
export function isProviderName(value: unknown): value is ProviderName {
  return typeof value === "string" && BY_ID.has(value);
}

/** The table row of `id`. Throws an Error naming the known ids for an unknown one. */
export function providerEntry(id: string): ProviderEntry {
  const entry = BY_ID.get(id);
  if (!entry) throw new Error(`Unknown provider ${JSON.stringify(id)}: use one of ${PROVIDER_NAMES.join(", ")}.`);
  return entry;
}

/**
 * The key and base URL of provider `id` from the environment, then the config file (see
 * core/credentials.ts: `TOOLHOST_CONFIG` or `~/.config/toolhost/config.json`). Throws MissingCredentialsError
 * naming the variables and the config-file entry when no key is set, and an Error for an unknown id or a broken
 * config file.
 */
export function providerCredentials(
  id: string,
  env: NodeJS.ProcessEnv = process.env,
  file?: ProviderFileConfig,
): ProviderCredentials {
  return resolveCredentials(providerEntry(id).credentials, env, file);
}

/**
 * Creates the streaming adapter for provider `id` on its official SDK. `config.baseURL` points the SDK at another
 * server (a proxy, a local OpenAI-compatible server, a test fake). Throws an Error for an unknown id.
 */
export function createProviderAdapter(id: ProviderName, config: ProviderConfig = {}): ProviderAdapter {
  return providerEntry(id).createAdapter(config);
}

// Tools (generate_image) read credentials through core; the table is the process-wide default source.

/** The table as a credential source for `services.providerCredentials` (environment and config file). */
export const tableCredentialSource = {
  credentials: (id: string): ProviderCredentials => providerCredentials(id),
};

/**
 * One line per provider naming its key and base-URL variables, e.g. `gemini  GEMINI_API_KEY (or GOOGLE_API_KEY),
 * GEMINI_BASE_URL` (for help texts and diagnostics; never reads the values).
 */
export function describeProviderVariables(): string[] {
  const width = Math.max(...PROVIDER_TABLE.map((e) => e.id.length));
  return PROVIDER_TABLE.map(({ id, credentials: c }) => {
    const keys = c.apiKeyEnv.length > 1 ? `${c.apiKeyEnv[0]} (or ${c.apiKeyEnv.slice(1).join(", ")})` : c.apiKeyEnv[0];
    const note = c.placeholderKeyWithBaseURL ? " (the key may be omitted for a server that needs none)" : "";
    return `${id.padEnd(width)}  ${keys}${c.baseURLEnv ? `, ${c.baseURLEnv}` : ""}${note}`;
  });
}

// Tools (generate_image) read credentials through core; the table is the process-wide default source.
setDefaultCredentialSource(tableCredentialSource);
