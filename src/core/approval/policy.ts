/**
 * The approval policy: for one call it decides `allow`, `ask` or `deny` from the tool's `approval` setting, its
 * `approvalRules`, the tool's own approvalHint and what the parse of the arguments leaves in doubt.
 *
 * - `approval: deny` refuses every call of the tool; deny always wins.
 * - Otherwise each subject of the call (each command of a shell line, each path, the host) gets the strictest
 *   decision among the rules that match it, or the `approval` setting when none matches; the call gets the
 *   strictest decision over its subjects.
 * - `approval: allow` runs the tool's calls (the sandbox and the path policy confine them); the user's ask and deny
 *   rules still bind, and a doubt that could hide a command from them (anything but a redirection) asks.
 * - Under `approval: ask`, an allow from a narrow allow rule is held back by every doubt (a redirection, an
 *   unknown wrapper option, a computed name, an assignment, unparsable input): it turns the allow into an ask,
 *   never the reverse; a program that runs other programs (ssh, an interpreter, …) is allowed only by a rule
 *   naming it.
 * - The tool's approvalHint is combined last (the strictest wins).
 */
import { realpathSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ToolParameterError } from "../errors.js";
import type {
  ApprovalDecision,
  ApprovalHint,
  ApprovalSubject,
  EffectiveToolSettings,
  RegisteredTool,
  ToolApprovalProfile,
  ToolParameterDescriptor,
} from "../types.js";
import {
  type ApprovalRule,
  costlyRules,
  expandAgainst,
  hostOf,
  invalidRules,
  matchCommandRule,
  matchHostRule,
  matchPathRule,
  patternWords,
  STRICTNESS,
  stricter,
} from "./rules.js";
import { loadShellParser, parseArgv, parseShellCommand, REDIRECT_DOUBT, type ShellWord } from "./shell-parse.js";

/** Name of the per-tool decision setting. */
export const APPROVAL_SETTING = "approval";
/** Name of the per-tool argument rules setting. */
export const APPROVAL_RULES_SETTING = "approvalRules";
/** Most rules one tool's list may hold. */
export const MAX_APPROVAL_RULES = 200;

/**
 * A tool's approval profile: its own declaration (RegisteredTool.approval: every built-in declares one), else for
 * a tool imported from an MCP server ask unless the server is trusted, else allow (ask for a tool only an admin may
 * enable).
 */
export function approvalProfile(tool: RegisteredTool): ToolApprovalProfile {
  if (tool.approval) return tool.approval;
  const external = tool.settings.external;
  if (external) return { default: external.trusted ? "allow" : "ask" };
  return { default: tool.settings.enablingRequiresAdmin ? "ask" : "allow" };
}

/** The `approval` setting of a tool (common to every tool). */
export function approvalSettingDescriptor(tool: RegisteredTool): ToolParameterDescriptor {
  return {
    name: APPROVAL_SETTING,
    type: "string",
    description:
      "Before a call runs: allow it, ask a person (in the chat, the terminal or the MCP client), or deny it. Argument rules (approvalRules) refine it per call; deny always wins.",
    allowedValues: ["allow", "ask", "deny"],
    default: approvalProfile(tool).default,
  };
}

const SUBJECT_WORDS: Record<ApprovalSubject["kind"], string> = {
  shell: "a command prefix, e.g. git status or rm -rf",
  path: "a path glob, e.g. src/** or ~/notes/*.md (relative globs resolve against the working directory)",
  host: "a host, e.g. example.com or *.example.com",
};

