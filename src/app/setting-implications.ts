/**
 * Settings that only mean something together with another one. Setting such a value alone must take effect,
 * never be stored and silently ignored: the update also sets the setting it depends on, or is refused with a
 * message saying why when the same update asks for a conflicting value.
 */
import { APPROVAL_RULES_SETTING, APPROVAL_SETTING } from "../core/approval/policy.js";
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

/**
 * Locks that bind what they imply (see docs/state.md, "Admin locks"): a setting an admin locks whose effect another
 * setting of the user's could undo. When an admin's locking update sets `parameter` and leaves `undoneBy` out, the
 * update also sets `undoneBy` to `value` (and so locks it too).
 */
const LOCK_IMPLICATIONS: { parameter: string; undoneBy: string; value: unknown }[] = [
  // A locked quality binds only while the model may not pick its own (letAiDecideQuality on lets it).
  { parameter: "defaultQuality", undoneBy: "letAiDecideQuality", value: false },
];

/** An admin's locking update with the settings its locks imply added (see LOCK_IMPLICATIONS). */
export function withLockImplications(tool: RegisteredTool, body: UpdateToolSettingsBody): UpdateToolSettingsBody {
  const parameters = body.parameters;
  if (!parameters) return body;
  const declared = new Set(tool.settings.parameterDescriptors.map((d) => d.name));
  let result = parameters;
  for (const { parameter, undoneBy, value } of LOCK_IMPLICATIONS) {
    if (!declared.has(parameter) || !declared.has(undoneBy)) continue;
    if (!(parameter in parameters) || parameters[parameter] === null || undoneBy in parameters) continue;
    result = { ...result, [undoneBy]: value };
  }
  return result === parameters ? body : { ...body, parameters: result };
}

/**
 * Refuses a user's update that would loosen a decision an admin locked: allow rules in `approvalRules` while the
 * locked `approval` setting is `ask` or `deny` (a locked decision is a floor; the user's rules may only make it
 * stricter), except allow rules already stored (for the same match), which may be kept. Throws ToolSettingsError (422 invalid_settings, `rule: "admin_locked"`) naming the lock.
 */
export function refuseLoosening(
  tool: RegisteredTool,
  saved: { parameters?: Record<string, unknown> | null; locked?: string[] | null } | undefined,
  updates: Record<string, unknown>,
): void {
  if (!saved?.locked?.includes(APPROVAL_SETTING)) return;
  const floor = saved.parameters?.[APPROVAL_SETTING];
  if (floor !== "ask" && floor !== "deny") return;
  const rules = updates[APPROVAL_RULES_SETTING];
  if (!Array.isArray(rules)) return;
  // Allow rules stored before the lock may be sent back (a PUT of the parameters read): they are ignored under the
  // floor when a call is decided, and keeping them is no loosening.
  const stored = saved.parameters?.[APPROVAL_RULES_SETTING];
  const kept = new Set(
    (Array.isArray(stored) ? stored : [])
      .filter((r) => (r as { decision?: unknown } | null)?.decision === "allow")
      .map((r) => (r as { match?: unknown }).match),
  );
  const loosening = rules.filter((r) => {
    const rule = r as { decision?: unknown; match?: unknown } | null;
    return rule?.decision === "allow" && !kept.has(rule.match);
  });
  if (loosening.length === 0) return;
  throw new ToolSettingsError(
    `The approval setting of "${tool.definition.name}" was locked at ${floor} by an admin; your rules may only make it stricter, so allow rules (${loosening.map((r) => JSON.stringify((r as { match?: unknown }).match)).join(", ")}) are refused. Ask an admin, or use ask and deny rules.`,
    { tool: tool.definition.name, parameters: [APPROVAL_SETTING], rule: "admin_locked" },
  );
}
