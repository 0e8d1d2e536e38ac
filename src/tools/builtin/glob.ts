/**
 * glob: paths matching a pattern with Bun.Glob's language — `*`, `**`, `?`, `[…]`, `{a,b}` and a leading `!` (negation)
 * — evaluated by picomatch, walked deterministically (sorted, symlinks not followed) and stopped at the cap.
 *
 * - cwd: optional base directory (absolute, ~-prefixed, or relative to the chat working directory); defaults to
 *   the chat working directory, otherwise process.cwd(). The path policy applies to it, and denied entries are
 *   never reported or descended into.
 * - Settings: maxResults (1–5000, default 200), includeDotfiles (default false: `*` and `**` do not match names
 *   starting with "."; a literal `.github` in the pattern still does; a negated pattern never returns an entry with
 *   a segment starting with "." while it is off), absolute (default false).
 * - Matches are files and directories (onlyFiles: false), re-anchored to the chat working directory unless
 *   `absolute` is set. The walk starts at the pattern's static base (`src/` for `src/*.{ts,tsx}`) and prunes
 *   directories the pattern cannot reach.
 *
 * Result: { pattern, cwd, matches, truncated }.
 */
import { join } from "node:path";
import picomatch from "picomatch";
import { argumentRefusal, quote, type ToolRefusal } from "../../core/errors.js";
import {
  PATH_POLICY_DESCRIPTORS,
  pathArgumentsCheck,
  policyRefusal,
  resolveAndValidatePath,
  resultPathMapper,
  walkExclusion,
} from "../../core/path-policy.js";
import { pathSystemError } from "../../core/path-refusals.js";
import { booleanSetting, defineTool, integerSetting } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolContext, ToolParameterDescriptor } from "../../core/types.js";
import { lstatOrUndefined } from "../fs/common.js";
import { compilePattern, globPatternProblem } from "../fs/pattern-args.js";
import { walk } from "../fs/walk.js";

const MAX_RESULTS: ToolParameterDescriptor = {
  name: "maxResults",
  type: "integer",
  description: "Most paths returned by one call; more set truncated.",
  min: 1,
  max: 5000,
  default: 200,
};
const INCLUDE_DOTFILES: ToolParameterDescriptor = {
  name: "includeDotfiles",
  type: "boolean",
  description: "Let * and ** match names starting with a dot.",
  default: false,
};
const ABSOLUTE: ToolParameterDescriptor = {
  name: "absolute",
  type: "boolean",
  description: "Return absolute paths instead of paths relative to the chat working directory.",
  default: false,
};

/** A compiled glob: the full matcher plus what the walker may prune with. */
export interface CompiledGlob {
  /** Tests a `/`-separated path relative to the base directory. */
  matches(rel: string): boolean;
  /** The static directory prefix of the pattern ("" when none), relative to the base directory. */
  base: string;
  /** Whether a directory at `rel` (relative to the base) could contain a match. */
  mayContain(rel: string): boolean;
  /**
   * For patterns that start with a globstar, where a directory whose parent may contain a match may too unless its
   * own name rules it out (hidden, with dotfiles off): that test on the name, cheaper than mayContain on the whole
   * path. Absent otherwise.
   */
  mayContainName?: (name: string) => boolean;
  /**
   * A cheap necessary condition on an entry's name (its last path segment) for `matches`, when the pattern's last
   * segment is literal text and `*` only (`package.json`, `*.ts`, `*a*b*c`): decided in linear time, where the
   * backtracking matcher can take milliseconds on one long name; the walk then skips the full matcher for every
   * other name. Absent otherwise.
   */
  nameFilter?: (name: string) => boolean;
}

/** A path with a segment starting with "." (`.git`, `a/.cache/b`). */
const HIDDEN_SEGMENT = /(?:^|\/)\./;

/** Glob syntax other than `*`. */
const SYNTAX_BUT_STAR = /[?[\]{}()!+@\\|^$,]/;

