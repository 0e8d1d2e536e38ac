/**
 * Settings policy: pure functions over tool metadata and stored settings.
 *
 * Stored settings are validated strictly when a user changes them (normalizeToolParameters throws
 * ToolParameterError), but when they are read back for a call, corrupt values fall back to defaults
 * (getSafeEffectiveToolSettings) because there is no model turn to hand a correctable error to.
 */
import { ToolParameterError, ToolSettingsError } from "./errors.js";
import { setOwn } from "./json-schema.js";
import type {
  EffectiveToolSettings,
  Logger,
  RegisteredTool,
  SavedToolSettings,
  ToolDefinition,
  ToolParameterDescriptor,
} from "./types.js";

/** Defaults from the tool's metadata: enabledByDefault and a copy of defaultParameters. */
export function getDefaultToolSettings(tool: RegisteredTool): EffectiveToolSettings {
  return { enabled: tool.settings.enabledByDefault, values: cloneSettingValue(tool.settings.defaultParameters) };
}

/**
 * A deep copy of a settings value (JSON data: objects, arrays, primitives). Several times faster than
 * structuredClone for the small objects settings are, which matters on the settings list and every tool call.
 */
export function cloneSettingValue<T>(value: T): T {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(cloneSettingValue) as T;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) setOwn(out, key, cloneSettingValue((value as Record<string, unknown>)[key]));
  return out as T;
}

function describe(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return "(a value too deeply nested to show)";
  }
  if (text === undefined) return String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * Checks one value against its descriptor (type, range, allowed values, then the descriptor's own `validate`) and
 * returns it (a list is copied). Throws ToolParameterError naming the tool, parameter, value and violated rule.
 */
export function checkSettingValue(toolName: string, d: ToolParameterDescriptor, value: unknown): unknown {
  const checked = checkType(toolName, d, value);
  const problem = d.validate?.(checked);
  if (problem) {
    throw new ToolParameterError(
      `Invalid value ${describe(value)} for parameter "${d.name}" of tool "${toolName}": ${problem}.`,
      {
        tool: toolName,
        parameter: d.name,
        rule: problem,
      },
    );
  }
  return checked;
}

function checkType(toolName: string, d: ToolParameterDescriptor, value: unknown): unknown {
  const fail = (rule: string): never => {
    throw new ToolParameterError(
      `Invalid value ${describe(value)} for parameter "${d.name}" of tool "${toolName}": ${rule}.`,
      { tool: toolName, parameter: d.name, rule },
    );
  };
  const range = (n: number, what: string) => {
    if (d.min !== undefined && n < d.min) fail(`${what} must be at least ${d.min}`);
    if (d.max !== undefined && n > d.max) fail(`${what} must be at most ${d.max}`);
  };
  switch (d.type) {
    case "integer":
      if (typeof value !== "number" || !Number.isInteger(value)) fail("must be an integer");
      range(value as number, "value");
      return value;
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) fail("must be a finite number");
      range(value as number, "value");
      return value;
    case "boolean":
      if (typeof value !== "boolean") fail("must be true or false");
      return value;
    case "string":
      if (typeof value !== "string") fail("must be a string");
      if (d.maxLength !== undefined && (value as string).length > d.maxLength)
        fail(`must be at most ${d.maxLength} characters long (maxLength)`);
      if (d.allowedValues && !d.allowedValues.includes(value as string)) {
        fail(`must be one of ${d.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`);
      }
      return value;
    case "string[]":
      if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) fail("must be a list of strings");
      range((value as string[]).length, "list length");
      if (d.maxLength !== undefined) {
        const long = (value as string[]).findIndex((v) => v.length > d.maxLength!);
        if (long >= 0)
          fail(
            `entry ${long + 1} is ${(value as string[])[long]!.length} characters long; each entry may be at most ${d.maxLength} characters (maxLength)`,
          );
      }
      if (d.allowedValues) {
        const bad = (value as string[]).find((v) => !d.allowedValues?.includes(v));
        if (bad !== undefined) fail(`entries must be among ${d.allowedValues.join(", ")} (got ${JSON.stringify(bad)})`);
      }
      return [...(value as string[])];
    case "object[]": {
      if (!Array.isArray(value)) fail("must be a list of objects");
      range((value as unknown[]).length, "list length");
      return (value as unknown[]).map((entry, index) => checkEntry(toolName, d, entry, index));
    }
  }
}