/** The `approvalRules` setting of a tool whose arguments rules can match, or undefined for other tools. */
export function approvalRulesDescriptor(tool: RegisteredTool): ToolParameterDescriptor | undefined {
  const subject = approvalProfile(tool).subject;
  if (!subject) return undefined;
  return {
    name: APPROVAL_RULES_SETTING,
    type: "object[]",
    description: `Argument rules, each with a decision: the strictest decision among the rules matching a call wins over the approval setting. A rule matches ${SUBJECT_WORDS[subject.kind]}. Examples a rule must (not) match are checked when it is saved.`,
    default: [],
    max: MAX_APPROVAL_RULES,
    fields: [
      {
        name: "decision",
        type: "string",
        description: "What a matching call gets.",
        allowedValues: ["allow", "ask", "deny"],
      },
      { name: "match", type: "string", description: `The pattern: ${SUBJECT_WORDS[subject.kind]}.` },
      {
        name: "mustMatch",
        type: "string[]",
        description: "Examples the rule must match (checked on save).",
        default: [],
        max: 20,
      },
      {
        name: "mustNotMatch",
        type: "string[]",
        description: "Examples the rule must not match (checked on save).",
        default: [],
        max: 20,
      },
      { name: "note", type: "string", description: "A note for people.", default: "" },
    ],
    validate: (value) => invalidRules(subject, value),
  };
}

/**
 * Refuses rules a save would make too costly to match (see costlyRules): throws ToolParameterError (422) naming the
 * rule. For saves only, before the rules' own validation runs their examples.
 */
export function refuseCostlyRules(tool: RegisteredTool, parameters: Record<string, unknown>): void {
  const subject = approvalProfile(tool).subject;
  const value = parameters[APPROVAL_RULES_SETTING];
  const problem = subject && value != null ? costlyRules(subject, value) : undefined;
  if (!problem) return;
  const name = tool.definition.name;
  throw new ToolParameterError(
    `Invalid value for parameter "${APPROVAL_RULES_SETTING}" of tool "${name}": ${problem}.`,
    { tool: name, parameter: APPROVAL_RULES_SETTING, rule: problem },
  );
}

/** Prepares what the synchronous save-time checks need (the shell parser). Resolves in ~15 ms the first time. */
export async function prepareApprovalPolicy(): Promise<void> {
  await loadShellParser();
}

/** The policy's decision for one call. */
export interface ApprovalVerdict {
  decision: ApprovalDecision;
  /** Why, in words for the person asked and for the model on a deny. */
  reason: string;
  /** The rule that decided it, when a rule did (the strictest matching one). */
  rule?: ApprovalRule;
  /**
   * What decided it: the `approval` setting, a rule, a doubt the parse left (a redirection, a runner, … under a
   * narrow allow rule), or the tool's own approvalHint (e.g. no sandbox). Tells a surface what could help.
   */
  source: ApprovalSource;
  /** What the rules were matched against: commands, paths or the host (for the person asked). */
  subjects: string[];
  /**
   * The rules an "allow always" answer would store (patterns of allow rules): each fully literal command of a
   * shell line, each path, the host. Empty when the tool has no argument rules (then the tool's setting changes).
   */
  candidates: string[];
}

/** What decided a verdict (see ApprovalVerdict.source). */
export type ApprovalSource = "setting" | "rule" | "doubt" | "hint";

/** What the policy needs to know about the call beyond its arguments. */
export interface ApprovalCallContext {
  /** The directory relative paths resolve against (the chat's working directory, else the process's). */
  baseDirectory: string;
  /** The tool's own say (RegisteredTool.approvalHint), already computed. */
  hint?: ApprovalHint;
}

/** Reads the rules from effective settings, keeping only well-formed entries. */
export function rulesOf(settings: EffectiveToolSettings): ApprovalRule[] {
  const raw = settings.values[APPROVAL_RULES_SETTING];
  if (!Array.isArray(raw)) return [];
  return raw.filter(
    (r): r is ApprovalRule =>
      r !== null &&
      typeof r === "object" &&
      typeof (r as ApprovalRule).match === "string" &&
      ["allow", "ask", "deny"].includes((r as ApprovalRule).decision),
  );
}

function settingOf(tool: RegisteredTool, settings: EffectiveToolSettings): ApprovalDecision {
  const value = settings.values[APPROVAL_SETTING];
  return value === "allow" || value === "ask" || value === "deny" ? value : approvalProfile(tool).default;
}

