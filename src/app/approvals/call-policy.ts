/**
 * The approval policy as the gate applies it to one inspected call: the policy's verdict with the tool's own
 * approvalHint and the admin's locked floor, why an allow_always answer would not stick, and what could help a
 * call that asks where nobody can answer.
 */
import {
  APPROVAL_RULES_SETTING,
  APPROVAL_SETTING,
  type ApprovalVerdict,
  approvalProfile,
  evaluateApproval,
  rulesOf,
} from "../../core/approval/policy.js";
import { AccessDeniedError } from "../../core/errors.js";
import { baseDirectory, resolveAndValidatePath } from "../../core/path-policy.js";
import type { InspectedCall } from "../../core/runtime.js";
import type { ApprovalHint } from "../../core/types.js";
import type { ApprovalService } from "./service.js";
import { lockedApprovalFloor } from "./types.js";

/** Whose call it is: the approval service (for the user's admin locks) and the user. */
export interface PolicyCaller {
  service: Pick<ApprovalService, "locks">;
  userId: string;
}

/**
 * What could help a call that asks where nobody can answer, in words for the model and the person reading the
 * denial — only what would change the outcome (never "set approval" when the setting is already allow).
 */
export function remedyFor(inspected: InspectedCall, verdict: ApprovalVerdict): string {
  const name = inspected.tool.definition.name;
  const setting = inspected.settings.values[APPROVAL_SETTING];
  switch (verdict.source) {
    case "hint":
      return "";
    case "rule":
      return verdict.rule
        ? `The rule ${verdict.rule.decision} "${verdict.rule.match}" asks for every call it matches; only changing that rule lets such calls run unattended.`
        : "";
    case "doubt":
      return setting === "allow"
        ? "Your own ask and deny rules apply to it, so only a person can allow it."
        : `An allow rule does not cover it; with approval=allow for "${name}" it would run (the sandbox and path policy still confine it).`;
    case "setting":
      return `To run such calls without asking, set approval=allow for "${name}" or add an allow rule (approvalRules).`;
  }
}

/** What allow_always stores besides `approval: allow` for a tool imported from an MCP server: the version allowed. */
function pinnedVersion(tool: InspectedCall["tool"]): Record<string, unknown> {
  const hash = tool.settings.external?.contentHash;
  return hash && tool.settings.parameterDescriptors.some((d) => d.name === "approvedContentHash")
    ? { approvedContentHash: hash }
    : {};
}

/**
 * Why an allow_always answer would not make this same call run without asking next time, or null when it would:
 * the policy is evaluated again as if the rule it stores (or `approval: allow`) were saved, and the user's
 * admin locks are checked (a locked setting, or a locked ask/deny floor).
 */
export async function alwaysRefusal(
  who: PolicyCaller,
  inspected: InspectedCall,
  verdict: ApprovalVerdict & { hint?: ApprovalHint },
): Promise<string | null> {
  if (verdict.rule && verdict.rule.decision !== "allow")
    return `the rule ${verdict.rule.decision} "${verdict.rule.match}" asks for it, and an allow rule cannot override a stricter rule.`;
  const { tool, settings, context } = inspected;
  const hasRules = approvalProfile(tool).subject !== undefined;
  if (hasRules && verdict.candidates.length === 0)
    return "no part of this call can be stored as an allow rule (its command is computed at run time).";
  try {
    const locks = await who.service.locks(who.userId, tool.definition.name);
    const target = hasRules ? APPROVAL_RULES_SETTING : APPROVAL_SETTING;
    const floor = lockedApprovalFloor(locks);
    if (floor)
      return `the approval setting of "${tool.definition.name}" is locked at ${floor} by an admin; a rule of yours cannot loosen it.`;
    if (locks.lockedKeys.includes(target))
      return `"${target}" of "${tool.definition.name}" was set for you by an admin; only an admin can change it.`;
  } catch {
    // No settings to read (e.g. an unknown tool): the simulation below still decides.
  }
  const parameters = hasRules
    ? {
        ...settings.values,
        [APPROVAL_RULES_SETTING]: [
          ...rulesOf(settings),
          ...verdict.candidates.map((match) => ({ decision: "allow" as const, match })),
        ],
      }
    : { ...settings.values, [APPROVAL_SETTING]: "allow", ...pinnedVersion(tool) };
  // The tool's own say is asked again with the settings as they would be (a pinned version counts).
  const next = { ...settings, values: parameters };
  const again = await evaluateCall(who, { ...inspected, settings: next, context: { ...context, settings: next } });
  if (again.decision === "allow") return null;
  if (again.source === "hint") return `the tool itself asks (${again.reason}), whatever its settings say.`;
  return `even with an allow rule stored, this call would still ${again.decision === "deny" ? "be denied" : "ask"}: ${again.reason}`;
}

/**
 * The policy's verdict for an inspected call, with the tool's approvalHint and the user's admin locks: a locked
 * `approval: ask|deny` is a floor, so an allow that only the user's allow rules gave is held back to it.
 */
export async function evaluateCall(
  who: PolicyCaller,
  inspected: InspectedCall,
): Promise<ApprovalVerdict & { hint?: ApprovalHint }> {
  const { tool, args, settings, context } = inspected;
  let hint: ApprovalHint | undefined;
  if (tool.approvalHint) {
    try {
      hint = await tool.approvalHint(args, context);
    } catch (error) {
      hint = {
        decision: "ask",
        reason: `The tool could not judge this call (${(error as Error)?.message ?? String(error)}).`,
      };
    }
  }
  const call = { baseDirectory: baseDirectory(context), ...(hint ? { hint } : {}) };
  const verdict = await evaluateApproval(tool, args, settings, call);
  const setting = settings.values[APPROVAL_SETTING];
  if (verdict.decision === "allow" && (setting === "ask" || setting === "deny")) {
    const floor = lockedApprovalFloor(await who.service.locks(who.userId, tool.definition.name));
    if (floor) {
      const strict = rulesOf(settings).filter((r) => r.decision !== "allow");
      const held = await evaluateApproval(
        tool,
        args,
        { ...settings, values: { ...settings.values, [APPROVAL_RULES_SETTING]: strict } },
        call,
      );
      return {
        ...held,
        reason: `${held.reason} An admin locked the approval setting of "${tool.definition.name}" at ${floor}, so your allow rules do not loosen it.`,
        ...(hint ? { hint } : {}),
      };
    }
  }
  return { ...verdict, ...(hint ? { hint } : {}) };
}

/**
 * The path policy's refusal of a call that would ask, if its path arguments (the approval subject's, and the
 * profile's `checkedPaths` with their defaults) are refused where it would run: outside the allowed directories,
 * denied, Toolhost's own, or with no working directory to run in. Nobody is asked to approve a call that cannot run;
 * it is refused with the same access_denied it would end with. Only a refusal counts: a path that does not exist yet
 * (a file to write) is the tool's to judge when it runs.
 */
export async function pathRefusal(inspected: InspectedCall): Promise<AccessDeniedError | undefined> {
  const profile = approvalProfile(inspected.tool);
  const paths: { argument: string; default?: string }[] = [
    ...(profile.subject?.kind === "path" ? profile.subject.arguments.map((argument) => ({ argument })) : []),
    ...(profile.checkedPaths ?? []),
  ];
  for (const { argument, default: fallback } of paths) {
    const value = inspected.args[argument] ?? fallback;
    if (typeof value !== "string") continue;
    try {
      await resolveAndValidatePath(value, inspected.context, { argument });
    } catch (error) {
      if (error instanceof AccessDeniedError) return error;
    }
  }
  return undefined;
}
