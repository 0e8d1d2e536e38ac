/**
 * Providers: the provider table (ids, SDKs, credentials, default models, capabilities) and one streaming adapter
 * per supported API over the provider's official SDK.
 */

export {
  loadProviderFileConfig,
  MissingCredentialsError,
  type ProviderCredentials,
  type ProviderFileConfig,
  providerConfigPath,
} from "../core/credentials.js";
export { AnthropicAdapter } from "./adapters/anthropic.js";
export { GeminiInteractionsAdapter } from "./adapters/gemini-interactions.js";
export { OpenAIChatAdapter } from "./adapters/openai-chat.js";
export { OpenAIResponsesAdapter } from "./adapters/openai-responses.js";
export {
  createProviderAdapter,
  isProviderName,
  PROVIDER_NAMES,
  PROVIDER_TABLE,
  type ProviderCapabilities,
  type ProviderEntry,
  providerCredentials,
  providerEntry,
} from "./table.js";
export * from "./types.js";
