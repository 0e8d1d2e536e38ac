/**
 * `toolhost/providers`: the provider table (ids, SDKs, credentials, default models, capabilities), one streaming
 * adapter per supported API over the provider's official SDK, the wire-format mappers from registered definitions to
 * each provider's tool format, and strict-schema derivation (OpenAI strict mode), with the credential readers.
 */
export {
  loadProviderFileConfig,
  MissingCredentialsError,
  type ProviderCredentials,
  type ProviderFileConfig,
  providerConfigPath,
} from "../core/credentials.js";
// Providers: one streaming adapter per API over the official SDK, and the table that builds them.
export { AnthropicAdapter } from "./adapters/anthropic.js";
export { GeminiInteractionsAdapter } from "./adapters/gemini-interactions.js";
export { OpenAIChatAdapter } from "./adapters/openai-chat.js";
export { OpenAIResponsesAdapter } from "./adapters/openai-responses.js";
export type { ToolNameMap } from "./schemas/tool-names.js";
export {
  isStrictCompatible,
  SchemaMappingError,
  strictSchemaProblems,
  toStrictSchema,
} from "./strict-schema.js";
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
// Wire mappers: registered definitions → each provider's tool format (strict schemas derived at the boundary).
export {
  type AnthropicTool,
  type ChatCompletionFunctionTool,
  type ChatCompletionsMapperOptions,
  createToolNameMap,
  type GeminiDeclarationsMapperOptions,
  type GeminiInteractionsFunctionTool,
  type GeminiSchemaDialect,
  type ResponsesFunctionTool,
  type ToolMapperOptions,
  toolDefsToAnthropic,
  toolDefsToChatCompletions,
  toolDefsToGeminiFunctionDeclarations,
  toolDefsToGeminiInteractions,
  toolDefsToResponsesAPI,
} from "./tool-mapper.js";
export {
  type ConversationMessage,
  type ConversationToolCall,
  type ConversationToolResult,
  type FinishReason,
  isAbortError,
  type ProviderAdapter,
  type ProviderConfig,
  ProviderError,
  type ProviderName,
  type ProviderRequest,
  type ProviderStreamEvent,
} from "./types.js";
