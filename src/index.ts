/**
 * Toolhost library entry point: the registry, settings policy, executeTool, custom-tool API, function-id API,
 * storage and (as they land) the provider mappers, the tool loop and the built-in tools.
 *
 * Importing this module registers every built-in tool in the default registry.
 */
import "./tools/index.js";

export * from "./core/types.js";
export * from "./core/errors.js";
export * from "./core/registry.js";
export * from "./core/settings-policy.js";
export * from "./core/arg-parsing.js";
export * from "./core/runtime.js";
export * from "./core/stores.js";
export * from "./core/metrics.js";
export * from "./core/custom-tools.js";
export * from "./core/trigger.js";
export * from "./core/path-policy.js";
export { createAppContext, type AppContext, type AppContextOptions } from "./app/context.js";
export { ToolSettingsService, type ToolSettingsDescriptor, type UpdateToolSettingsBody } from "./app/tool-settings-service.js";
export { openDatabase, type ToolhostDatabase } from "./storage/database.js";
export { buildGenerateImageDefinition, generateImageTool } from "./tools/builtin/generate-image.js";
export * from "./tools/image/types.js";
export * from "./tools/image/plan.js";
export * from "./tools/image/run.js";
export { createImageProvider, GeminiImageProvider, OpenAiImageProvider, resolveImageProvider } from "./tools/image/providers.js";
export { FileImageStore, IMAGE_URL_PREFIX, sniffImageMimeType } from "./tools/image/file-image-store.js";
export { SqlImageStore } from "./tools/image/sql-image-store.js";