/** Checks one entry of an `object[]` setting against the descriptor's fields; returns a normalized copy. */
function checkEntry(toolName: string, d: ToolParameterDescriptor, entry: unknown, index: number): unknown {
  const where = `entry ${index + 1}`;
  if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
    throw new ToolParameterError(
      `Invalid value ${describe(entry)} for parameter "${d.name}" of tool "${toolName}": ${where} must be an object.`,
      { tool: toolName, parameter: d.name, rule: `${where} must be an object` },
    );
  }
  const fields = new Map((d.fields ?? []).map((f) => [f.name, f]));
  const out: Record<string, unknown> = {};
  for (const [key, fieldValue] of Object.entries(entry as Record<string, unknown>)) {
    const field = fields.get(key);
    if (!field) {
      const rule = `${where} has an unknown field "${key}" (known: ${[...fields.keys()].join(", ")})`;
      throw new ToolParameterError(`Invalid value for parameter "${d.name}" of tool "${toolName}": ${rule}.`, {
        tool: toolName,
        parameter: d.name,
        rule,
      });
    }
    if (fieldValue === null || fieldValue === undefined) continue;
    try {
      out[key] = checkSettingValue(toolName, field, fieldValue);
    } catch (error) {
      const rule = `${where}, field "${key}": ${(error as ToolParameterError).details?.rule ?? (error as Error).message}`;
      throw new ToolParameterError(`Invalid value for parameter "${d.name}" of tool "${toolName}": ${rule}.`, {
        tool: toolName,
        parameter: d.name,
        rule,
      });
    }
  }
  for (const field of fields.values()) {
    if (out[field.name] !== undefined) continue;
    if (field.default === undefined) {
      const rule = `${where} needs the field "${field.name}"`;
      throw new ToolParameterError(`Invalid value for parameter "${d.name}" of tool "${toolName}": ${rule}.`, {
        tool: toolName,
        parameter: d.name,
        rule,
      });
    }
    out[field.name] = structuredClone(field.default);
  }
  return out;
}

/**
 * Validates parameter names, types, min/max and allowed values against the tool's parameterDescriptors.
 * Returns a new object holding the given keys. Throws ToolParameterError naming the parameter, value and rule.
 */
export function normalizeToolParameters(
  tool: RegisteredTool,
  params: Record<string, unknown>,
): Record<string, unknown> {
  const name = tool.definition.name;
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    throw new ToolParameterError(`Parameters of tool "${name}" must be an object.`, { tool: name });
  }
  // Nothing to check (no saved parameters, the common case at call time): skip building the descriptor index.
  let empty = true;
  for (const _ in params) {
    empty = false;
    break;
  }
  if (empty) return {};
  const descriptors = new Map(tool.settings.parameterDescriptors.map((d) => [d.name, d]));
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(params)) {
    const d = descriptors.get(key);
    if (!d) {
      const known = [...descriptors.keys()];
      // The on/off state is no parameter: it sits beside them.
      const hint =
        key === "enabled"
          ? ` The on/off state is not a parameter: send {"enabled": ${JSON.stringify(typeof params[key] === "boolean" ? params[key] : false)}} beside "parameters" (CLI: --enable or --disable).`
          : "";
      throw new ToolParameterError(
        `Unknown parameter "${key}" for tool "${name}"; ${known.length ? `known parameters: ${known.join(", ")}` : "it has no settings"}.${hint}`,
        { tool: name, parameter: key, rule: "unknown parameter" },
      );
    }
    out[key] = checkSettingValue(name, d, value);
  }
  return out;
}

/**
 * Three-way merge: defaults < saved < updates, validated. Throws ToolParameterError for an invalid parameter
 * and ToolSettingsError when `updates.enabled` is false for a tool whose canDisable is false.
 * A saved `enabled: false` on a tool that cannot be disabled is ignored.
 */
export function mergeToolSettings(
  tool: RegisteredTool,
  saved?: SavedToolSettings | null,
  updates?: SavedToolSettings | null,
): EffectiveToolSettings {
  const name = tool.definition.name;
  if (updates?.enabled === false && !tool.settings.canDisable) {
    throw new ToolSettingsError(`Tool "${name}" cannot be disabled.`, { tool: name, rule: "canDisable is false" });
  }
  const defaults = getDefaultToolSettings(tool);
  let enabled = defaults.enabled;
  for (const layer of [saved, updates]) {
    if (layer?.enabled === true || layer?.enabled === false) enabled = layer.enabled;
  }
  if (!tool.settings.canDisable) enabled = true;
  const values = {
    ...defaults.values,
    ...normalizeToolParameters(tool, saved?.parameters ?? {}),
    ...normalizeToolParameters(tool, updates?.parameters ?? {}),
  };
  return { enabled, values };
}

