/**
 * The tool mappers: convert provider-neutral {@link ToolDefinition}s into each provider's wire format.
 *
 * | provider | function | shape |
 * | --- | --- | --- |
 * | OpenAI Responses | {@link toolDefsToResponsesAPI} | `{ type: "function", name, description, parameters, strict }` |
 * | OpenAI-compatible Chat Completions | {@link toolDefsToChatCompletions} | `{ type: "function", function: { name, description, parameters, strict? } }` |
 * | Gemini Interactions | {@link toolDefsToGeminiInteractions} | `{ type: "function", name, description, parameters }` |
 * | Gemini generateContent | {@link toolDefsToGeminiFunctionDeclarations} | `{ name, description, parametersJsonSchema }` or `{ …, parameters }` |
 * | Anthropic Messages | {@link toolDefsToAnthropic} | `{ name, description, input_schema }` |
 *
 * Names are sanitized to each provider's rule; every mapper accepts (or builds, deterministically) a
 * {@link ToolNameMap} so the loop can translate the name in a tool call back. Source definitions are never mutated.
 */
import type Anthropic from "@anthropic-ai/sdk";
import type { FunctionDeclaration, Interactions } from "@google/genai";
import type OpenAI from "openai";
import type { JsonSchema, Logger, ToolDefinition } from "../core/types.js";
import { ToolNameMap, toAnthropicInputSchema, toGeminiJsonSchema, toGeminiOpenApiSchema } from "./provider-schemas.js";
import { cloneJson, SchemaMappingError, strictSchemaProblems, toStrictSchema } from "./strict-schema.js";
import type { ProviderName } from "./types.js";

/** OpenAI Responses API function tool, as sent. */
export type ResponsesFunctionTool = OpenAI.Responses.FunctionTool;
/** OpenAI Chat Completions function tool (the `ChatCompletionTool` variant this mapper produces). */
export type ChatCompletionFunctionTool = OpenAI.Chat.ChatCompletionFunctionTool;
/** Gemini Interactions API function tool. */
export type GeminiInteractionsFunctionTool = Interactions.Function;
/** Anthropic Messages API custom tool. */
export type AnthropicTool = Anthropic.Tool;

/** Options every mapper takes. */
export interface ToolMapperOptions {
  /** Receives a `warn` for every tool sent non-strict, with the reasons (pino-compatible). */
  logger?: Pick<Logger, "warn">;
  /**
   * The name map to use (its provider must match the mapper's). When absent, one is built from `defs` with
   * {@link createToolNameMap}; build the same one in the loop to read tool calls back.
   */
  nameMap?: ToolNameMap;
}

/** Chat Completions options: `strict` opts in to OpenAI strict mode (default false, see the function). */
export interface ChatCompletionsMapperOptions extends ToolMapperOptions {
  strict?: boolean;
}

/** Which field a generateContent function declaration carries its schema in. */
export type GeminiSchemaDialect = "jsonSchema" | "openapi";

/** generateContent options: `dialect` defaults to `"jsonSchema"` (`parametersJsonSchema`). */
export interface GeminiDeclarationsMapperOptions extends ToolMapperOptions {
  dialect?: GeminiSchemaDialect;
}

/** The result of deriving a tool's strict-mode schema. */
export interface StrictDerivation {
  /** The schema to send: the strict dialect when `strict`, else a copy of the source schema. */
  parameters: JsonSchema;
  strict: boolean;
  /** Why the tool cannot be strict (empty when `strict`). */
  problems: string[];
}

/**
 * The ToolNameMap for `defs` under `provider`'s name rule. Deterministic: the mappers build the same map when none
 * is passed in, so the loop can call this with the same definitions to translate tool-call names back.
 */
export function createToolNameMap(defs: readonly ToolDefinition[], provider: ProviderName): ToolNameMap {
  return ToolNameMap.build(
    defs.map((d) => d.name),
    provider,
  );
}

