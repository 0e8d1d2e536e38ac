/**
 * grep: lines matching a JavaScript regular expression in a file or a directory tree.
 *
 * Semantics (both engines):
 * - The pattern is compiled with `new RegExp(pattern, caseInsensitive ? "i" : "")`; an invalid one is a
 *   GrepPatternError (validation_failed). V8 compiles some patterns (alternations of repeated groups) in time that
 *   grows exponentially with their length, so only short patterns are compiled on the event loop; a longer one is
 *   compiled first in a throwaway worker with a deadline (regex-compile-check.ts), and one that misses it is
 *   refused as too costly. Patterns over MAX_REGEX_CHARS are refused before any parsing.
 * - Lines split on LF with one trailing CR removed (`^foo$` matches `foo\r\n`); BOM-marked UTF-8/UTF-16 decoded,
 *   invalid UTF-8 read as U+FFFD (text-probe.ts).
 * - A file with a NUL byte in its first 8 KiB is binary and skipped (the probe shared with read_file); in a
 *   directory search a file above maxFileSizeBytes is skipped, while a file named by `path` (a spill, a log) is
 *   searched up to that setting's ceiling (100 MiB).
 * - Directory searches skip `.git`, names starting with "." (unless includeDotfiles), files ignored by
 *   `.gitignore` files inside the searched directory (unless respectGitignore is false), symbolic links (never
 *   followed), and entries covered by deniedPaths. `glob` filters files: without "/" it matches the file name at
 *   any depth (`*.ts`), with "/" the path relative to the searched directory (`src/**\/*.ts`); a leading "!"
 *   excludes.
 * - At most maxMatchesPerFile matches per file and maxResults in all, sorted by file then line; `truncated` says
 *   a cap cut the result. A matched line longer than 500 characters is cut around the match with markers.
 * - matches[].file is relative to the chat working directory (absolute when none is bound or outside it).
 *
 * Engines: ripgrep (@vscode/ripgrep) walks and scans when the pattern translates to a Rust regex matching a
 * superset of the JS pattern's lines (regex-translate.ts); unless the translation is exact, every line it reports
 * is re-tested with the JS RegExp, so results are exactly the JS semantics (ripgrep-engine.ts says how binary files
 * are told apart). Otherwise, or without a ripgrep binary, a JS engine with the same rules
 * runs. The result says which engine ran, how many files were searched, which were skipped and why.
 *
 * The engines live in tools/fs/grep/ (common.ts, js-engine.ts, ripgrep-engine.ts); this file holds the tool.
 */
import { argumentRefusal, quote, ToolArgumentError, type ToolRefusal } from "../../core/errors.js";
import { linkedDeniedFiles } from "../../core/path-aliases.js";
import {
  hasExclusionsWithin,
  PATH_POLICY_DESCRIPTORS,
  pathArgumentsCheck,
  resolveAndValidatePath,
  resultPathMapper,
  walkExclusion,
} from "../../core/path-policy.js";
import { pathSystemError } from "../../core/path-refusals.js";
import { booleanSetting, defineTool, integerSetting, stringSetting } from "../../core/settings-declaration.js";
import type { RegisteredTool, SpillReader, ToolContext, ToolParameterDescriptor } from "../../core/types.js";
import type { EngineOutcome, GrepPlan, GrepResult } from "../fs/grep/common.js";
import { searchWithJs } from "../fs/grep/js-engine.js";
import { RipgrepUnusable, ripgrepPath, searchWithRipgrep } from "../fs/grep/ripgrep-engine.js";
import { compilePattern, globPatternProblem } from "../fs/pattern-args.js";
import { compileRegexOffThread } from "../fs/regex-compile-check.js";
import { translateJsRegex } from "../fs/regex-translate.js";

export { type GrepMatch, type GrepPlan, type GrepResult, MAX_MATCH_LINE_CHARS } from "../fs/grep/common.js";
export { searchWithJs } from "../fs/grep/js-engine.js";
export { ripgrepPath, searchWithRipgrep } from "../fs/grep/ripgrep-engine.js";

/** Longest pattern grep accepts (characters); a longer one is refused as too large before it is parsed. */
export const MAX_REGEX_CHARS = 32_768;

/**
 * Longest pattern compiled on the event loop (characters). The worst patterns measured at this length compile in
 * well under a millisecond; the fast path keeps a worker start (~10 ms) off ordinary calls.
 */
const MAIN_THREAD_COMPILE_CHARS = 256;

