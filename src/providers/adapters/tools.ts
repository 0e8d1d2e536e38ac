/**
 * The one place the adapters get provider tool shapes from: the shared tool mapper (src/providers/tool-mapper.ts)
 * plus the tool-name map that translates sanitized wire names back to registered tool names.
 */

import type { Logger, ToolDefinition } from "../../core/types.js";
import type { ToolNameMap } from "../provider-schemas.js";
import {
  createToolNameMap,
  toolDefsToAnthropic,
  toolDefsToChatCompletions,
  toolDefsToGeminiInteractions,
  toolDefsToResponsesAPI,
} from "../tool-mapper.js";
import type { ProviderName } from "../types.js";

/** Tools mapped for one request, with the name map used (wire name ↔ registered name). */
export interface MappedTools<T> {
  tools: T[];
  names: ToolNameMap;
  /** Registered name for a wire name the model used (the wire name itself when unknown). */
  fromWire(wireName: string): string;
  /** Wire name for a registered name (for echoing history back). */
  toWire(name: string): string;
}

/** Options of {@link mapTools}. */
export interface MapToolsOptions {
  logger?: Pick<Logger, "warn">;
  /** Chat Completions only: send strict schemas (OpenAI itself), or the plain schema (compatible servers). */
  chatStrict?: boolean;
}

/** Maps `defs` with the tool mapper of `provider` and returns them with the name map. */
export function mapTools(
  provider: ProviderName,
  defs: ToolDefinition[],
  options: MapToolsOptions = {},
): MappedTools<any> {
  const names = createToolNameMap(defs, provider);
  const base = { nameMap: names, ...(options.logger ? { logger: options.logger } : {}) };
  let tools: unknown[];
  switch (provider) {
    case "openai":
      tools = toolDefsToResponsesAPI(defs, base);
      break;
    case "openai-chat":
      tools = toolDefsToChatCompletions(defs, { ...base, strict: options.chatStrict === true });
      break;
    case "gemini":
      tools = toolDefsToGeminiInteractions(defs, base);
      break;
    case "anthropic":
      tools = toolDefsToAnthropic(defs, base);
      break;
  }
  return {
    tools,
    names,
    fromWire: (wire) => names.fromWire(wire) ?? wire,
    toWire: (name) => names.toWire(name),
  };
}