/** Accumulates the decision over a call's subjects. */
class Tally {
  decision: ApprovalDecision = "allow";
  reason = "";
  rule: ApprovalRule | undefined;
  source: ApprovalSource = "setting";
  readonly subjects: string[] = [];
  readonly candidates: string[] = [];
  #seen = false;

  add(decision: ApprovalDecision, reason: string, rule?: ApprovalRule, source?: ApprovalSource): void {
    if (!this.#seen || STRICTNESS[decision] > STRICTNESS[this.decision]) {
      this.decision = decision;
      this.reason = reason;
      this.rule = rule;
      this.source = source ?? (rule ? "rule" : "setting");
    }
    this.#seen = true;
  }

  get empty(): boolean {
    return !this.#seen;
  }
}

/** The strictest of the rules (of the given decisions) for which `matches` holds. */
function strictestMatch(
  rules: ApprovalRule[],
  matches: (rule: ApprovalRule) => boolean,
  only?: ApprovalDecision[],
): ApprovalRule | undefined {
  let best: ApprovalRule | undefined;
  for (const rule of rules) {
    if (only && !only.includes(rule.decision)) continue;
    if (!matches(rule)) continue;
    if (!best || STRICTNESS[rule.decision] > STRICTNESS[best.decision]) best = rule;
  }
  return best;
}

const show = (argv: ShellWord[]) =>
  argv.map((w) => (w === null ? "…" : /\s/.test(w) ? JSON.stringify(w) : w)).join(" ");

/**
 * Decides one call. `args` are the parsed arguments (nulls removed). Never throws for odd arguments: what cannot
 * be read is a doubt (ask), never an allow. Loads the shell parser when the tool needs it.
 */
export async function evaluateApproval(
  tool: RegisteredTool,
  args: Record<string, unknown>,
  settings: EffectiveToolSettings,
  call: ApprovalCallContext,
): Promise<ApprovalVerdict> {
  const name = tool.definition.name;
  const setting = settingOf(tool, settings);
  const profile = approvalProfile(tool);
  const rules = rulesOf(settings);
  const tally = new Tally();
  if (setting === "deny") {
    tally.add("deny", `The approval setting of "${name}" is deny.`);
  } else if (profile.subject) {
    await matchSubjects(profile.subject, args, rules, setting, call, tally);
  }
  if (tally.empty) {
    tally.add(setting, `The approval setting of "${name}" is ${setting}.`);
  }
  if (call.hint && STRICTNESS[call.hint.decision] > STRICTNESS[tally.decision]) {
    tally.add(call.hint.decision, call.hint.reason, undefined, "hint");
  }
  return {
    decision: tally.decision,
    reason: tally.reason,
    ...(tally.rule ? { rule: tally.rule } : {}),
    source: tally.source,
    subjects: tally.subjects,
    candidates: [...new Set(tally.candidates)],
  };
}