/**
 * CompiledGlob.nameFilter for a pattern's last segment (literal text and `*` only), or undefined when it is not
 * that simple. A `*` matches any run of characters within the name, so the literal pieces are placed leftmost in
 * order (the first as a prefix, the last as a suffix): linear in the name, and exact. With dotfiles off, a leading
 * `*` does not match a leading ".".
 */
function nameFilterOf(last: string, dot: boolean): ((name: string) => boolean) | undefined {
  if (last === "" || last === "**" || SYNTAX_BUT_STAR.test(last)) return undefined;
  if (!last.includes("*")) return (name) => name === last;
  const pieces = last.split(/\*+/);
  const first = pieces[0]!;
  const final = pieces[pieces.length - 1]!;
  const middle = pieces.slice(1, -1).filter((piece) => piece !== "");
  const fixed = first.length + final.length;
  const hideDot = !dot && first === "";
  return (name) => {
    if (name.length < fixed || !name.startsWith(first) || !name.endsWith(final)) return false;
    if (hideDot && name.startsWith(".")) return false;
    let at = first.length;
    const end = name.length - final.length;
    for (const piece of middle) {
      const found = name.indexOf(piece, at);
      if (found < 0 || found + piece.length > end) return false;
      at = found + piece.length;
    }
    return true;
  };
}

function hasSlashInBraces(pattern: string): boolean {
  let depth = 0;
  for (const ch of pattern) {
    if (ch === "{") depth++;
    else if (ch === "}") depth = Math.max(0, depth - 1);
    else if (ch === "/" && depth > 0) return true;
  }
  return false;
}

/**
 * The checks of a glob pattern's text that come before compiling it, as a returned refusal (undefined when it
 * passes): not empty, relative and not climbing with "..", and what checkGlobPattern refuses.
 */
export function globPatternRefusal(pattern: string): ToolRefusal | undefined {
  if (pattern.trim() === "")
    return argumentRefusal('Invalid argument "pattern": must not be empty.', {
      argument: "pattern",
      rule: "non_empty",
    });
  const negated = pattern.startsWith("!") && !pattern.startsWith("!(");
  const body = negated ? pattern.slice(1) : pattern;
  if (body.startsWith("/") || /(^|\/)\.\.(\/|$)/.test(body)) {
    return argumentRefusal(
      `Invalid argument "pattern": ${quote(pattern)} is absolute or climbs with "..". Pass the directory as "cwd" and a relative pattern.`,
      { argument: "pattern", rule: "relative_pattern" },
    );
  }
  return globPatternProblem(pattern, "pattern");
}

/**
 * Compiles a Bun.Glob-style pattern. Throws ToolArgumentError for an empty pattern, an absolute one or one that
 * climbs out with `..` (pass such a directory as cwd instead), and for the text checkGlobPattern refuses (too long,
 * NUL, lone surrogate, trailing "/", empty or over-long names).
 */
