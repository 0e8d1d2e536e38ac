/**
 * Settings declared once.
 *
 * A tool declares each of its settings exactly once, as a {@link ToolParameterDescriptor} (name, type, default,
 * range, unit, who may change it). Everything else is derived from those descriptors:
 *
 * - the defaults (`ToolSettingsMetadata.defaultParameters`), by {@link normalizeToolSettings};
 * - validation of a user's change (`normalizeToolParameters` in settings-policy.ts);
 * - lenient reading at call time ({@link integerSetting}, {@link stringSetting}, …: invalid stored values fall back
 *   to the descriptor's default, numbers are clamped to its range) — no literal ranges in tool code;
 * - the settings reference in the docs and the settings page ({@link describeSetting}).
 *
 * The rest of a tool's settings metadata has sensible defaults, so a trivial tool needs no settings object at all.
 */
import { checkSettingValue } from "./settings-policy.js";
import type { RegisteredTool, ToolDefinition, ToolParameterDescriptor, ToolSettingsMetadata } from "./types.js";

/**
 * The caps every list (and string) setting gets at registration unless its descriptor declares its own: `max`
 * entries per list, `maxLength` characters per entry (or per string). A change beyond them is refused with
 * invalid_settings (HTTP 422) naming the cap.
 */
export const LIST_SETTING_CAPS = { max: 200, maxLength: 1024 } as const;

/**
 * What a tool author writes for a tool's settings metadata. Every field is optional:
 * `title` defaults to the tool name, `description` to the definition's description, `category` to "interaction",
 * `enabledByDefault` and `canDisable` to true, `parameterDescriptors` to none.
 *
 * `defaultParameters` is derived from the descriptors' `default`s and need not be written. It is still accepted
 * (the shape of ToolSettingsMetadata): a value there fills in a descriptor that has no `default`; a value that
 * contradicts a descriptor's `default`, or names no descriptor, is a registration error.
 */
export type ToolSettingsDeclaration = Partial<Omit<ToolSettingsMetadata, "parameterDescriptors">> & {
  parameterDescriptors?: readonly ToolParameterDescriptor[];
};

/**
 * A tool as its author declares it: a RegisteredTool whose settings metadata may be partial or absent.
 * {@link defineTool} and `registerTool` turn it into a full RegisteredTool.
 */
export type ToolDeclaration = Omit<RegisteredTool, "settings"> & { settings?: ToolSettingsDeclaration };

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Completes a settings declaration into full metadata: fills the defaults of the optional fields, gives every
 * descriptor its `default`, and derives `defaultParameters` from the descriptors.
 *
 * Throws Error (a programming error, raised at registration) when two descriptors share a name, a descriptor's
 * `min` exceeds its `max`, a descriptor's default fails its own type/range/allowed-values/validate rules, or a
 * `defaultParameters` entry names no descriptor or contradicts one.
 */
export function normalizeToolSettings(
  definition: ToolDefinition,
  declaration: ToolSettingsDeclaration = {},
): ToolSettingsMetadata {
  // Metadata this function completed already (defineTool's, which registerTool sees again) is complete: checking it
  // twice would only run every default's validation again at every process start.
  if (completed.has(declaration)) return declaration as ToolSettingsMetadata;
  const name = definition.name;
  const given = declaration.defaultParameters ?? {};
  const seen = new Set<string>();
  const descriptors: ToolParameterDescriptor[] = [];
  for (const original of declaration.parameterDescriptors ?? []) {
    if (seen.has(original.name)) throw new Error(`Tool "${name}": setting "${original.name}" is declared twice.`);
    seen.add(original.name);
    if (original.min !== undefined && original.max !== undefined && original.min > original.max) {
      throw new Error(`Tool "${name}": setting "${original.name}" has min ${original.min} above max ${original.max}.`);
    }
    const d = { ...original };
    if (d.type === "string[]" || d.type === "object[]") d.max ??= LIST_SETTING_CAPS.max;
    if (d.type === "string[]" || d.type === "string") d.maxLength ??= LIST_SETTING_CAPS.maxLength;
    if (d.name in given) {
      if (d.default === undefined) d.default = structuredClone(given[d.name]);
      else if (!sameValue(d.default, given[d.name])) {
        throw new Error(
          `Tool "${name}": defaultParameters.${d.name} (${JSON.stringify(given[d.name])}) contradicts the setting's declared default (${JSON.stringify(d.default)}); declare the default once, on the descriptor.`,
        );
      }
    }
    if (d.default !== undefined) {
      try {
        checkSettingValue(name, d, d.default);
      } catch (error) {
        throw new Error(`Tool "${name}": the default of setting "${d.name}" is invalid: ${(error as Error).message}`);
      }
    }
    descriptors.push(d);
  }
  for (const key of Object.keys(given)) {
    if (!seen.has(key)) {
      throw new Error(
        `Tool "${name}": defaultParameters.${key} has no parameter descriptor; declare the setting as a descriptor with a default.`,
      );
    }
  }
  // Fields this function does not complete (annotations, external origin, enablingRequiresAdmin, …) are kept as
  // declared, so a field added to ToolSettingsMetadata needs no change here.
  const { defaultParameters: _given, parameterDescriptors: _declared, ...rest } = declaration;
  const metadata: ToolSettingsMetadata = {
    ...rest,
    title: declaration.title ?? name,
    description: declaration.description ?? definition.description,
    category: declaration.category ?? "interaction",
    enabledByDefault: declaration.enabledByDefault ?? true,
    canDisable: declaration.canDisable ?? true,
    defaultParameters: defaultParametersOf(descriptors),
    parameterDescriptors: descriptors,
  };
  completed.add(metadata);
  return metadata;
}

