/**
 * Approval rules and how each kind matches a call's arguments:
 * - shell rules are command prefixes (`git status`, `npm run test`, `rm -rf`), matched per command after a real
 *   parse (see shell-parse.ts). An `allow` rule matches narrowly: the command's own words must start with the
 *   rule's words in order, and a path-qualified program (`/usr/bin/git`, `./git`) only matches a rule that names
 *   that exact path. An `ask` or `deny` rule matches broadly: the program's base name, the rule's positional
 *   words in order anywhere among the arguments, its flags anywhere (`-rf` is met by `-fr` or `-r -f`, `--force` by
 *   `--force=…`), and each argument computed at run time could be anything, so it may stand for one word the rule needs
 *   (an unquoted one, which bash splits into words, or what xargs appends: for any number of them).
 * - path rules are globs (`src/**`, `~/notes/*.md`, `/etc/**`) resolved like the tool resolves paths: absolute,
 *   `~`-prefixed, or relative to the working directory; matched against the path as given and as it resolves
 *   through symlinks.
 * - host rules are host names (`example.com`) or subdomain patterns (`*.example.com`).
 */
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { basename, isAbsolute, join, resolve } from "node:path";
import type picomatchModule from "picomatch";
import { MAX_PATH_BYTES } from "../path-refusals.js";
import type { ApprovalDecision, ApprovalSubject } from "../types.js";
import { parseArgv, parseShellCommand, type ShellWord, shellParserReady } from "./shell-parse.js";

let picomatchLoaded: typeof picomatchModule | undefined;

/**
 * picomatch, loaded when a path rule is first checked or matched: most calls meet no path rule, and loading it costs
 * a short process (`toolhost call`) several milliseconds.
 */
function picomatch(): typeof picomatchModule {
  picomatchLoaded ??= createRequire(import.meta.url)("picomatch") as typeof picomatchModule;
  return picomatchLoaded;
}

/** One argument rule of a tool's `approvalRules` setting. */
export interface ApprovalRule {
  decision: ApprovalDecision;
  /** The pattern: a command prefix (shell tools), a path glob (path tools) or a host pattern (web tools). */
  match: string;
  /** Examples the rule must match: checked when the rule is saved (a failing rule is refused). */
  mustMatch?: string[];
  /** Examples the rule must not match: checked when the rule is saved. */
  mustNotMatch?: string[];
  /** A note for people (e.g. "added by allow_always on 2026-12-01"). */
  note?: string;
}

/** How strict each decision is: the strictest wins. */
export const STRICTNESS: Record<ApprovalDecision, number> = { allow: 0, ask: 1, deny: 2 };

/** The stricter of two decisions. */
export function stricter(a: ApprovalDecision, b: ApprovalDecision): ApprovalDecision {
  return STRICTNESS[a] >= STRICTNESS[b] ? a : b;
}