export function compileGlob(pattern: string, options: { dot: boolean }): CompiledGlob {
  const refusal = globPatternRefusal(pattern);
  if (refusal) throw refusal.toError();
  const negated = pattern.startsWith("!") && !pattern.startsWith("!(");
  const body = negated ? pattern.slice(1) : pattern;
  const clean = body.replace(/^(\.\/)+/, "");
  const full = compilePattern(clean, { dot: options.dot }, "pattern");
  if (negated) {
    // Negation inverts the pattern, not the dotfile rule: with dotfiles off, an entry with a segment starting
    // with "." (`.env`, `.toolhost/toolhost.db`) stays out, and dot directories are not walked.
    const visible = (rel: string) => options.dot || !rel.split("/").some((part) => part.startsWith("."));
    return { matches: (rel) => visible(rel) && !full(rel), base: "", mayContain: visible };
  }
  const matches = (rel: string) => full(rel);
  if (hasSlashInBraces(clean)) return { matches, base: "", mayContain: () => true };
  const segments = clean.split("/");
  const globstarAt = segments.indexOf("**");
  const segmentMatchers = segments.map((s) => (s === "**" ? null : compilePattern(s, { dot: options.dot }, "pattern")));
  const scan = picomatch.scan(clean);
  const base = scan.isGlob ? scan.base : segments.slice(0, -1).join("/");
  const literalDotAfterGlobstar = globstarAt >= 0 && segments.slice(globstarAt + 1).some((s) => s.startsWith("."));
  const nameFilter = nameFilterOf(segments[segments.length - 1]!, options.dot);
  if (globstarAt === 0) {
    // `**/…`: any directory may hold a match, except hidden ones (at any depth) while dotfiles are off.
    const any = options.dot || literalDotAfterGlobstar;
    return {
      matches,
      base,
      mayContain: (rel) => any || !HIDDEN_SEGMENT.test(rel),
      mayContainName: (name) => any || !name.startsWith("."),
      nameFilter,
    };
  }
  const mayContain = (rel: string): boolean => {
    const parts = rel.split("/");
    for (let i = 0; i < parts.length; i++) {
      if (globstarAt >= 0 && i >= globstarAt) {
        // Past a globstar: anything may follow, except hidden directories when dotfiles are off.
        return options.dot || literalDotAfterGlobstar || !parts.slice(i).some((p) => p.startsWith("."));
      }
      // A directory at depth i must match segment i and leave at least one segment for its contents.
      if (i >= segments.length - 1) return false;
      if (!segmentMatchers[i]!(parts[i]!)) return false;
    }
    return true;
  };
  return { matches, base, mayContain, nameFilter };
}

/** Most compiled patterns kept by compileGlobCached (a model repeats its patterns; compiling costs ~50 µs). */
const COMPILED_CACHE_SIZE = 64;
const compiledCache = new Map<string, CompiledGlob>();

/**
 * compileGlob with the last COMPILED_CACHE_SIZE successfully compiled patterns kept (a CompiledGlob is immutable and
 * its matchers hold no state). A refused pattern is never cached: it throws the same ToolArgumentError every call.
 */
export function compileGlobCached(pattern: string, options: { dot: boolean }): CompiledGlob {
  const key = `${options.dot ? "1" : "0"}${pattern}`;
  const hit = compiledCache.get(key);
  if (hit) {
    // Most recently used last, so the eviction below drops the least recently used.
    compiledCache.delete(key);
    compiledCache.set(key, hit);
    return hit;
  }
  const compiled = compileGlob(pattern, options);
  if (compiledCache.size >= COMPILED_CACHE_SIZE) compiledCache.delete(compiledCache.keys().next().value!);
  compiledCache.set(key, compiled);
  return compiled;
}

const checkCwd = pathArgumentsCheck("cwd");

/** Result of glob. */
export interface GlobResult {
  pattern: string;
  /** The base directory as resolved (an echoed input). */
  cwd: string;
  matches: string[];
  truncated: boolean;
}

