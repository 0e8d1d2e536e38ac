/**
 * Boundary rewriting of tool schemas and tool names per provider dialect (one module each under
 * `src/providers/schemas/`, all over the shared JSON Schema primitives of `src/core/json-schema.ts`). Source
 * schemas stay plain JSON Schema: whatever a provider rejects is removed or rewritten there, on a copy.
 *
 * - Gemini: {@link toGeminiJsonSchema} (raw JSON Schema fields) and {@link toGeminiOpenApiSchema} (the older
 *   OpenAPI-subset field), in `schemas/gemini.ts`;
 * - Anthropic: {@link toAnthropicInputSchema}, in `schemas/anthropic.ts`;
 * - tool names: {@link TOOL_NAME_RULES}, {@link sanitizeToolName} and {@link ToolNameMap}, in `schemas/tool-names.ts`.
 * OpenAI's strict mode is derived in `strict-schema.ts`.
 */
export { toAnthropicInputSchema } from "./schemas/anthropic.js";
export { toGeminiJsonSchema, toGeminiOpenApiSchema } from "./schemas/gemini.js";
export { sanitizeToolName, TOOL_NAME_RULES, ToolNameMap, type ToolNameRule } from "./schemas/tool-names.js";
