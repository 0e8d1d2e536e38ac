/**
 * The custom-tool authoring API, class style: a Tool has a definition (ToolDef with a ToolParam list) and an async
 * execute returning a ToolResult {success, data, error}. A ToolRegistry registers such tools into the same registry the
 * built-ins use, so they run through the same executeTool path, settings and metrics. A ToolResult with success false
 * reaches the model as a classified `execution_failed` error carrying the tool's message, so the model can retry with
 * other arguments.
 */
import { ToolExecutionError } from "./errors.js";
import { defaultRegistry, type ToolRegistryStore } from "./registry.js";
import { defineTool, type ToolSettingsDeclaration } from "./settings-declaration.js";
import type { JsonSchema, RegisteredTool, ToolContext, ToolDefinition } from "./types.js";

/** One parameter of a custom tool (ToolParam). `required` defaults to true. */
export interface ToolParam {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "array" | "object";
  description: string;
  required?: boolean;
  /** Restricts the value to these. */
  enum?: unknown[];
  /** For arrays: the JSON Schema of the items. */
  items?: JsonSchema;
}

/** A custom tool's definition (ToolDef). */
export interface ToolDef {
  name: string;
  description: string;
  params: ToolParam[];
}

/** The outcome of a custom tool (ToolResult). `data` must be JSON-serializable. */
export class ToolResult<T = unknown> {
  constructor(
    readonly success: boolean,
    readonly data: T | null = null,
    readonly error: string | null = null,
  ) {}

  /** A successful result carrying `data`. */
  static ok<T>(data: T): ToolResult<T> {
    return new ToolResult(true, data, null);
  }

  /** A failed result; `error` should say what went wrong and what to try instead. */
  static fail(error: string): ToolResult<never> {
    return new ToolResult<never>(false, null, error);
  }

  /** How the result is shown to the model: the data (strings as-is, else JSON) or `Error: <message>`. */
  asText(): string {
    if (!this.success) return `Error: ${this.error ?? "the tool failed"}`;
    return typeof this.data === "string" ? this.data : JSON.stringify(this.data, null, 2);
  }
}

/** Base class of custom tools (Tool). Override `settings` to change the default metadata. */
export abstract class Tool<Args extends Record<string, unknown> = Record<string, unknown>> {
  abstract get definition(): ToolDef;
  abstract execute(args: Args, context: ToolContext): Promise<ToolResult>;
  /** Settings metadata overrides; by default: category interaction, enabled, can be disabled, no settings. */
  get settings(): ToolSettingsDeclaration {
    return {};
  }
}

/** Converts a ToolDef into the plain JSON Schema ToolDefinition the registry and mappers use. */
export function toolDefToDefinition(def: ToolDef): ToolDefinition {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const param of def.params) {
    const schema: JsonSchema = { type: param.type, description: param.description };
    if (param.enum) schema.enum = [...param.enum];
    if (param.type === "array") schema.items = param.items ?? {};
    if (param.type === "object") schema.properties = {};
    if (param.type === "object") schema.additionalProperties = true;
    properties[param.name] = schema;
    if (param.required !== false) required.push(param.name);
  }
  return { name: def.name, description: def.description, parameters: { type: "object", properties, required } };
}

/** Wraps a custom Tool as a RegisteredTool; a failed ToolResult becomes a ToolExecutionError. */
export function toRegisteredTool(tool: Tool): RegisteredTool {
  const definition = toolDefToDefinition(tool.definition);
  return defineTool({
    definition,
    settings: tool.settings,
    execute: async (args, context) => {
      const result = await tool.execute(args as Record<string, unknown>, context);
      if (!(result instanceof ToolResult)) {
        throw new ToolExecutionError(`Tool "${definition.name}" did not return a ToolResult.`);
      }
      if (!result.success) throw new ToolExecutionError(result.error ?? `Tool "${definition.name}" failed.`);
      return result.data;
    },
  });
}

/** Registers custom tools (ToolRegistry) into a registry store (the process-wide one by default). */
export class ToolRegistry {
  constructor(readonly store: ToolRegistryStore = defaultRegistry) {}

  /** Registers a custom Tool or a RegisteredTool; throws when the name is taken. */
  register(tool: Tool | RegisteredTool): void {
    this.store.register(tool instanceof Tool ? toRegisteredTool(tool) : tool);
  }

  /** Names of every registered tool. */
  names(): string[] {
    return this.store.list().map((t) => t.definition.name);
  }
}
