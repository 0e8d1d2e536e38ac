/**
 * `toolhost/app`: the application services behind `createAppContext()` (from "toolhost") for hosts that use them
 * directly — chats, settings, images, agent templates — with the settings plumbing (defaults, merging, the
 * definitions a user's settings yield), in-memory stores for tests and embedding, the logger, the metrics registry
 * and the tracing switch.
 */

export type { AgentService } from "../agents/service.js";
export { type AgentTemplate, AgentTemplateCatalog, loadAgentTemplates } from "../agents/templates.js";
export { metricsRegistry } from "../core/metrics.js";
export {
  getDefaultToolSettings,
  getSafeEffectiveToolSettings,
  getToolDefinition,
  getToolDefinitionsForTools,
  mergeToolSettings,
} from "../core/settings-policy.js";
export { createLogger, MemoryAuditSink, MemoryFreshnessLedger, MemoryToolSettingsStore } from "../core/stores.js";
// Tracing: spans go to the host's OpenTelemetry SDK; tool arguments and results only when capture is on.
export { setTraceContentCapture } from "../core/tracing.js";
export type { AdminRule } from "./admin.js";
export type {
  ApprovalAnswer,
  ApprovalRequestView,
  ApprovalResponder,
  ApprovalService,
} from "./approvals/service.js";
export { ChatService } from "./chat-service.js";
export {
  ChatBusyError,
  ChatConfigError,
  type ChatMessageView,
  type ChatServiceOptions,
  type ChatTurnEvent,
  type ChatWithMessages,
  type CreateChatInput,
  DEFAULT_CHAT_MODELS,
} from "./chat-types.js";
export type { AppContext, AppContextOptions } from "./context.js";
export { SqlImageStore } from "./sql-image-store.js";
export {
  SettingsVersionConflictError,
  type ToolSettingsDescriptor,
  ToolSettingsService,
  type UpdateToolSettingsBody,
} from "./tool-settings-service.js";
export type { WorkingDirectoryBinder } from "./working-directory.js";