async function matchSubjects(
  subject: ApprovalSubject,
  args: Record<string, unknown>,
  rules: ApprovalRule[],
  setting: ApprovalDecision,
  call: ApprovalCallContext,
  tally: Tally,
): Promise<void> {
  const fallback = (what: string) => `No approval rule matches ${what}; the approval setting is ${setting}.`;
  const byRule = (rule: ApprovalRule, what: string) => `The rule ${rule.decision} "${rule.match}" matches ${what}.`;
  switch (subject.kind) {
    case "shell": {
      const value = args[subject.argument];
      let commands: {
        argv: ShellWord[];
        wrappers: ShellWord[][];
        doubts: string[];
        runner: boolean;
        spread?: boolean;
      }[];
      let lineDoubts: string[] = [];
      if (subject.dialect === "argv") {
        if (!Array.isArray(value)) {
          tally.add(stricter(setting, "ask"), "The command is not an argument list.");
          return;
        }
        // No shell reads it, but what its wrappers, `sh -c` and `find -exec` run is judged as in a command line.
        await loadShellParser();
        const argv = value.map((w) => (typeof w === "string" ? w : null));
        const parsed = parseArgv(argv);
        tally.subjects.push(show(argv));
        commands = parsed.commands;
        lineDoubts = parsed.doubts;
      } else if (typeof value !== "string") {
        tally.add(stricter(setting, "ask"), "The command is not a string.");
        return;
      } else if (subject.dialect === "powershell") {
        // No PowerShell parser: deny and ask rules match any command word sequence, nothing is allowed by a rule.
        tally.subjects.push(value);
        const words = patternWords(value.replace(/[;|&(){}]/g, " "));
        const hit = strictestMatch(
          rules,
          (r) => words.some((_, i) => matchCommandRule(r.match, words.slice(i), "broad")),
          ["deny", "ask"],
        );
        if (hit) tally.add(hit.decision, byRule(hit, "the PowerShell command"), hit);
        // Unparsed, so no rule allows it; the setting allow does, unless an ask or deny rule could be hidden in it.
        const guarded = rules.some((r) => r.decision !== "allow");
        if (setting === "allow" && !guarded)
          tally.add("allow", fallback("the PowerShell command"), undefined, "setting");
        else
          tally.add(
            stricter(setting, "ask"),
            setting === "allow"
              ? "PowerShell commands are not parsed, so your ask and deny rules cannot be checked against it."
              : "PowerShell commands are not parsed, so no rule can allow them.",
            undefined,
            "doubt",
          );
        return;
      } else {
        await loadShellParser();
        const parsed = parseShellCommand(value);
        tally.subjects.push(value);
        commands = parsed.commands;
        lineDoubts = parsed.doubts;
      }
      // Doubts (a redirection, a runner, a computed name, an assignment, a parse the policy cannot vouch for) only
      // hold back an allow that a narrow allow rule gave under `approval: ask`. Under `approval: allow` the sandbox and
      // the path policy confine what runs; there a doubt still asks when it could hide a command from the user's own
      // ask or deny rules (anything but a redirection), since those rules must bind.
      const guards = rules.filter((r) => r.decision !== "allow");
      const guard = guards[0] ? ` — your rule ${guards[0].decision} "${guards[0].match}" could not see past it` : "";
      const binding = (doubt: string) => setting !== "allow" || (guards.length > 0 && !isRedirection(doubt));
      for (const command of commands) {
        const text = show(command.argv);
        if (command.argv.every((w) => typeof w === "string")) tally.candidates.push(text);
        const inner = strictestMatch(rules, (r) =>
          matchCommandRule(r.match, command.argv, r.decision === "allow" ? "narrow" : "broad", command.spread),
        );
        const outer = strictestMatch(
          rules,
          (r) => command.wrappers.some((w) => matchCommandRule(r.match, w, "broad")),
          ["deny", "ask"],
        );
        let decision: ApprovalDecision;
        let reason: string;
        let rule: ApprovalRule | undefined;
        let source: ApprovalSource;
        if (inner) {
          decision = inner.decision;
          reason = byRule(inner, `\`${text}\``);
          rule = inner;
          source = "rule";
        } else {
          decision = setting;
          reason = fallback(`\`${text}\``);
          source = "setting";
          if (decision === "allow" && command.runner && binding("runner")) {
            decision = "ask";
            reason =
              setting === "allow"
                ? `\`${text}\` runs other programs${guard}.`
                : `\`${text}\` runs other programs; only a rule naming it can allow it.`;
            source = "doubt";
          }
        }
        if (outer && STRICTNESS[outer.decision] > STRICTNESS[decision]) {
          decision = outer.decision;
          reason = byRule(outer, `a wrapper of \`${text}\``);
          rule = outer;
          source = "rule";
        }
        const doubt = command.doubts.find(binding);
        if (decision === "allow" && doubt !== undefined) {
          decision = "ask";
          reason = `Asking because ${doubt} (\`${text}\`)${setting === "allow" ? guard : ""}.`;
          rule = undefined;
          source = "doubt";
        }
        tally.add(decision, reason, rule, source);
      }
      if (tally.empty) tally.add(setting, fallback("the command"), undefined, "setting");
      const lineDoubt = lineDoubts.find(binding);
      if (tally.decision === "allow" && lineDoubt !== undefined)
        tally.add("ask", `Asking because ${lineDoubt}${setting === "allow" ? guard : ""}.`, undefined, "doubt");
      return;
    }
    case "path": {
      const paths = pathsOf(subject, args);
      for (const input of paths) {
        const lexical = expandAgainst(input, call.baseDirectory);
        tally.subjects.push(lexical);
        tally.candidates.push(lexical);
        // Without rules every form gets the setting (and the reason names the first): no lookup needed.
        const forms = rules.length === 0 ? [lexical] : [...new Set([lexical, realLoose(lexical)])];
        for (const form of forms) {
          const hit = strictestMatch(rules, (r) => matchPathRule(r.match, form, call.baseDirectory));
          if (hit) tally.add(hit.decision, byRule(hit, form), hit);
          else tally.add(setting, fallback(form));
        }
      }
      return;
    }
    case "host": {
      const value = args[subject.argument];
      const host = typeof value === "string" ? hostOf(value) : undefined;
      if (!host) {
        tally.add(stricter(setting, "ask"), "The URL does not parse, so no host rule can allow it.");
        return;
      }
      tally.subjects.push(host);
      tally.candidates.push(host);
      const hit = strictestMatch(rules, (r) => matchHostRule(r.match, host));
      if (hit) tally.add(hit.decision, byRule(hit, host), hit);
      else tally.add(setting, fallback(host));
      return;
    }
  }
}