function nameMapFor(defs: readonly ToolDefinition[], provider: ProviderName, options?: ToolMapperOptions): ToolNameMap {
  const given = options?.nameMap;
  if (given === undefined) return createToolNameMap(defs, provider);
  const sameRule = (p: ProviderName) => (p === "openai-chat" ? "openai" : p);
  if (sameRule(given.provider) !== sameRule(provider)) {
    throw new Error(
      `The ToolNameMap passed in was built for ${given.provider}, not ${provider}; build it for ${provider}.`,
    );
  }
  return given;
}

/**
 * Derives the strict-mode schema of one tool (see src/providers/strict-schema.ts). Strict when the derived schema
 * passes the strict checks; otherwise the source schema is kept (as a copy) and `problems` says why — including
 * a recursive or dangling `$ref` (a SchemaMappingError is caught here, never thrown).
 */
export function deriveStrictParameters(parameters: JsonSchema): StrictDerivation {
  try {
    const derived = toStrictSchema(parameters);
    const problems = strictSchemaProblems(derived);
    if (problems.length === 0) return { parameters: derived, strict: true, problems };
    return { parameters: cloneJson(parameters), strict: false, problems };
  } catch (error) {
    if (error instanceof SchemaMappingError) {
      return { parameters: cloneJson(parameters), strict: false, problems: [`${error.pointer}: ${error.message}`] };
    }
    throw error;
  }
}

/** (schema, logger) pairs already warned about, so a loop that maps its tools every turn warns once. */
const warned = new WeakMap<object, WeakSet<object>>();

function warnNonStrict(
  logger: ToolMapperOptions["logger"],
  provider: string,
  def: ToolDefinition,
  problems: string[],
): void {
  if (!logger) return;
  let loggers = warned.get(def.parameters);
  if (!loggers) {
    loggers = new WeakSet();
    warned.set(def.parameters, loggers);
  }
  if (loggers.has(logger)) return;
  loggers.add(logger);
  logger.warn(
    { tool: def.name, provider, problems },
    `Tool "${def.name}" is sent to ${provider} without strict mode: its schema cannot be expressed in the strict ` +
      `dialect (${problems.slice(0, 3).join("; ")}${problems.length > 3 ? "; …" : ""}). Simplify the schema to make it strict.`,
  );
}

/**
 * OpenAI Responses API tools: `{ type: "function", name, description, parameters, strict }` per definition.
 * `strict: true` with the derived strict schema ({@link toStrictSchema}) when it satisfies strict mode; otherwise
 * `strict: false` with a copy of the plain source schema, and a warning through `options.logger` naming the tool
 * and the reasons (once per schema object and logger, so a loop that maps its tools every turn warns once).
 * Never throws for a schema problem.
 */
export function toolDefsToResponsesAPI(
  defs: readonly ToolDefinition[],
  options?: ToolMapperOptions,
): ResponsesFunctionTool[] {
  const names = nameMapFor(defs, "openai", options);
  return defs.map((def) => {
    const derived = deriveStrictParameters(def.parameters);
    if (!derived.strict) warnNonStrict(options?.logger, "OpenAI Responses", def, derived.problems);
    return {
      type: "function",
      name: names.toWire(def.name),
      description: def.description,
      parameters: derived.parameters,
      strict: derived.strict,
    };
  });
}

/**
 * Chat Completions tools (`ChatCompletionTool[]`): `{ type: "function", function: { name, description,
 * parameters } }`.
 *
 * Strict mode is opt-in here (`options.strict`, default false) because this mapper serves every
 * OpenAI-compatible server (vLLM, llama.cpp, Ollama, LM Studio, proxies), and many of them ignore or reject
 * `strict` and the all-required nullable dialect. Without it, the plain source schema is sent (optional keys stay
 * optional) and no `strict` field is set. With `strict: true` (e.g. against api.openai.com), each tool is treated
 * as in {@link toolDefsToResponsesAPI}: `strict: true` and the derived schema when compatible, else
 * `strict: false`, the source schema and a logged warning.
 */
