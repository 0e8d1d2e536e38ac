/**
 * Toolhost's library entry point (`import … from "toolhost"`): what a newcomer needs in one sitting — `tool()` and
 * `defineTool()` to write tools (with the typed setting readers), the custom-tool classes, the registry, the runtime
 * that executes calls, `createAppContext()` for the application services, function ids (`trigger`), and the errors.
 *
 * Everything else lives on a subpath named for its concern:
 * - `toolhost/app`: the application services (chats, settings, images, agent templates), settings plumbing,
 *   in-memory stores, logging, metrics and tracing switches;
 * - `toolhost/providers`: the provider table, one streaming adapter per API, the wire-format mappers and strict-schema
 *   derivation, credentials;
 * - `toolhost/loop`: the tool loop and its events, tool-result serialization;
 * - `toolhost/storage`: the database (SQLite or PostgreSQL) and its errors;
 * - `toolhost/web`: the SSRF guard, the guarded fetch and HTML-to-text, usable on their own;
 * - `toolhost/server`: the HTTP service; `toolhost/mcp`: the MCP server and client.
 *
 * The lists are deliberate: test/api/exports.test.ts compares every entry's runtime names with a checked-in list
 * (at most 40 here), so adding or removing one is a decision (CONTRIBUTING.md, "Public API").
 *
 * Importing this module registers every built-in tool in the default registry (its one explicit call of
 * registerBuiltinTools, below the exports).
 */
import { registerBuiltinTools } from "./tools/index.js";

export type { AppContext, AppContextOptions } from "./app/context.js";
// The application context: settings, chats, approvals, agents, tokens and the runtime, over one database.
export { createAppContext } from "./app/context.js";
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
// The registry: registerTool() adds a tool (a duplicate name is an error); the built-ins are registered by this module.
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
// Tools with settings: declared once per setting, read at call time with the typed readers.
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
export type { ToolSettingsStore, ToolSettingsWrite, VersionedToolSettings } from "./core/stores.js";
// Function ids: `trigger("tool::<name>", args)`.
export { type TriggerOptions, trigger } from "./core/trigger.js";
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

registerBuiltinTools();