/**
 * The paths a call names: its path arguments (absent: the working directory) and the further paths the tool names
 * (`namedPaths`, the files its patch touches as the tool parses it; else the files a patch's headers name).
 */
export function pathsOf(subject: Extract<ApprovalSubject, { kind: "path" }>, args: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const name of subject.arguments) {
    const value = args[name];
    if (typeof value === "string" && value !== "") out.push(value);
  }
  const named = subject.namedPaths?.(args);
  if (named) out.push(...named.filter((p) => p !== ""));
  else if (subject.patchArgument) {
    const patch = args[subject.patchArgument];
    if (typeof patch === "string") out.push(...patchPaths(patch));
  }
  if (out.length === 0) out.push(".");
  return [...new Set(out)];
}

/** The file names a patch's headers mention (unified `---`/`+++` and envelope `*** Add/Update/Delete File`, `*** Move to`). */
export function patchPaths(patch: string): string[] {
  const out: string[] = [];
  for (const line of patch.split(/\r?\n/)) {
    let m = /^\*\*\* (?:Add|Update|Delete) File: (.+)$/.exec(line) ?? /^\*\*\* Move to: (.+)$/.exec(line);
    if (m?.[1]) {
      out.push(m[1].trim());
      continue;
    }
    m = /^(?:---|\+\+\+) (.+?)(?:\t.*)?$/.exec(line);
    if (m?.[1]) {
      const name = m[1].trim();
      if (name === "/dev/null") continue;
      out.push(name.replace(/^[ab]\//, ""));
    }
  }
  return [...new Set(out)];
}

/** Whether a doubt is an output or input redirection (it runs no command a rule could catch). */
function isRedirection(doubt: string): boolean {
  return doubt.startsWith(REDIRECT_DOUBT);
}

/** The path through symlinks, resolving the nearest existing ancestor when the path does not exist yet. */
function realLoose(absolute: string): string {
  let current = absolute;
  const tail: string[] = [];
  for (let i = 0; i < 256; i += 1) {
    try {
      return join(realpathSync.native(current), ...tail.reverse());
    } catch {
      const parent = dirname(current);
      if (parent === current) return absolute;
      tail.push(basename(current));
      current = parent;
    }
  }
  return resolve(absolute);
}