/** Executes glob on parsed arguments. */
export async function runGlob(args: { pattern: string; cwd?: string }, context: ToolContext): Promise<GlobResult> {
  const params = context.settings.values;
  const maxResults = integerSetting(params, MAX_RESULTS);
  const dot = booleanSetting(params, INCLUDE_DOTFILES);
  const absolute = booleanSetting(params, ABSOLUTE);
  // The pattern is checked before the directory is looked at; without a cwd argument the directory is named "."
  // in any refusal (the working directory, or the process's own directory, which the caller did not name).
  const glob = compileGlobCached(args.pattern, { dot });
  const {
    absolute: baseAbs,
    real: baseReal,
    policy,
  } = await resolveAndValidatePath(args.cwd ?? ".", context, {
    mustExist: true,
    kind: "directory",
    argument: "cwd",
  });
  const matches: string[] = [];
  let truncated = false;
  const resultPath = resultPathMapper(baseAbs, context);
  const report = (rel: string) => {
    matches.push(absolute ? join(baseAbs, rel) : resultPath(rel));
  };

  const excluded = walkExclusion(policy, baseAbs, baseReal);
  const done = () => ({ pattern: args.pattern, cwd: baseAbs, matches, truncated });
  // Start at the pattern's static base when it exists (a literal file pattern is a single lookup). The base must be
  // what the walk from the directory would reach: a base that is denied or protected (or lies beneath such a path)
  // is neither reported nor read, and one reached through a symbolic link holds nothing (the walk never enters a
  // link, which may point outside the allowed directories or at a denied one).
  let startRel = "";
  if (glob.base) {
    if (excluded(glob.base)) return done();
    const lstatBase = (rel: string) =>
      lstatOrUndefined(join(baseReal, rel)).catch((error: unknown) => {
        throw pathSystemError(error, glob.base, "pattern");
      });
    // The whole base first: the kernel's answer classifies a base it cannot resolve (a link loop, too long).
    const info = await lstatBase(glob.base);
    if (!info) return done();
    const names = glob.base.split("/");
    for (let i = 1; i < names.length; i++) {
      const parent = await lstatBase(names.slice(0, i).join("/"));
      if (!parent?.isDirectory()) return done();
    }
    if (!info.isDirectory()) {
      if (glob.matches(glob.base) && !policyRefusal(policy, join(baseAbs, glob.base), join(baseReal, glob.base))) {
        report(glob.base);
      }
      return done();
    }
    startRel = glob.base;
    if (glob.matches(startRel)) report(startRel);
  }
  const { nameFilter } = glob;
  // Below the directory itself, the name test stands for mayContain (every directory the walk enters passed it).
  const byName = startRel === "" ? glob.mayContainName : undefined;
  const mayEnter = (rel: string, name: string) => (byName ? byName(name) : glob.mayContain(rel));
  await walk({
    root: startRel ? join(baseReal, startRel) : baseReal,
    signal: context.signal,
    keep: nameFilter ? (dirent) => dirent.isDirectory() || nameFilter(dirent.name) : undefined,
    descend: (rel, name) => {
      const full = startRel ? `${startRel}/${rel}` : rel;
      return !excluded(full) && mayEnter(full, name);
    },
    visit(entry) {
      const isDirectory = entry.dirent.isDirectory();
      // A file whose name fails the name filter can be neither reported nor descended into.
      if (!isDirectory && nameFilter && !nameFilter(entry.name)) return undefined;
      const rel = startRel ? `${startRel}/${entry.rel}` : entry.rel;
      if (excluded(rel)) return "skip";
      if ((!nameFilter || nameFilter(entry.name)) && glob.matches(rel)) {
        if (matches.length >= maxResults) {
          truncated = true;
          return "stop";
        }
        report(rel);
      }
      if (isDirectory && !mayEnter(rel, entry.name)) return "skip";
      return undefined;
    },
  });
  return { pattern: args.pattern, cwd: baseAbs, matches, truncated };
}

export const globTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["cwd"] } },
  definition: {
    name: "glob",
    description:
      'Finds files and directories whose path matches a glob pattern (*, **, ?, [abc], {a,b}, leading ! to negate), relative to cwd. Returns paths you can pass to read_file. Example: "src/**/*.{ts,tsx}".',
    parameters: {
      type: "object",
      properties: {
        pattern: {
          type: "string",
          description: 'Glob pattern relative to cwd, e.g. "**/*.md" or ".github/workflows/*.yml".',
        },
        cwd: {
          type: "string",
          description:
            "Base directory: absolute, ~-prefixed, or relative to the working directory. Default: the working directory.",
        },
      },
      required: ["pattern"],
    },
  },
  settings: {
    title: "Glob",
    description: "Lets the model find files by name pattern within the allowed directories.",
    category: "system",
    annotations: { readOnlyHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS, MAX_RESULTS, INCLUDE_DOTFILES, ABSOLUTE],
  },
  // The cwd's text, then the pattern's (compiling it, which depends on a setting, is left to the call).
  validateArguments: (args) => checkCwd(args) ?? globPatternRefusal(args.pattern as string),
  execute: (args, context) => runGlob(args as { pattern: string; cwd?: string }, context),
});
