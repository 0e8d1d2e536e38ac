/**
 * Toolhost's library entry point (`import … from "toolhost"`): the registry and `tool()`, the runtime that executes
 * calls, custom tools, function ids, the provider mappers, adapters and table, the tool loop, the application
 * context, errors and the public types.
 *
 * The list is deliberate: every name is chosen here, and test/api/exports.test.ts compares it with a checked-in
 * list, so adding or removing one is a decision (CONTRIBUTING.md, "Public API"). Mounting the HTTP service in your
 * own server is `toolhost/server`; the MCP server and client pieces are `toolhost/mcp`.
 *
 * Importing this module registers every built-in tool in the default registry.
 */
import "./tools/index.js";

// Agent templates (sub-agents), for hosts that build their own catalog.
export { type AgentTemplate, AgentTemplateCatalog, loadAgentTemplates } from "./agents/templates.js";
// Application services shared by the CLI and the HTTP service (approvals, chats, settings) and their context.
export type { AdminRule } from "./app/admin.js";
export type { AgentService } from "./app/agent-service.js";
export type {
  ApprovalAnswer,
  ApprovalRequestView,
  ApprovalResponder,
  ApprovalService,
} from "./app/approvals/service.js";
export {
  ChatBusyError,
  ChatConfigError,
  type ChatMessageView,
  ChatService,
  type ChatServiceOptions,
  type ChatTurnEvent,
  type ChatWithMessages,
  type CreateChatInput,
  DEFAULT_CHAT_MODELS,
} from "./app/chat-service.js";
export { type AppContext, type AppContextOptions, createAppContext } from "./app/context.js";
export { SqlImageStore } from "./app/sql-image-store.js";
export {
  SettingsVersionConflictError,
  type ToolSettingsDescriptor,
  ToolSettingsService,
  type UpdateToolSettingsBody,
} from "./app/tool-settings-service.js";
export type { WorkingDirectoryBinder } from "./app/working-directory.js";
export {
  loadProviderFileConfig,
  MissingCredentialsError,
  type ProviderCredentials,
  type ProviderFileConfig,
  providerConfigPath,
} from "./core/credentials.js";
// Custom tools: a Tool class returning ToolResult, registered through a ToolRegistry.
export { Tool, type ToolDef, type ToolParam, ToolRegistry, ToolResult } from "./core/custom-tools.js";
// Errors: each class carries a stable `code` and a `Symbol.for` brand (instanceof works across package copies).
export {
  AccessDeniedError,
  argumentRefusal,
  BrandedError,
  DeniedByPolicyError,
  DeniedByUserError,
  errorBrand,
  LimitExceededError,
  NotFoundError,
  type SerializedToolError,
  ToolAbortedError,
  ToolArgumentError,
  ToolError,
  type ToolErrorCode,
  ToolExecutionError,
  ToolParameterError,
  ToolRefusal,
  ToolSettingsError,
  ToolTimeoutError,
  toToolError,
} from "./core/errors.js";
export { metricsRegistry } from "./core/metrics.js";
// The registry: tools register at import time; a duplicate name is an error.
export { defaultRegistry, getTool, listTools, registerTool, ToolRegistryStore } from "./core/registry.js";
// The runtime: settings resolution, argument parsing, time budget, path policy, result cap, audit.
export {
  configureDefaultRuntime,
  type EnabledToolRuntime,
  executeTool,
  getDefaultRuntime,
  getEnabledToolRuntime,
  type ToolCallContext,
  type ToolCallOutcome,
  ToolRuntime,
  type ToolRuntimeOptions,
} from "./core/runtime.js";
// Settings: declared once per setting, read at call time with the typed readers.
export {
  booleanSetting,
  defineTool,
  integerSetting,
  numberSetting,
  stringListSetting,
  stringSetting,
  type ToolDeclaration,
  type ToolSettingsDeclaration,
} from "./core/settings-declaration.js";
export {
  getDefaultToolSettings,
  getSafeEffectiveToolSettings,
  getToolDefinition,
  getToolDefinitionsForTools,
  mergeToolSettings,
} from "./core/settings-policy.js";
export {
  createLogger,
  MemoryAuditSink,
  MemoryFreshnessLedger,
  MemoryToolSettingsStore,
  type ToolSettingsStore,
  type ToolSettingsWrite,
  type VersionedToolSettings,
} from "./core/stores.js";
// Tracing: spans go to the host's OpenTelemetry SDK; tool arguments and results only when capture is on.
export { setTraceContentCapture } from "./core/tracing.js";
// Function ids: `trigger("tool::<name>", args)`.
export { errorFromSerialized, type TriggerOptions, trigger } from "./core/trigger.js";
// The typed tool helper: arguments typed from a JSON Schema literal or a Standard Schema (zod).
export {
  type FromJsonSchema,
  type InferToolArgs,
  jsonSchema,
  type StandardToolSchema,
  type ToolInputSchema,
  type TypedJsonSchema,
  type TypedToolOptions,
  tool,
} from "./core/typed-tool.js";
export type {
  ApprovalDecision,
  ApprovalHint,
  ApprovalSubject,
  AuditEntry,
  AuditEvent,
  AuditSink,
  EffectiveToolSettings,
  FreshnessLedger,
  JsonSchema,
  Logger,
  RegisteredTool,
  SavedToolSettings,
  ToolAnnotationHints,
  ToolApprovalProfile,
  ToolCategory,
  ToolContext,
  ToolDefinition,
  ToolParameterDescriptor,
  ToolParameterType,
  ToolProgressEvent,
  ToolSettingsMetadata,
} from "./core/types.js";
// The tool loop: provider stream → tool calls → approval → executeTool → results fed back.
export type {
  ApprovalRequestedEvent,
  ApprovalResolvedEvent,
  LoopDoneReason,
  LoopErrorCode,
  LoopEvent,
  ToolResultEvent,
} from "./loop/events.js";
export type { GateStep, GateVerdict, LoopStepSnapshot, ToolCallGate } from "./loop/gate.js";
export { DEFAULT_MAX_ITERATIONS, type RunToolLoopOptions, runToolLoop } from "./loop/run-tool-loop.js";
export { serializeToolOutcome, toConversationToolResult } from "./loop/serialize.js";
// Providers: one streaming adapter per API over the official SDK, and the table that builds them.
export { AnthropicAdapter } from "./providers/adapters/anthropic.js";
export { GeminiInteractionsAdapter } from "./providers/adapters/gemini-interactions.js";
export { OpenAIChatAdapter } from "./providers/adapters/openai-chat.js";
export { OpenAIResponsesAdapter } from "./providers/adapters/openai-responses.js";
export type { ToolNameMap } from "./providers/schemas/tool-names.js";
export {
  isStrictCompatible,
  SchemaMappingError,
  strictSchemaProblems,
  toStrictSchema,
} from "./providers/strict-schema.js";
export {
  createProviderAdapter,
  isProviderName,
  PROVIDER_NAMES,
  PROVIDER_TABLE,
  type ProviderCapabilities,
  type ProviderEntry,
  providerCredentials,
  providerEntry,
} from "./providers/table.js";
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
} from "./providers/tool-mapper.js";
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
} from "./providers/types.js";
export { openDatabase, type ToolhostDatabase } from "./storage/database.js";
export { MigrationError, SchemaDamageError } from "./storage/migrate.js";
export type { ChatRepository, SqlAuditLog } from "./storage/repositories.js";
export type { TokenRepository } from "./storage/token-repository.js";
export { TransactionContentionError } from "./storage/transaction.js";
// The web tools' guards, usable on their own.
export { type GuardedFetchOptions, type GuardedFetchResult, guardedFetch } from "./tools/web/fetch.js";
export { htmlToReadableText, type ReadableText } from "./tools/web/html-to-text.js";
export {
  type AddressPins,
  assertNoSsrf,
  createGuardedAgent,
  type HostResolver,
  type SsrfPolicy,
} from "./tools/web/ssrf.js";