/** Settings metadata normalizeToolSettings returned (see there). */
const completed = new WeakSet<object>();

/** The defaults of these descriptors, keyed by name (deep copies; descriptors without a default are left out). */
export function defaultParametersOf(descriptors: readonly ToolParameterDescriptor[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const d of descriptors) if (d.default !== undefined) out[d.name] = structuredClone(d.default);
  return out;
}

/**
 * A full RegisteredTool from a declaration (see {@link ToolSettingsDeclaration} for the defaults). Does not
 * register it. Throws like {@link normalizeToolSettings}.
 */
export function defineTool(declaration: ToolDeclaration): RegisteredTool {
  return { ...declaration, settings: normalizeToolSettings(declaration.definition, declaration.settings) };
}

/**
 * A tool's `execute` that imports the implementation on the tool's first call: `load` returns the implementation's
 * executor, typically a dynamic import of the implementation module followed by picking its function (see
 * src/tools/builtin/apply-patch.ts). Registering
 * a built-in then costs only its metadata (definition, settings, annotations) when a process starts; the
 * implementation and its dependencies load when a call needs them (bundlers make each such import its own chunk).
 * A failed import fails that call (execution_failed) and is tried again on the next one.
 */
export function lazyExecute(load: () => Promise<RegisteredTool["execute"]>): RegisteredTool["execute"] {
  let loading: Promise<RegisteredTool["execute"]> | undefined;
  return async (args, context) => {
    loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw error;
    });
    return (await loading)(args, context);
  };
}

function requireDefault<T>(d: ToolParameterDescriptor, check: (v: unknown) => v is T): T {
  if (!check(d.default)) {
    throw new Error(`Setting "${d.name}" is read with a typed reader but declares no default of type ${d.type}.`);
  }
  return d.default;
}

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isString = (v: unknown): v is string => typeof v === "string";
const isBoolean = (v: unknown): v is boolean => typeof v === "boolean";
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((e) => typeof e === "string");

function clampToRange(n: number, d: ToolParameterDescriptor): number {
  let value = n;
  if (d.min !== undefined) value = Math.max(d.min, value);
  if (d.max !== undefined) value = Math.min(d.max, value);
  return value;
}

/**
 * Reads an integer setting from stored parameters: a value that is not a finite number falls back to the
 * descriptor's default; a number is truncated and clamped to the descriptor's [min, max]. For stored settings
 * only (model arguments are never coerced). Throws Error when the descriptor has no numeric default.
 */
export function integerSetting(parameters: Readonly<Record<string, unknown>>, d: ToolParameterDescriptor): number {
  const fallback = requireDefault(d, isNumber);
  const value = parameters[d.name];
  return clampToRange(isNumber(value) ? Math.trunc(value) : fallback, d);
}

/** {@link integerSetting} of each descriptor, by name: a tool's integer settings read in one call. */
export function integerSettings(
  parameters: Readonly<Record<string, unknown>>,
  descriptors: readonly ToolParameterDescriptor[],
): Record<string, number> {
  return Object.fromEntries(descriptors.map((d) => [d.name, integerSetting(parameters, d)]));
}