/**
 * Keeps what is valid of stored parameters: each invalid parameter is left out on its own, and a list keeps its
 * valid entries (one bad `deniedPaths` entry does not drop the others), the first ones up to its cap. Returns the kept values and a description
 * of what was dropped. Never throws.
 */
export function salvageToolParameters(
  tool: RegisteredTool,
  stored: unknown,
): { parameters: Record<string, unknown>; dropped: string[] } {
  const name = tool.definition.name;
  const parameters: Record<string, unknown> = {};
  const dropped: string[] = [];
  if (!stored || typeof stored !== "object" || Array.isArray(stored)) return { parameters, dropped };
  const descriptors = new Map(tool.settings.parameterDescriptors.map((d) => [d.name, d]));
  for (const [key, value] of Object.entries(stored)) {
    const d = descriptors.get(key);
    if (!d) {
      dropped.push(key);
      continue;
    }
    try {
      parameters[key] = checkSettingValue(name, d, value);
      continue;
    } catch {
      // fall through: salvage a list's valid entries, else drop the parameter
    }
    const entries = (d.type === "string[]" || d.type === "object[]") && Array.isArray(value) ? value : undefined;
    // The valid entries, the first ones up to the list's cap (a list stored longer than its cap keeps its head
    // rather than vanishing: a deny list that lost everything would loosen the tool).
    const kept = entries
      ?.filter((entry) => {
        try {
          checkSettingValue(name, d, [entry]);
          return true;
        } catch {
          return false;
        }
      })
      .slice(0, d.max ?? Number.POSITIVE_INFINITY);
    try {
      if (!entries || !kept) throw new Error("not a list");
      parameters[key] = checkSettingValue(name, d, kept);
      dropped.push(`${key} (${entries.length - kept.length} of ${entries.length} entries)`);
    } catch {
      dropped.push(key);
    }
  }
  return { parameters, dropped };
}

/**
 * mergeToolSettings for execution time: corrupt saved settings never break the call. Invalid saved values fall
 * back to their defaults one by one (see salvageToolParameters) and what was dropped is logged. The saved enabled
 * state is kept when it is a boolean (a user's "off" must stay off).
 */
export function getSafeEffectiveToolSettings(
  tool: RegisteredTool,
  saved?: SavedToolSettings | null,
  logger?: Logger,
): EffectiveToolSettings {
  try {
    return mergeToolSettings(tool, saved);
  } catch (error) {
    const defaults = getDefaultToolSettings(tool);
    const enabled = typeof saved?.enabled === "boolean" && tool.settings.canDisable ? saved.enabled : defaults.enabled;
    const { parameters, dropped } = salvageToolParameters(tool, saved?.parameters);
    logger?.warn(
      { tool: tool.definition.name, err: (error as Error).message, dropped },
      "saved tool settings are invalid; the invalid values fall back to defaults",
    );
    return { enabled, values: { ...defaults.values, ...parameters } };
  }
}

/** The definition a model sees for a tool with these settings (buildDefinition when the tool has one). */
export function getToolDefinition(tool: RegisteredTool, settings: EffectiveToolSettings): ToolDefinition {
  return tool.buildDefinition ? tool.buildDefinition(settings) : tool.definition;
}

/**
 * Filters enabled tools and produces their definitions. `settings` maps tool name → effective settings; tools
 * missing from it use their defaults.
 */
export function getToolDefinitionsForTools(
  tools: readonly RegisteredTool[],
  settings?: ReadonlyMap<string, EffectiveToolSettings> | Record<string, EffectiveToolSettings>,
): ToolDefinition[] {
  const lookup = (name: string): EffectiveToolSettings | undefined =>
    settings instanceof Map
      ? settings.get(name)
      : (settings as Record<string, EffectiveToolSettings> | undefined)?.[name];
  const out: ToolDefinition[] = [];
  for (const tool of tools) {
    const effective = lookup(tool.definition.name) ?? getDefaultToolSettings(tool);
    if (effective.enabled) out.push(getToolDefinition(tool, effective));
  }
  return out;
}

/** The `timeoutSeconds` setting that long-running built-ins expose (its range and default are declared here only). */
export const TIMEOUT_SECONDS_DESCRIPTOR: ToolParameterDescriptor = {
  name: "timeoutSeconds",
  type: "integer",
  description: "Execution budget for one call; the call is cancelled when it is exceeded.",
  min: 5,
  max: 600,
  default: 30,
  unit: "seconds",
};

/** Default time budget (ms) for tools without a timeoutSeconds setting. */
export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;
