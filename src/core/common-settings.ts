/**
 * Settings every tool has besides its own (the approval policy, the output cap), declared once here and added to
 * each tool's settings metadata when it is registered.
 *
 * A declaration is a function of the tool, so a common setting may default differently per tool (shell tools ask
 * for approval, read-only tools allow) or be left out for tools it does not apply to. A tool that declares a
 * parameter of the same name keeps its own.
 *
 * The descriptor returned is the whole declaration of the setting: give it a `default` (and `min`/`max`, `unit`,
 * `allowedValues`, `adminOnly` as they apply). The registry derives the tool's default from it, the settings
 * policy validates users' changes against it, tools read it with the typed readers of settings-declaration.ts
 * (e.g. `integerSetting(context.settings.values, MY_DESCRIPTOR)`), and docs/settings-reference.md lists it.
 */
import { approvalRulesDescriptor, approvalSettingDescriptor } from "./approval/policy.js";
import { declareMaxResultBytes, declareMaxResultLines } from "./result-cap.js";
import type { RegisteredTool, ToolParameterDescriptor } from "./types.js";

/** Returns the descriptor this common setting has for `tool`, or undefined when it does not apply to it. */
export type CommonSettingDeclaration = (tool: RegisteredTool) => ToolParameterDescriptor | undefined;

/** The common settings, in the order they are shown after a tool's own settings. */
export const COMMON_SETTING_DECLARATIONS: CommonSettingDeclaration[] = [
  approvalSettingDescriptor,
  approvalRulesDescriptor,
  declareMaxResultBytes,
  declareMaxResultLines,
];

/**
 * A copy of `tool` whose settings metadata also holds the common settings (descriptor and default) that apply to
 * it. The tool's own descriptors win over a common one of the same name. Does not mutate `tool`.
 */
export function withCommonSettings(tool: RegisteredTool): RegisteredTool {
  const own = new Set(tool.settings.parameterDescriptors.map((d) => d.name));
  const extra: ToolParameterDescriptor[] = [];
  for (const declare of COMMON_SETTING_DECLARATIONS) {
    const d = declare(tool);
    if (d && !own.has(d.name)) extra.push(d);
  }
  if (extra.length === 0) return tool;
  const defaults = { ...tool.settings.defaultParameters };
  for (const d of extra)
    if (d.default !== undefined && !(d.name in defaults)) defaults[d.name] = structuredClone(d.default);
  return {
    ...tool,
    settings: {
      ...tool.settings,
      parameterDescriptors: [...tool.settings.parameterDescriptors, ...extra],
      defaultParameters: defaults,
    },
  };
}
