/**
 * Toolhost library entry point: the registry, settings policy, executeTool, custom-tool API, function-id API,
 * storage and (as they land) the provider mappers, the tool loop and the built-in tools.
 *
 * Importing this module registers every built-in tool in the default registry.
 */
import "./tools/index.js";

export {
  type AgentTemplate,
  AgentTemplateCatalog,
  GENERAL_TEMPLATE,
  loadAgentTemplates,
  parseTemplateMarkdown,
  validateTemplate,
} from "./agents/templates.js";
export {
  AgentService,
  type AgentServiceOptions,
  type AgentStreamEvent,
  type AgentTag,
  type AgentTurn,
  type OpenTurnOptions,
} from "./app/agent-service.js";
export {
  type AdapterFactory,
  CHAT_PROVIDERS,
  ChatBusyError,
  ChatConfigError,
  type ChatMessageView,
  ChatService,
  type ChatServiceOptions,
  type ChatTurnEvent,
  type ChatWithMessages,
  type CreateChatInput,
  chatSystemPrompt,
  DEFAULT_CHAT_MODELS,
  type PreparedTurn,
  parseChatRoots,
} from "./app/chat-service.js";
export { type AppContext, type AppContextOptions, createAppContext } from "./app/context.js";
export { SqlImageStore } from "./app/sql-image-store.js";
export {
  type ToolSettingsDescriptor,
  ToolSettingsService,
  type UpdateToolSettingsBody,
} from "./app/tool-settings-service.js";
export * from "./core/agents.js";
export * from "./core/arg-parsing.js";
export * from "./core/custom-tools.js";
export * from "./core/errors.js";
export * from "./core/metrics.js";
export * from "./core/output-spill.js";
export * from "./core/path-policy.js";
export * from "./core/registry.js";
export * from "./core/result-cap.js";
export * from "./core/runtime.js";
export * from "./core/settings-policy.js";
export * from "./core/stores.js";
export * from "./core/text-probe.js";
export * from "./core/trigger.js";
export * from "./core/types.js";
export * from "./loop/index.js";
export * from "./providers/index.js";
export * from "./providers/provider-schemas.js";
export * from "./providers/strict-schema.js";
export * from "./providers/tool-mapper.js";
export { createServerApp } from "./server/app.js";
export { type ImageRoutesDeps, imageRoutes } from "./server/routes/images.js";
export { type RunningServer, type StartServerOptions, startServer } from "./server/serve.js";
export { type AgentRecord, AgentRepository } from "./storage/agent-repository.js";
export { openDatabase, type ToolhostDatabase } from "./storage/database.js";
export { buildGenerateImageDefinition, generateImageTool } from "./tools/builtin/generate-image.js";
export { GrepPatternError } from "./tools/builtin/grep.js";
export {
  WEB_ALLOWED_HOSTS_SERVICE,
  WEB_RESOLVER_SERVICE,
  type WebFetchResult,
  webFetch,
  webFetchTool,
} from "./tools/builtin/web-fetch.js";
export { type WebSearchResult, webSearch, webSearchTool } from "./tools/builtin/web-search.js";
export { FileImageStore, IMAGE_URL_PREFIX, sniffImageMimeType } from "./tools/image/file-image-store.js";
export * from "./tools/image/plan.js";
export {
  createImageProvider,
  GeminiImageProvider,
  OpenAiImageProvider,
  resolveImageProvider,
} from "./tools/image/providers.js";
export * from "./tools/image/run.js";
export * from "./tools/image/types.js";
export {
  type AllowlistPreset,
  effectiveAllowlist,
  findExecutable,
  resolveAllowedExecutable,
  SHELL_COMMAND_ALLOWLIST,
  STRICT_SHELL_COMMAND_ALLOWLIST,
} from "./tools/shell/allowlist.js";
export { FIXED_CHILD_ENV, filterEnvironment, TAINT_ENV_ALLOWLIST } from "./tools/shell/env.js";
export { HeadTailCapture } from "./tools/shell/output-cap.js";
export {
  type ProcessRunResult,
  type RunProcessOptions,
  runProcess,
  type Termination,
} from "./tools/shell/process-runner.js";
export { killProcessTree, PROCESS_TAG_VARIABLE } from "./tools/shell/process-tree.js";
export {
  buildSeccompFilter,
  bwrapArguments,
  classifyProbeFailure,
  launchSpec,
  planSandbox,
  probeSandbox,
  protectedSubpaths,
  resetSandboxProbe,
  SANDBOX_DESCRIPTORS,
  type SandboxMode,
  type SandboxPlan,
  type SandboxProbe,
  type SandboxProfile,
} from "./tools/shell/sandbox/index.js";
export { type ShellExecResult, shellExecTool } from "./tools/shell/shell-exec.js";
export {
  buildShellTool,
  findInterpreter,
  type RunShellCommandOptions,
  registerShellTools,
  runShellCommand,
  type ShellCommandResult,
  type ShellKind,
} from "./tools/shell/shell-tool.js";
export { type AddressVerdict, classifyAddress } from "./tools/web/address.js";
export { type GuardedFetchOptions, type GuardedFetchResult, guardedFetch } from "./tools/web/fetch.js";
export { htmlToReadableText, type ReadableText } from "./tools/web/html-to-text.js";
export {
  type SearchProviderConfig,
  type SearchProviderName,
  type SearchResult,
  WEB_SEARCH_SERVICE,
  type WebSearchConfig,
} from "./tools/web/search-providers.js";
export {
  type AddressPins,
  assertNoSsrf,
  type CheckedTarget,
  createGuardedAgent,
  type HostResolver,
  type SsrfPolicy,
  systemResolver,
} from "./tools/web/ssrf.js";