/** How long a longer pattern may take to compile in its throwaway worker before it is refused (milliseconds). */
const COMPILE_DEADLINE_MS = 2_000;

/** Why a pattern was refused: `details.rule` of a GrepPatternError. */
export type GrepPatternRule = "invalid_regex" | "regex_too_large" | "regex_too_costly";

/**
 * An invalid grep pattern (code validation_failed): the message quotes at most ~100 characters of the pattern and
 * carries the RegExp engine's reason (without the engine's own copy of the pattern). `details.rule` is
 * "regex_too_large" when the pattern is over MAX_REGEX_CHARS or the engine cannot compile a pattern that large,
 * "regex_too_costly" when compiling it missed its deadline, else "invalid_regex".
 */
export class GrepPatternError extends ToolArgumentError {
  constructor(pattern: string, reason: string, rule?: GrepPatternRule) {
    const { message, details } = grepPatternRefusal(pattern, reason, rule);
    super(message, details);
  }
}

/** What a GrepPatternError says, as data (see ToolRefusal). */
function grepPatternRefusal(pattern: string, reason: string, rule?: GrepPatternRule): ToolRefusal {
  const kind: GrepPatternRule = rule ?? (/too large/i.test(reason) ? "regex_too_large" : "invalid_regex");
  const start = `the regular expression (${pattern.length} characters, starting ${quote(pattern, 60)})`;
  return argumentRefusal(
    kind === "regex_too_large"
      ? `Invalid argument "pattern": ${start} is too large for the engine to compile. Send a shorter pattern, or search for a distinctive part of it.`
      : kind === "regex_too_costly"
        ? `Invalid argument "pattern": ${start} takes too long to compile (over ${COMPILE_DEADLINE_MS / 1000} s). Send a shorter pattern with fewer alternatives inside repeated groups, or search for a distinctive part of it.`
        : `Invalid regular expression ${quote(pattern)}: ${reason}. grep takes a JavaScript regular expression; escape special characters such as ( [ { . * + ? with a backslash to match them literally.`,
    { argument: "pattern", rule: kind },
  );
}

/**
 * The reason of a RegExp SyntaxError without the engine's copy of the pattern: V8 writes
 * "Invalid regular expression: /<pattern>/<flags>: <reason>", and reasons contain no ": ".
 */
function regexReason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const at = message.lastIndexOf(": ");
  return at >= 0 ? message.slice(at + 2) : message.replace(/^Invalid regular expression: /, "");
}

const D = {
  maxResults: {
    name: "maxResults",
    type: "integer",
    description: "Most matches returned by one call.",
    min: 1,
    max: 5000,
    default: 100,
  },
  maxMatchesPerFile: {
    name: "maxMatchesPerFile",
    type: "integer",
    description: "Most matches returned from one file.",
    min: 1,
    max: 5000,
    default: 20,
  },
  maxFileSizeBytes: {
    name: "maxFileSizeBytes",
    type: "integer",
    description:
      "Files larger than this are skipped when a directory is searched; a file named by path is searched up to 100 MiB.",
    min: 1,
    max: 100 * 1024 * 1024,
    default: 1_000_000,
    unit: "bytes",
  },
  includeDotfiles: {
    name: "includeDotfiles",
    type: "boolean",
    description: "Search files and directories whose names start with a dot (.git is never searched).",
    default: false,
  },
  respectGitignore: {
    name: "respectGitignore",
    type: "boolean",
    description: "Skip files ignored by .gitignore files inside the searched directory.",
    default: true,
  },
  engine: {
    name: "engine",
    type: "string",
    description:
      'Search engine: "auto" (ripgrep where it can express the pattern exactly, else JS), "ripgrep" or "js".',
    allowedValues: ["auto", "ripgrep", "js"],
    default: "auto",
  },
} satisfies Record<string, ToolParameterDescriptor>;

/**
 * The checks of grep's arguments that need no filesystem and no worker, as a returned refusal (undefined when they
 * pass): the pattern's length, and that it compiles (patterns of at most MAIN_THREAD_COMPILE_CHARS; a longer one is
 * compiled off the event loop when the call runs), then the text of the `glob` filter.
 */
