/**
 * Settings that only mean something together with another one. Setting such a value alone must take effect,
 * never be stored and silently ignored: the update also sets the setting it depends on, or is refused with a
 * message saying why when the same update asks for a conflicting value.
 */
import { ToolSettingsError } from "../core/errors.js";
import type { RegisteredTool } from "../core/types.js";
import type { UpdateToolSettingsBody } from "./tool-settings-service.js";

/** `parameter` is used only while `requires.parameter` equals `requires.value`. */
interface SettingImplication {
  parameter: string;
  requires: { parameter: string; value: unknown };
}

/** The settings of the built-in tools that depend on another one. */
const IMPLICATIONS: SettingImplication[] = [
  // shell_exec's own command list applies only under the "custom" allowlist preset.
  { parameter: "allowedCommands", requires: { parameter: "allowlistPreset", value: "custom" } },
];

/**
 * Returns the update with the settings it implies added (e.g. `allowedCommands` set → `allowlistPreset:
 * "custom"`). Applies only to tools that declare both parameters. Throws ToolSettingsError (invalid_settings)
 * when the update sets the dependent value together with a conflicting value (or a reset) of the other.
 */
export function withImpliedSettings(tool: RegisteredTool, body: UpdateToolSettingsBody): UpdateToolSettingsBody {
  const parameters = body.parameters;
  if (!parameters) return body;
  const declared = new Set(tool.settings.parameterDescriptors.map((d) => d.name));
  let result = parameters;
  for (const { parameter, requires } of IMPLICATIONS) {
    if (!declared.has(parameter) || !declared.has(requires.parameter)) continue;
    if (!(parameter in parameters) || parameters[parameter] === null) continue;
    if (!(requires.parameter in parameters)) {
      result = { ...result, [requires.parameter]: requires.value };
      continue;
    }
    if (parameters[requires.parameter] !== requires.value) {
      throw new ToolSettingsError(
        `"${parameter}" of "${tool.definition.name}" is used only when "${requires.parameter}" is ${JSON.stringify(requires.value)}, but this update sets "${requires.parameter}" to ${JSON.stringify(parameters[requires.parameter])}. Send ${JSON.stringify(requires.value)} (or leave "${requires.parameter}" out, and it is switched for you), or drop "${parameter}".`,
        { tool: tool.definition.name, parameter, requires: requires.parameter },
      );
    }
  }
  return result === parameters ? body : { ...body, parameters: result };
}