export function toolDefsToChatCompletions(
  defs: readonly ToolDefinition[],
  options?: ChatCompletionsMapperOptions,
): ChatCompletionFunctionTool[] {
  const names = nameMapFor(defs, "openai-chat", options);
  return defs.map((def) => {
    const name = names.toWire(def.name);
    if (options?.strict !== true) {
      return {
        type: "function",
        function: { name, description: def.description, parameters: cloneJson(def.parameters) },
      };
    }
    const derived = deriveStrictParameters(def.parameters);
    if (!derived.strict) warnNonStrict(options.logger, "Chat Completions", def, derived.problems);
    return {
      type: "function",
      function: { name, description: def.description, parameters: derived.parameters, strict: derived.strict },
    };
  });
}

/**
 * Gemini Interactions API function tools: `{ type: "function", name, description, parameters }`, where
 * `parameters` is JSON Schema as that API takes it ({@link toGeminiJsonSchema}: `$schema` removed, local `$ref`s
 * inlined). Never throws for a schema problem.
 */
export function toolDefsToGeminiInteractions(
  defs: readonly ToolDefinition[],
  options?: ToolMapperOptions,
): GeminiInteractionsFunctionTool[] {
  const names = nameMapFor(defs, "gemini", options);
  return defs.map((def) => ({
    type: "function",
    name: names.toWire(def.name),
    description: def.description,
    parameters: toGeminiJsonSchema(def.parameters),
  }));
}

/**
 * Gemini generateContent `functionDeclarations`. `dialect: "jsonSchema"` (default, preferred) fills
 * `parametersJsonSchema` ({@link toGeminiJsonSchema}); `dialect: "openapi"` fills the older OpenAPI-subset
 * `parameters` ({@link toGeminiOpenApiSchema}; left unset for a tool without parameters).
 *
 * Throws SchemaMappingError (message naming the tool) in the `openapi` dialect when a schema has a recursive,
 * dangling or non-local `$ref`, which that subset cannot express: use the `jsonSchema` dialect for such a tool.
 */
export function toolDefsToGeminiFunctionDeclarations(
  defs: readonly ToolDefinition[],
  options?: GeminiDeclarationsMapperOptions,
): FunctionDeclaration[] {
  const names = nameMapFor(defs, "gemini", options);
  const dialect = options?.dialect ?? "jsonSchema";
  return defs.map((def) => {
    const base = { name: names.toWire(def.name), description: def.description };
    if (dialect === "jsonSchema") return { ...base, parametersJsonSchema: toGeminiJsonSchema(def.parameters) };
    let parameters: ReturnType<typeof toGeminiOpenApiSchema>;
    try {
      parameters = toGeminiOpenApiSchema(def.parameters);
    } catch (error) {
      if (error instanceof SchemaMappingError) {
        throw new SchemaMappingError(
          `Tool "${def.name}" cannot be sent in Gemini's OpenAPI "parameters" dialect: ${error.message} ` +
            'Use the "jsonSchema" dialect (parametersJsonSchema) instead.',
          error.pointer,
          error.ref,
        );
      }
      throw error;
    }
    return parameters === undefined ? base : { ...base, parameters };
  });
}

/**
 * Anthropic Messages tools: `{ name, description, input_schema }`, with `input_schema` rewritten by
 * {@link toAnthropicInputSchema} (`type: "object"` at the top, top-level `oneOf`/`anyOf`/`allOf` flattened).
 */
export function toolDefsToAnthropic(defs: readonly ToolDefinition[], options?: ToolMapperOptions): AnthropicTool[] {
  const names = nameMapFor(defs, "anthropic", options);
  return defs.map((def) => ({
    name: names.toWire(def.name),
    description: def.description,
    input_schema: toAnthropicInputSchema(def.parameters) as AnthropicTool["input_schema"],
  }));
}