export function grepArgumentsRefusal(args: {
  pattern: string;
  glob?: string;
  caseInsensitive?: boolean;
}): ToolRefusal | undefined {
  const { pattern } = args;
  if (pattern.length > MAX_REGEX_CHARS) {
    return grepPatternRefusal(pattern, `longer than ${MAX_REGEX_CHARS} characters`, "regex_too_large");
  }
  // Only the engine's reason is used from its SyntaxError: no stack trace is captured for it.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    const regex = new RegExp(pattern, args.caseInsensitive === true ? "i" : "");
    if (pattern.length <= MAIN_THREAD_COMPILE_CHARS) regex.test("");
  } catch (error) {
    return grepPatternRefusal(pattern, regexReason(error));
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
  if (typeof args.glob !== "string") return undefined;
  if (args.glob.trim() === "") {
    return argumentRefusal(
      'Invalid argument "glob": it is blank, so it filters nothing; leave "glob" out to search every file, or send a pattern such as "*.ts".',
      { argument: "glob", rule: "non_empty" },
    );
  }
  return globPatternProblem(args.glob, "glob");
}

const checkPath = pathArgumentsCheck("path");

/** Compiles the pattern (GrepPatternError when invalid) and resolves the path under the policy. */
export async function planGrep(
  args: { pattern: string; path: string; glob?: string; caseInsensitive?: boolean },
  context: ToolContext,
): Promise<GrepPlan> {
  const ignoreCase = args.caseInsensitive === true;
  const flags = ignoreCase ? "i" : "";
  // The same checks as argument validation (the runtime ran them already; a direct caller gets them here).
  const refusal = grepArgumentsRefusal(args);
  if (refusal) throw refusal.toError();
  const regex = new RegExp(args.pattern, flags);
  if (args.pattern.length > MAIN_THREAD_COMPILE_CHARS) {
    const check = await compileRegexOffThread(args.pattern, flags, COMPILE_DEADLINE_MS, context.signal);
    if (check.kind === "timeout") throw new GrepPatternError(args.pattern, "too costly", "regex_too_costly");
    if (check.kind === "error") throw new GrepPatternError(args.pattern, regexReason(check.message));
  }
  if (typeof args.glob === "string") {
    const negated = args.glob.startsWith("!");
    compilePattern((negated ? args.glob.slice(1) : args.glob).replace(/^\.\//, ""), { dot: true }, "glob");
  }
  const { absolute, real, policy } = await resolveAndValidatePath(args.path, context, {
    mustExist: true,
    purpose: "read",
  });
  const { stat } = await import("node:fs/promises");
  const info = await stat(real).catch((error: unknown) => {
    throw pathSystemError(error, args.path);
  });
  const params = context.settings.values;
  const isFile = !info.isDirectory();
  if (isFile && typeof args.glob === "string") {
    throw new ToolArgumentError(
      `Invalid argument "glob": it filters the files of a directory search, and ${quote(args.path)} is a file. Leave "glob" out to search the file, or give its directory as "path".`,
      { argument: "glob", rule: "glob_with_file" },
    );
  }
  return {
    pattern: args.pattern,
    regex,
    ignoreCase,
    rootAbs: absolute,
    rootReal: real,
    isFile,
    glob: args.glob,
    maxResults: integerSetting(params, D.maxResults),
    maxPerFile: integerSetting(params, D.maxMatchesPerFile),
    // maxFileSizeBytes keeps a walk out of huge files; a file the caller names (a spill, a log) is what they want
    // searched, up to the setting's ceiling.
    maxFileSize: isFile ? (D.maxFileSizeBytes.max as number) : integerSetting(params, D.maxFileSizeBytes),
    dot: booleanSetting(params, D.includeDotfiles),
    gitignore: booleanSetting(params, D.respectGitignore),
    policy,
    excluded: walkExclusion(policy, absolute, real),
    deniedFiles: [...linkedDeniedFiles(policy.denied)],
    signal: context.signal,
  };
}

/** Executes grep on parsed arguments. */
export async function runGrep(
  args: { pattern: string; path: string; glob?: string; caseInsensitive?: boolean },
  context: ToolContext,
): Promise<GrepResult> {
  const plan = await planGrep(args, context);
  const choice = stringSetting(context.settings.values, D.engine);
  let engine: GrepResult["engine"] = "js";
  let outcome: EngineOutcome | undefined;
  // ripgrep would read denied and protected files (and reveal them through its binary-skip counts) before their
  // matches could be dropped, so any such path inside the search root sends the search to the JS engine. A denied
  // file with another name (a hard link) is told by what ripgrep reports: each such file is checked by its identity
  // and counted as denied (both engines).
  const rg =
    choice === "js" || plan.isFile || hasExclusionsWithin(plan.policy, plan.rootAbs, plan.rootReal)
      ? null
      : ripgrepPath();
  const translated = rg ? translateJsRegex(plan.pattern, plan.ignoreCase) : null;
  if (rg && translated !== null) {
    try {
      outcome = await searchWithRipgrep(plan, rg, translated.rust, translated.exact, translated.nulFree);
      engine = "ripgrep";
    } catch (error) {
      if (!(error instanceof RipgrepUnusable)) throw error;
      context.logger.debug({ err: error.message }, "ripgrep is unusable for this search; using the JS engine");
    }
  }
  outcome ??= await searchWithJs(plan);
  const resultPath = resultPathMapper(plan.rootAbs, context);
  const matches = outcome.matches.map((m) => ({
    file: resultPath(m.rel),
    line: m.line,
    text: m.text,
  }));
  const notes: string[] = [];
  if (!plan.isFile) {
    notes.push(".git directories and symbolic links are not searched.");
    if (!plan.dot) notes.push('Names starting with "." were not searched (setting includeDotfiles).');
    if (plan.gitignore) notes.push("Files ignored by .gitignore were not searched (setting respectGitignore).");
    if (plan.glob) notes.push(`Only files matching the glob ${quote(plan.glob)} were searched.`);
  }
  const s = outcome.skipped;
  if (s.tooLarge === null)
    notes.push(`Files larger than maxFileSizeBytes (${plan.maxFileSize} bytes) are skipped (not counted by ripgrep).`);
  else if (s.tooLarge > 0) {
    notes.push(`${s.tooLarge} file(s) larger than maxFileSizeBytes (${plan.maxFileSize} bytes) were skipped.`);
  }
  if (s.binary > 0) notes.push(`${s.binary} binary file(s) (NUL in the first 8 KiB) were skipped.`);
  if (s.denied > 0) notes.push(`${s.denied} path(s) covered by deniedPaths were skipped.`);
  if (s.unreadable > 0) notes.push(`${s.unreadable} file(s) could not be read.`);
  if (outcome.truncated) {
    notes.push(
      `Results were cut by maxResults (${plan.maxResults}) or maxMatchesPerFile (${plan.maxPerFile}); narrow the pattern, path or glob to see the rest.`,
    );
  }
  return {
    pattern: args.pattern,
    path: args.path,
    matches,
    truncated: outcome.truncated,
    engine,
    filesSearched: outcome.filesSearched,
    filesWithMatches: outcome.filesWithMatches,
    skipped: outcome.skipped,
    notes,
  };
}

/** grep searches a spill file of any size (after read_file, which shows its lines in order). */
const grepSpillReader: SpillReader = {
  tool: "grep",
  rank: 2,
  howToRead: ({ path }) => ({
    readable: true,
    text: `Search the full output with grep {"pattern": "…", "path": ${JSON.stringify(path)}}.`,
  }),
};

export const grepTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "grep",
    description:
      "Searches a file, or every text file under a directory, for lines matching a JavaScript regular expression. Returns { file, line, text } matches sorted by file and line; file paths can be passed to read_file. Skips .git, dotfiles, .gitignored, binary and large files (the result says what it skipped).",
    parameters: {
      type: "object",
      properties: {
        pattern: { type: "string", description: 'JavaScript regular expression, e.g. "function\\\\s+main\\\\(".' },
        path: {
          type: "string",
          description: "File or directory to search: absolute, ~-prefixed, or relative to the working directory.",
        },
        glob: {
          type: "string",
          description:
            'File filter for directory searches: "*.ts" matches names at any depth, "src/**/*.ts" paths; "!" excludes.',
        },
        caseInsensitive: { type: "boolean", description: "Match case-insensitively. Default false." },
      },
      required: ["pattern", "path"],
    },
  },
  settings: {
    title: "Grep",
    description: "Lets the model search file contents with regular expressions within the allowed directories.",
    category: "system",
    annotations: { readOnlyHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS, ...Object.values(D)],
  },
  spillReader: grepSpillReader,
  // The path's text, then the pattern's and the glob's (planGrep checks them again for its direct callers).
  validateArguments: (args) =>
    checkPath(args) ?? grepArgumentsRefusal(args as { pattern: string; glob?: string; caseInsensitive?: boolean }),
  execute: (args, context) =>
    runGrep(args as { pattern: string; path: string; glob?: string; caseInsensitive?: boolean }, context),
});