/** Characters a command-prefix pattern may not hold: it names one command, it is not a command line. */
const SHELL_OPERATORS = /[;&|<>()`$\n]/;

/** Splits a command-prefix pattern into words (single and double quotes group; a trailing `*` is dropped). */
export function patternWords(pattern: string): string[] {
  const words: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (let m = re.exec(pattern); m; m = re.exec(pattern)) {
    words.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : (m[2] ?? m[3] ?? ""));
  }
  if (words[words.length - 1] === "*") words.pop();
  return words;
}

/** Describes what is wrong with a rule's pattern for this kind of subject, or undefined when it is fine. */
export function invalidPattern(subject: ApprovalSubject, pattern: string): string | undefined {
  if (pattern.trim() === "") return "the pattern must not be empty";
  if (pattern.includes("\0")) return "the pattern must not contain a NUL byte";
  switch (subject.kind) {
    case "shell":
      if (SHELL_OPERATORS.test(pattern))
        return `a command rule names one command and its leading arguments, without shell operators (got ${JSON.stringify(pattern)})`;
      if (patternWords(pattern).length === 0) return "a command rule needs at least a program name";
      return undefined;
    case "path":
      try {
        picomatch().makeRe(pattern);
      } catch (error) {
        return `not a valid glob: ${(error as Error).message}`;
      }
      return undefined;
    case "host":
      if (!/^(\*\.)?[a-z0-9]([a-z0-9.-]*[a-z0-9])?$|^\[[0-9a-f:.]+\]$/i.test(pattern.trim()))
        return `a host rule is a host name like example.com or *.example.com (got ${JSON.stringify(pattern)})`;
      return undefined;
  }
}

/**
 * Most wildcards (`*` runs and `**`) a path rule may hold, most `**`, and most `*` runs in one of its names. Globs
 * are matched as regular expressions, whose backtracking grows with the path's length to the power of the wildcards
 * that can compete for the same characters: three `*` in one name, or three `**`, take seconds on a long path, a
 * dozen take years, and the whole server stalls meanwhile. Within these limits a path of PATH_MAX takes a fraction
 * of a second at worst.
 */
export const PATH_RULE_WILDCARDS = { total: 3, globstars: 2, starsPerName: 2 } as const;

/**
 * Why saving these rules would cost too much, or undefined: a path rule with more wildcards than PATH_RULE_WILDCARDS
 * allows, or a path example longer than any path. Checked before a rule's examples are (which would run the costly
 * match), and only when rules are saved: stored rules keep applying as they are (dropping a stored deny rule would
 * loosen the policy).
 */
export function costlyRules(subject: ApprovalSubject, value: unknown): string | undefined {
  if (subject.kind !== "path" || !Array.isArray(value)) return undefined;
  for (const [index, raw] of value.entries()) {
    const rule = raw as Partial<ApprovalRule> | null;
    if (typeof rule?.match !== "string") continue;
    const where = `rule ${index + 1} (${JSON.stringify(rule.match)})`;
    const costly = costlyGlob(rule.match);
    if (costly) return `${where}: ${costly}`;
    const examples = [...(rule.mustMatch ?? []), ...(rule.mustNotMatch ?? [])];
    const long = examples.find((example) => typeof example === "string" && Buffer.byteLength(example) > MAX_PATH_BYTES);
    if (long !== undefined)
      return `${where}: the example ${JSON.stringify(long.slice(0, 40))}… is longer than any path (at most ${MAX_PATH_BYTES} bytes)`;
  }
  return undefined;
}

/** Why a path glob would be too costly to match (see PATH_RULE_WILDCARDS), or undefined when it is not. */
function costlyGlob(pattern: string): string | undefined {
  const plain = pattern.replace(/\\./g, "x");
  if (/[*?+@!]\(/.test(plain)) {
    return "extglobs such as *(…), +(…), @(…) or !(…) are not supported in rules; use *, **, ? and {a,b}";
  }
  const names = plain.split("/");
  const total = plain.match(/\*+/g)?.length ?? 0;
  if (total > PATH_RULE_WILDCARDS.total) {
    return `a rule may hold at most ${PATH_RULE_WILDCARDS.total} wildcards ("*" or "**", got ${total}); split it into several rules`;
  }
  const globstars = names.filter((name) => name === "**").length;
  if (globstars > PATH_RULE_WILDCARDS.globstars) {
    return `a rule may hold at most ${PATH_RULE_WILDCARDS.globstars} "**" (got ${globstars}); split it into several rules`;
  }
  for (const name of names) {
    if (name === "**") continue;
    const stars = name.match(/\*+/g)?.length ?? 0;
    if (stars > PATH_RULE_WILDCARDS.starsPerName) {
      return `a name in a rule may hold at most ${PATH_RULE_WILDCARDS.starsPerName} "*" (got ${stars} in ${JSON.stringify(name)}); split it into several rules`;
    }
  }
  return undefined;
}

/** Whether a word is an option (`-x`, `--long`), not an operand. */
function isFlag(word: string): boolean {
  return word.length > 1 && word.startsWith("-") && word !== "--";
}

/**
 * Whether a command-prefix rule matches one command's words. `mode` "narrow" is used for allow rules and
 * "broad" for ask and deny rules (see the module comment). `spread`: an argument may stand for any number of words
 * (an unquoted expansion, what xargs appends), so a broad rule's missing words may all hide there.
 */
export function matchCommandRule(
  pattern: string,
  argv: ShellWord[],
  mode: "narrow" | "broad",
  spread = false,
): boolean {
  const words = patternWords(pattern);
  const program = words[0];
  const head = argv[0];
  if (program === undefined || head === undefined) return false;
  if (mode === "narrow") {
    if (head === null || head !== program) return false;
    if (words.length > argv.length) return false;
    for (let i = 1; i < words.length; i += 1) if (argv[i] !== words[i]) return false;
    return true;
  }
  // A computed program name is a doubt of its own (ask), not a match for every rule.
  if (head === null || basename(head) !== basename(program)) return false;
  const args = argv.slice(1);
  const dynamic = args.filter((w) => w === null).length;
  const positional: string[] = [];
  const longFlags = new Set<string>();
  const shortLetters = new Set<string>();
  let afterDashes = false;
  for (const w of args) {
    if (w === null) continue;
    if (!afterDashes && w === "--") {
      afterDashes = true;
      continue;
    }
    if (!afterDashes && w.startsWith("--")) longFlags.add(w.split("=")[0]!);
    else if (!afterDashes && isFlag(w)) for (const ch of w.slice(1)) shortLetters.add(ch);
    else positional.push(w);
  }
  let next = 0;
  let unmet = 0;
  for (const word of words.slice(1)) {
    let met: boolean;
    if (word.startsWith("--") && word.length > 2) met = longFlags.has(word.split("=")[0]!);
    else if (isFlag(word)) met = [...word.slice(1)].every((ch) => shortLetters.has(ch));
    else {
      const at = positional.indexOf(word, next);
      met = at >= 0;
      if (met) next = at + 1;
    }
    if (!met) unmet += 1;
  }
  // Each computed argument may stand for one word the rule needs (it could be anything); one that bash splits into
  // words, or the words xargs appends, for any number of them.
  return unmet <= dynamic || (spread && dynamic > 0);
}

/** Fixed stand-in for the working directory when a relative rule is checked against relative examples. */
const EXAMPLE_BASE = "/working-directory";

/** Expands `~`, and resolves a relative pattern or path against `base`. */
export function expandAgainst(pattern: string, base: string): string {
  if (pattern === "~") return homedir();
  if (pattern.startsWith("~/")) return join(homedir(), pattern.slice(2));
  return isAbsolute(pattern) ? pattern : join(resolve(base), pattern);
}

/**
 * Whether a path glob rule matches an absolute path. `base` is the working directory relative patterns resolve
 * against. A pattern naming a directory also covers everything beneath it (`src` is `src` and `src/**`).
 */
export function matchPathRule(pattern: string, absolutePath: string, base: string): boolean {
  const full = expandAgainst(pattern.trim(), base).replace(/\/+$/, "") || "/";
  const matcher = picomatch()([full, `${full === "/" ? "" : full}/**`], { dot: true });
  return matcher(absolutePath);
}

/** Whether a host rule matches a host name (compared case-insensitively, without a trailing dot). */
export function matchHostRule(pattern: string, host: string): boolean {
  const p = pattern.trim().toLowerCase().replace(/\.$/, "");
  const h = host.toLowerCase().replace(/\.$/, "");
  if (p.startsWith("*.")) return h.endsWith(p.slice(1)) && h.length > p.length - 1;
  return h === p;
}

/** The host of a URL, or undefined when it does not parse as an absolute URL. */
export function hostOf(url: string): string | undefined {
  try {
    const host = new URL(url).hostname;
    return host === "" ? undefined : host;
  } catch {
    return undefined;
  }
}

/** Whether `rule` matches an example subject (a command line, a path, a URL or host), for the save-time check. */
export function ruleMatchesExample(subject: ApprovalSubject, rule: ApprovalRule, example: string): boolean | undefined {
  const mode = rule.decision === "allow" ? "narrow" : "broad";
  switch (subject.kind) {
    case "shell": {
      if (!shellParserReady()) return undefined;
      const parsed = subject.dialect === "argv" ? parseArgv(patternWords(example)) : parseShellCommand(example);
      return parsed.commands.some(
        (c) =>
          matchCommandRule(rule.match, c.argv, mode, c.spread) ||
          (mode === "broad" && c.wrappers.some((w) => matchCommandRule(rule.match, w, mode))),
      );
    }
    case "path":
      return matchPathRule(rule.match, expandAgainst(example, EXAMPLE_BASE), EXAMPLE_BASE);
    case "host":
      return matchHostRule(rule.match, hostOf(example) ?? example);
  }
}

/**
 * The save-time check of a rule list: each pattern is valid for the subject and each rule matches its mustMatch
 * examples and none of its mustNotMatch ones. Returns a description of the first failure, or undefined.
 */
export function invalidRules(subject: ApprovalSubject, value: unknown): string | undefined {
  if (!Array.isArray(value)) return undefined;
  for (const [index, raw] of value.entries()) {
    const rule = raw as ApprovalRule;
    const where = `rule ${index + 1} (${JSON.stringify(rule.match)})`;
    const bad = invalidPattern(subject, rule.match);
    if (bad) return `${where}: ${bad}`;
    for (const example of rule.mustMatch ?? []) {
      if (ruleMatchesExample(subject, rule, example) === false)
        return `${where} does not match its example ${JSON.stringify(example)} that it must match`;
    }
    for (const example of rule.mustNotMatch ?? []) {
      if (ruleMatchesExample(subject, rule, example) === true)
        return `${where} matches its example ${JSON.stringify(example)} that it must not match`;
    }
  }
  return undefined;
}