/** Like {@link integerSetting} for a `number` setting (not truncated). */
export function numberSetting(parameters: Readonly<Record<string, unknown>>, d: ToolParameterDescriptor): number {
  const fallback = requireDefault(d, isNumber);
  const value = parameters[d.name];
  return clampToRange(isNumber(value) ? value : fallback, d);
}

/**
 * Reads a string setting: the stored value when it is a string (and among the descriptor's `allowedValues`, when
 * it has some), else the descriptor's default. Throws Error when the descriptor has no string default.
 */
export function stringSetting(parameters: Readonly<Record<string, unknown>>, d: ToolParameterDescriptor): string {
  const fallback = requireDefault(d, isString);
  const value = parameters[d.name];
  if (!isString(value)) return fallback;
  if (d.allowedValues && !d.allowedValues.includes(value)) return fallback;
  return value;
}

/** Reads a boolean setting: the stored value when it is a boolean, else the descriptor's default. */
export function booleanSetting(parameters: Readonly<Record<string, unknown>>, d: ToolParameterDescriptor): boolean {
  const fallback = requireDefault(d, isBoolean);
  const value = parameters[d.name];
  return isBoolean(value) ? value : fallback;
}

/**
 * Reads a list-of-strings setting: a copy of the stored value when every entry is a string, else a copy of the
 * descriptor's default.
 */
export function stringListSetting(parameters: Readonly<Record<string, unknown>>, d: ToolParameterDescriptor): string[] {
  const fallback = requireDefault(d, isStringList);
  const value = parameters[d.name];
  return [...(isStringList(value) ? value : fallback)];
}

/**
 * One line describing a setting for people: type, range or allowed values with the unit, the default, and who may
 * change it; e.g. `integer, 5–600 seconds, default 30`.
 */
export function describeSetting(d: ToolParameterDescriptor): string {
  const parts: string[] = [
    d.type === "string[]"
      ? "list of strings"
      : d.type === "object[]"
        ? `list of {${(d.fields ?? []).map((f) => f.name).join(", ")}}`
        : d.type,
  ];
  const unit = d.unit ? ` ${d.unit}` : "";
  if (d.type === "string[]" || d.type === "object[]") {
    if (d.max !== undefined) parts.push(`at most ${d.max} entries`);
    if (d.maxLength !== undefined) parts.push(`each at most ${d.maxLength} characters`);
  } else if (d.min !== undefined && d.max !== undefined) parts.push(`${d.min}–${d.max}${unit}`);
  else if (d.min !== undefined) parts.push(`at least ${d.min}${unit}`);
  else if (d.max !== undefined) parts.push(`at most ${d.max}${unit}`);
  else if (unit) parts.push(`in${unit}`);
  if (d.allowedValues) parts.push(`one of ${d.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`);
  if (d.default !== undefined) parts.push(`default ${JSON.stringify(d.default)}`);
  if (d.adminOnly) parts.push("admin only");
  return parts.join(", ");
}

/**
 * A Markdown reference of the tools' settings (one table per tool, in the order given): name, what it is
 * (see {@link describeSetting}) and its description. `docs/settings-reference.md` is generated from it.
 */
export function settingsReferenceMarkdown(tools: readonly RegisteredTool[]): string {
  const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ");
  const lines: string[] = [];
  for (const tool of tools) {
    const s = tool.settings;
    lines.push(`## ${tool.definition.name} — ${cell(s.title)}`, "", cell(s.description), "");
    const flags = [
      `category ${s.category}`,
      s.enabledByDefault ? "on by default" : "off by default",
      s.canDisable ? "can be disabled" : "cannot be disabled",
      ...(s.enablingRequiresAdmin ? ["only an admin may enable it"] : []),
    ];
    lines.push(`${flags.join("; ")}.`, "");
    if (s.parameterDescriptors.length === 0) {
      lines.push("No settings.", "");
      continue;
    }
    lines.push("| setting | kind | description |", "| --- | --- | --- |");
    for (const d of s.parameterDescriptors) {
      lines.push(`| \`${d.name}\` | ${cell(describeSetting(d))} | ${cell(d.description)} |`);
    }
    lines.push("");
  }
  return lines.join("\n");
}
