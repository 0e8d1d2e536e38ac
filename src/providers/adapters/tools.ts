/**
 * The one place the adapters get provider tool shapes from. Delegates to the shared tool mapper
 * (src/providers/tool-mapper.ts) when it is present; until then these minimal mappings send the plain source
 * schema (non-strict).
 */

import type { ToolDefinition } from "../../core/types.js";

/** Responses API function tools: `{type:'function', name, description, parameters, strict}`. */
export function responsesTools(defs: ToolDefinition[]): Record<string, unknown>[] {
  return defs.map((d) => ({
    type: "function",
    name: d.name,
    description: d.description,
    parameters: d.parameters,
    strict: false,
  }));
}

/** Chat Completions tools: `{type:'function', function:{name, description, parameters}}`. */
export function chatTools(defs: ToolDefinition[]): Record<string, unknown>[] {
  return defs.map((d) => ({
    type: "function",
    function: { name: d.name, description: d.description, parameters: d.parameters },
  }));
}

/** Gemini Interactions function tools: `{type:'function', name, description, parameters}`. */
export function geminiTools(defs: ToolDefinition[]): Record<string, unknown>[] {
  return defs.map((d) => ({ type: "function", name: d.name, description: d.description, parameters: d.parameters }));
}

/** Anthropic tools: `{name, description, input_schema}`. */
export function anthropicTools(defs: ToolDefinition[]): Record<string, unknown>[] {
  return defs.map((d) => ({ name: d.name, description: d.description, input_schema: d.parameters }));
}
