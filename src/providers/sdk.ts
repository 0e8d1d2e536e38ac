/**
 * The official SDK modules, loaded on first use (importing Toolhost — every CLI command, every MCP session — does
 * not pay for SDKs a chat may never use). The provider table names these loaders; the adapters use them.
 */
import type OpenAI from "openai";
import type { ProviderConfig } from "./types.js";

/** Loads the `openai` package (Responses and Chat Completions). */
export const loadOpenAISdk = () => import("openai");
/**
 * Loads the `openai` package and creates the client both OpenAI adapters (Responses, Chat Completions) use: the
 * config's API key (empty when absent), its base URL (the SDK's default when absent) and its retries (none unless
 * configured).
 */
export async function createOpenAIClient(config: ProviderConfig): Promise<OpenAI> {
  const { default: Client } = await loadOpenAISdk();
  return new Client({ apiKey: config.apiKey ?? "", baseURL: config.baseURL, maxRetries: config.maxRetries ?? 0 });
}
/** Loads `@anthropic-ai/sdk` (Messages). */
export const loadAnthropicSdk = () => import("@anthropic-ai/sdk");
/** Loads `@google/genai` (Interactions, generateContent). */
export const loadGoogleGenAISdk = () => import("@google/genai");
