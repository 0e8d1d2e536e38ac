/**
 * Checks of the glob patterns the file tools take as arguments (glob's `pattern`, grep's `glob`), before anything
 * is compiled or walked: a bad pattern is a `validation_failed` that quotes at most ~100 characters of it and says
 * what to send, never an engine's exception.
 */
import picomatch from "picomatch";
import { argumentRefusal, clip, quote, ToolArgumentError, type ToolRefusal } from "../../core/errors.js";
import { hasLoneSurrogate } from "../../core/json-limits.js";
import { MAX_NAME_BYTES } from "../../core/path-refusals.js";

/** Longest glob pattern accepted, in UTF-16 code units (the matcher's own ceiling is 64 KiB). */
export const MAX_GLOB_PATTERN_CHARS = 16 * 1024;

/** Most `*` wildcards (runs of stars) in one name of a pattern: a backtracking matcher is polynomial in their number. */
export const MAX_STARS_PER_NAME = 3;

/** An extended glob group: `+(`, `*(`, `?(`, `@(`, `!(` not escaped by a backslash. */
const EXTGLOB = /(^|[^\\])[+*?@!]\(/;

/**
 * Checks a glob pattern's text: at most MAX_GLOB_PATTERN_CHARS characters, no NUL byte, well-formed Unicode,
 * something after a leading "!", no trailing "/" and no empty name between two "/", and no literal name (one
 * without wildcards) longer than MAX_NAME_BYTES bytes, which no file can have. Empty patterns are the caller's
 * rule (glob refuses them, grep's `glob` treats them as absent). Also refused, because a backtracking matcher can take
 * exponential time on them (a pattern such as `*a*a*a*a*b` held the event loop for seconds on one long name):
 * extended glob groups (`+(…)`, `*(…)`, `?(…)`, `@(…)`, `!(…)`) and more than MAX_STARS_PER_NAME `*` in one name.
 * Throws ToolArgumentError (validation_failed) whose `details.rule` is pattern_too_long | nul_byte | invalid_unicode
 * | empty_negation | trailing_slash | extglob | empty_name | too_many_wildcards | name_too_long.
 */
export function checkGlobPattern(pattern: string, argument: string): void {
  const problem = globPatternProblem(pattern, argument);
  if (problem) throw problem.toError();
}

/** {@link checkGlobPattern} without the throw: the refusal it would throw (as data), or undefined. */
export function globPatternProblem(pattern: string, argument: string): ToolRefusal | undefined {
  const fail = (why: string, rule: string, extra: Record<string, unknown> = {}): ToolRefusal =>
    argumentRefusal(`Invalid argument "${argument}": ${why}`, { argument, rule, ...extra });
  if (pattern.length > MAX_GLOB_PATTERN_CHARS) {
    return fail(
      `the pattern is ${pattern.length} characters long; a glob pattern is at most ${MAX_GLOB_PATTERN_CHARS} characters. Send a shorter pattern (or several calls).`,
      "pattern_too_long",
      { length: pattern.length, max: MAX_GLOB_PATTERN_CHARS },
    );
  }
  if (pattern.includes("\0")) return fail("a glob pattern must not contain a NUL byte.", "nul_byte");
  if (hasLoneSurrogate(pattern)) {
    return fail(
      "it contains a lone UTF-16 surrogate (half of a character), which no file name can hold; send the pattern as valid Unicode text.",
      "invalid_unicode",
    );
  }
  const negated = pattern.startsWith("!") && !pattern.startsWith("!(");
  const body = negated ? pattern.slice(1) : pattern;
  if (negated && body.trim() === "") {
    return fail(
      'nothing follows the leading "!"; send "!<pattern>" (e.g. "!*.test.ts") to exclude what a pattern matches.',
      "empty_negation",
    );
  }
  if (body.endsWith("/")) {
    return fail(
      `${quote(pattern)} ends with "/"; patterns match paths without a trailing slash. Send "${clip(body.replace(/\/+$/, ""), 60)}" for the directory itself, or "${clip(body.replace(/\/+$/, ""), 60)}/**" for everything under it.`,
      "trailing_slash",
    );
  }
  if (EXTGLOB.test(pattern)) {
    return fail(
      `${quote(pattern)} uses an extended glob group such as +(…), *(…), ?(…), @(…) or !(…), which this tool does not support (such groups can take exponential time to match). Use {a,b} alternatives, and write a literal parenthesis as [(].`,
      "extglob",
    );
  }
  const names = body.replace(/^(\.\/)+/, "").split("/");
  for (const name of names) {
    const wildcards = name === "**" ? 0 : (name.match(/\*+/g) ?? []).length;
    if (wildcards > MAX_STARS_PER_NAME) {
      return fail(
        `the name ${quote(name, 60)} in the pattern has ${wildcards} "*" wildcards; at most ${MAX_STARS_PER_NAME} per name are accepted (more can take exponential time to match a long name). Use fewer wildcards, or "**" for any depth.`,
        "too_many_wildcards",
        { wildcards, max: MAX_STARS_PER_NAME },
      );
    }
  }
  if (names.slice(0, -1).some((name) => name === "")) {
    return fail(`${quote(pattern)} has an empty name between two "/"; write a single "/" between names.`, "empty_name");
  }
  for (const name of names) {
    const bytes = Buffer.byteLength(name, "utf8");
    if (bytes > MAX_NAME_BYTES && !picomatch.scan(name).isGlob) {
      return fail(
        `the name "${clip(name, 60)}" in the pattern is ${bytes} bytes long; a file or directory name is at most ${MAX_NAME_BYTES} bytes, so it can match nothing. Send a shorter name or a wildcard.`,
        "name_too_long",
        { bytes, max: MAX_NAME_BYTES },
      );
    }
  }
  return undefined;
}

/**
 * picomatch(pattern, options) with extended glob groups off (they are not part of the language; see
 * checkGlobPattern), with an exception it throws for an unusual pattern turned into a ToolArgumentError
 * (validation_failed, rule invalid_glob) naming the argument.
 */
export function compilePattern(
  pattern: string,
  options: picomatch.PicomatchOptions,
  argument: string,
): picomatch.Matcher {
  try {
    return picomatch(pattern, { ...options, noextglob: true });
  } catch (error) {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": ${quote(pattern)} is not a glob pattern this tool can compile (${clip((error as Error).message)}). Use *, **, ?, [abc] and {a,b}.`,
      { argument, rule: "invalid_glob" },
    );
  }
}
