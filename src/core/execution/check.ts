/**
 * Stage 1 of a call, check: the tool is enabled for the user, the arguments parse against its schema and pass the
 * tool's own validateArguments. A refusal is returned, not thrown (bad arguments are ordinary traffic, and a throw
 * costs more than the checks); anything else the tool's validateArguments throws propagates.
 */
import { type ArgumentDecoding, checkToolArguments } from "../arg-parsing.js";
import { AccessDeniedError, ToolError, ToolRefusal } from "../errors.js";
import { getSafeEffectiveToolSettings, getToolDefinition } from "../settings-policy.js";
import type { VersionedToolSettings } from "../stores.js";
import type { EffectiveToolSettings, Logger, RegisteredTool } from "../types.js";

/** A checked call: its effective settings and parsed arguments (nulls removed, defaults applied). */
export interface CheckedCall {
  refusal?: undefined;
  settings: EffectiveToolSettings;
  args: Record<string, unknown>;
}

/** A call refused before it runs (disabled tool, bad arguments): the error it ends with. */
export interface RefusedCall {
  refusal: ToolError | ToolRefusal;
}

/** Freezes a JSON value and everything in it; returns it. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/**
 * The effective settings of calls, cached per tool and saved row: the defaults when nothing is saved, else per row
 * object (stores that hand out the same object until the row changes — the in-memory store, and the SQL store for
 * an unchanged row version — hit the cache; a store returning a fresh object per read just recomputes). Cached
 * settings are deep-frozen, since every call of the tool shares them. Corrupt saved values are logged when the row
 * is first resolved. Nothing here can go stale: the key is the row object the store read for this call.
 */
export class EffectiveSettingsCache {
  readonly #logger: Logger;
  readonly #byTool = new WeakMap<
    RegisteredTool,
    { none?: EffectiveToolSettings; rows: WeakMap<object, EffectiveToolSettings> }
  >();

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** The effective settings of `tool` given the user's saved row (undefined: none saved). */
  resolve(tool: RegisteredTool, saved: VersionedToolSettings | undefined): EffectiveToolSettings {
    let entry = this.#byTool.get(tool);
    if (!entry) {
      entry = { rows: new WeakMap() };
      this.#byTool.set(tool, entry);
    }
    if (!saved) {
      entry.none ??= deepFreeze(getSafeEffectiveToolSettings(tool, undefined, this.#logger));
      return entry.none;
    }
    let settings = entry.rows.get(saved);
    if (!settings) {
      settings = deepFreeze(getSafeEffectiveToolSettings(tool, saved, this.#logger));
      entry.rows.set(saved, settings);
    }
    return settings;
  }
}

/**
 * Checks one call given the user's effective settings and whether they saved an explicit enabled flag.
 * `allowDefaultDisabled`: a tool that is off only by default may run (see ToolCallContext). `decoding` receives the
 * decoded arguments once parsing got them within the limits (the audit records them without decoding again).
 */
export function checkCall(
  tool: RegisteredTool,
  settings: EffectiveToolSettings,
  explicitlySaved: boolean,
  rawArgs: unknown,
  allowDefaultDisabled: boolean | undefined,
  decoding?: ArgumentDecoding,
): CheckedCall | RefusedCall {
  const name = tool.definition.name;
  if (!settings.enabled && !(allowDefaultDisabled && !explicitlySaved)) {
    return {
      refusal: new AccessDeniedError(
        `Tool "${name}" is disabled for this user. Enable it in the tool settings (PUT /api/settings/tools/${name} or \`toolhost settings set ${name} --enable\`).`,
        { tool: name, rule: "disabled" },
      ),
    };
  }
  const definition = getToolDefinition(tool, settings);
  const args = checkToolArguments(definition.parameters, rawArgs, decoding);
  if (args instanceof ToolRefusal) return { refusal: args };
  if (tool.validateArguments) {
    try {
      const refusal = tool.validateArguments(args, settings);
      if (refusal) return { refusal };
    } catch (error) {
      if (error instanceof ToolError) return { refusal: error };
      throw error;
    }
  }
  return { settings, args };
}
