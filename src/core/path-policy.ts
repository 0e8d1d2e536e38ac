/**
 * The shared path policy of every path-taking tool: the path convention and resolveAndValidatePath.
 *
 * Rules:
 * - A model-supplied path is absolute, `~`-prefixed, or relative to the chat working directory (none bound: the
 *   process working directory). It is normalized lexically first (`..` and `.` removed), so the kernel never sees
 *   a `..` after a symlink.
 * - Restriction is on by default (`restrictPaths: true`). With no `allowedPaths`, the one allowed root is the
 *   chat working directory (none bound: `process.cwd()`). `allowedPaths` replaces that root with its own list.
 * - `deniedPaths` always apply (even with restriction off) and win over `allowedPaths`.
 * - Containment is decided on the real path after symlinks resolve, compared segment-wise (`/t/proj` never admits
 *   `/t/proj-secrets`). A path that does not exist yet is decided on its nearest existing ancestor; a dangling
 *   link is followed as a path (never created through), so a dangling link inside pointing outside is refused.
 * - A refusal is an AccessDeniedError naming the input path and the rule, never what lies outside.
 */
import { realpathSync, type Stats, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { argumentRefusal, clip, NotFoundError, ToolArgumentError, type ToolRefusal } from "./errors.js";
import { hasLoneSurrogate } from "./json-limits.js";
import { isSpillName, spillIdOfFileName } from "./output-spill.js";
import { isDeniedFileAlias } from "./path-aliases.js";
import {
  accessDenied,
  gitDirectoryRefusal,
  MAX_NAME_BYTES,
  MAX_PATH_BYTES,
  pathSystemError,
  spillWriteRefusal,
} from "./path-refusals.js";
import {
  expandPath,
  isOwnProcessEntry,
  type LooseReal,
  lexicalRootForms,
  OWN_PROCESS_ROOTS,
  ownedRealPath,
  protectedRootForms,
  realNow,
  realpathLoose,
  rootForms,
} from "./path-resolve.js";
import { booleanSetting, defaultParametersOf, stringListSetting } from "./settings-declaration.js";

import type { ToolContext, ToolParameterDescriptor } from "./types.js";

export { expandPath };

/**
 * The `validate` rule of allowedPaths / deniedPaths: every entry is a non-empty absolute or `~`-prefixed path
 * (`~` or `~/…`) without a NUL byte. Returns the broken rule, or undefined when the list is fine.
 */
export function invalidPathEntries(value: unknown): string | undefined {
  if (!Array.isArray(value)) return undefined;
  for (const entry of value) {
    if (typeof entry !== "string" || entry.trim() === "") return "entries must not be empty";
    if (entry.includes("\0")) return "entries must not contain a NUL byte";
    if (!(entry === "~" || entry.startsWith("~/") || isAbsolute(entry))) {
      return `entries must be absolute or ~-prefixed paths (got ${JSON.stringify(entry)})`;
    }
  }
  return undefined;
}

/** allowedPaths: directories the tool may touch (admin only). */
export const ALLOWED_PATHS_DESCRIPTOR: ToolParameterDescriptor = {
  name: "allowedPaths",
  type: "string[]",
  description:
    "Directories the tool may touch (absolute or ~-prefixed). Empty: only the chat working directory (or the process working directory when none is bound).",
  default: [],
  max: 100,
  adminOnly: true,
  validate: invalidPathEntries,
};

/** deniedPaths: files or directories the tool must never touch. */
export const DENIED_PATHS_DESCRIPTOR: ToolParameterDescriptor = {
  name: "deniedPaths",
  type: "string[]",
  description:
    "Files or directories the tool must never touch (absolute or ~-prefixed), even inside an allowed directory. Deny wins.",
  default: [],
  max: 100,
  validate: invalidPathEntries,
};

/** restrictPaths: confine the tool to the allowed directories (admin only). */
export const RESTRICT_PATHS_DESCRIPTOR: ToolParameterDescriptor = {
  name: "restrictPaths",
  type: "boolean",
  description: "Confine the tool to the allowed directories. Off: any path the process can reach, except deniedPaths.",
  default: true,
  adminOnly: true,
};

/** Settings descriptors every path-taking tool includes: allowedPaths, deniedPaths, restrictPaths. */
export const PATH_POLICY_DESCRIPTORS: readonly ToolParameterDescriptor[] = [
  ALLOWED_PATHS_DESCRIPTOR,
  DENIED_PATHS_DESCRIPTOR,
  RESTRICT_PATHS_DESCRIPTOR,
];

/** Default values of the path-policy settings (derived from PATH_POLICY_DESCRIPTORS). */
export const PATH_POLICY_DEFAULTS = defaultParametersOf(PATH_POLICY_DESCRIPTORS) as {
  allowedPaths: string[];
  deniedPaths: string[];
  restrictPaths: boolean;
};

/**
 * True when `child` equals `root` or lies beneath it, compared on whole path segments after lexical
 * normalization (`/a/proj` contains `/a/proj/x` but not `/a/proj2`, `/a/proj-old` or `/a`). Both must be absolute;
 * anything else (empty, relative, non-string, NUL-bearing) is false.
 */
export function isPathInside(child: string, root: string): boolean {
  if (typeof child !== "string" || typeof root !== "string") return false;
  if (!child || !root || child.includes("\0") || root.includes("\0")) return false;
  if (!isAbsolute(child) || !isAbsolute(root)) return false;
  const r = resolve(root);
  const c = resolve(child);
  // POSIX: both are normalized absolute paths, so containment is a prefix ending at a separator (what
  // path.relative decides, without building the relative path). Windows keeps path.relative (drive letters, case).
  if (sep === "/") return c === r || c.startsWith(r === "/" ? r : `${r}/`);
  const rel = relative(r, c);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/**
 * True when `path` lies within one of `roots` (see isPathInside). Relative roots resolve against process.cwd();
 * empty or non-string roots are skipped; an empty or non-string path, or a root list that is not an array, is false.
 */
export function isPathWithinRoots(path: string, roots: readonly string[]): boolean {
  if (typeof path !== "string" || !path || path.includes("\0") || !Array.isArray(roots)) return false;
  const absolute = resolve(path);
  return roots.some(
    (r) => typeof r === "string" && r !== "" && !r.includes("\0") && isPathInside(absolute, resolve(r)),
  );
}

/** The directory relative inputs resolve against: the chat working directory, else process.cwd(). */
export function baseDirectory(context: Pick<ToolContext, "workingDirectory">): string {
  return context.workingDirectory ? resolve(context.workingDirectory) : process.cwd();
}

/** A path that ends in a separator, or a separator and ".": it names a directory (never the root alone). */
const TRAILING_DIRECTORY = sep === "\\" ? /.[\\/]\.?$/ : /.\/\.?$/;

/**
 * A RegisteredTool.validateArguments for tools whose arguments `names` are paths: each one present is checked with
 * {@link pathArgumentProblem}, so a path no file can have is refused before the call runs (its time budget, its
 * context), as an argument the schema refuses is. Returns the first refusal (not thrown), or undefined.
 */
export function pathArgumentsCheck(...names: string[]): (args: Record<string, unknown>) => ToolRefusal | undefined {
  return (args) => {
    for (const name of names) {
      if (args[name] === undefined) continue;
      const problem = pathArgumentProblem(args[name], name);
      if (problem) return problem;
    }
    return undefined;
  };
}

/**
 * Checks the text of a path argument before anything touches the filesystem: a non-empty string, no NUL byte,
 * well-formed Unicode (no lone UTF-16 surrogate, which no file name can hold), at most MAX_PATH_BYTES bytes, and no
 * name (component between "/") longer than MAX_NAME_BYTES bytes. Throws ToolArgumentError (validation_failed) with
 * `details.rule` non_empty | nul_byte | invalid_unicode | path_too_long | name_too_long, quoting at most ~100
 * characters of the argument.
 */
export function checkPathArgument(input: unknown, argument = "path"): asserts input is string {
  const problem = pathArgumentProblem(input, argument);
  if (problem) throw problem.toError();
}

/** {@link checkPathArgument} without the throw: the refusal it would throw (as data), or undefined. */
export function pathArgumentProblem(input: unknown, argument = "path"): ToolRefusal | undefined {
  if (typeof input !== "string" || input.trim() === "") {
    return argumentRefusal(`Invalid argument "${argument}": must be a non-empty path.`, {
      argument,
      rule: "non_empty",
    });
  }
  if (input.includes("\0")) {
    return argumentRefusal(`Invalid argument "${argument}": a path must not contain a NUL byte.`, {
      argument,
      rule: "nul_byte",
    });
  }
  if (hasLoneSurrogate(input)) {
    return argumentRefusal(
      `Invalid argument "${argument}": it contains a lone UTF-16 surrogate (half of a character), which no file name can hold; send the path as valid Unicode text.`,
      { argument, rule: "invalid_unicode" },
    );
  }
  const bytes = Buffer.byteLength(input, "utf8");
  if (bytes > MAX_PATH_BYTES) {
    return argumentRefusal(
      `Invalid argument "${argument}": it is ${bytes} bytes long; a path is at most ${MAX_PATH_BYTES} bytes (UTF-8). Send a shorter path.`,
      { argument, rule: "path_too_long", bytes, max: MAX_PATH_BYTES },
    );
  }
  if (bytes > MAX_NAME_BYTES) {
    for (const name of input.split(sep === "\\" ? /[\\/]/ : "/")) {
      const length = Buffer.byteLength(name, "utf8");
      if (length > MAX_NAME_BYTES) {
        return argumentRefusal(
          `Invalid argument "${argument}": the name "${clip(name, 60)}" is ${length} bytes long; a file or directory name is at most ${MAX_NAME_BYTES} bytes (UTF-8). Send a path whose names are shorter.`,
          { argument, rule: "name_too_long", bytes: length, max: MAX_NAME_BYTES },
        );
      }
    }
  }
  return undefined;
}

/** The effective path policy of a call, as read from its settings. */
export interface EffectivePathPolicy {
  restrict: boolean;
  /** Allowed roots, lexical and real forms (empty when restriction is off). */
  allowed: string[];
  /** Denied entries, lexical and real forms. */
  denied: string[];
  /** Whether the allowed roots came from `allowedPaths` (else: the working directory). */
  explicitRoots: boolean;
  /** Toolhost's own data and code (context.protectedPaths), lexical and real forms: always refused. */
  protected: string[];
  /** True when no working directory is bound and the process working directory may not stand in for it. */
  noWorkingDirectory: boolean;
  /**
   * True when the bound working directory no longer resolves to itself (a symlink, or one swapped in). Looked up
   * when first read (a realpath), and only when {@link policyRefusal} cannot tell from the path it decides.
   */
  readonly workingDirectoryMoved: boolean;
  /**
   * The bound working directory while it stands as the allowed root without having been looked up: a location
   * inside it counts as allowed only when it proves the directory resolves to itself (see policyRefusal).
   */
  readonly uncheckedRoot?: string;
  /**
   * Every form of the allowed roots, lexical and real (a realpath each, made on the first call): asked only for a
   * location that none of `allowed` (their lexical forms) contains. Absent when `allowed` is complete.
   */
  readonly resolvedAllowed?: () => readonly string[];
}

/** Reads allowedPaths / deniedPaths / restrictPaths from the call's settings (stored settings coerce to defaults). */
export async function effectivePathPolicy(context: ToolContext): Promise<EffectivePathPolicy> {
  const params = context.settings?.values ?? {};
  const base = baseDirectory(context);
  const restrict = booleanSetting(params, RESTRICT_PATHS_DESCRIPTOR);
  const allowedList = stringListSetting(params, ALLOWED_PATHS_DESCRIPTOR).filter((p) => p.trim() !== "");
  const deniedList = stringListSetting(params, DENIED_PATHS_DESCRIPTOR);
  const explicitRoots = allowedList.length > 0;
  const noWorkingDirectory = !context.workingDirectory && context.processCwdFallback === false;
  const bound = !!context.workingDirectory;
  // The working directory counts as a root only while it resolves to itself: a bound directory that a symlink has
  // replaced since binding must not carry the allowed root to wherever the link points. That takes a realpath,
  // made only when the location decided does not prove it already (see policyRefusal).
  let moved: boolean | undefined;
  const isMoved = () => {
    moved ??= bound && realNow(base) !== base;
    return moved;
  };
  // The allowed roots' lexical forms decide first; their real forms (a realpath each) are looked up only for a
  // location none of the lexical forms contains (see resolvedAllowed).
  const allowed = !restrict
    ? []
    : explicitRoots
      ? lexicalRootForms(allowedList, base)
      : noWorkingDirectory
        ? []
        : [base];
  const rootsResolvedLater = restrict && (explicitRoots || (!bound && !noWorkingDirectory));
  let resolvedAllowed: string[] | undefined;
  const denied = rootForms(deniedList, base);
  const protectedForms = [...protectedRootForms(context.protectedPaths ?? [], base), ...OWN_PROCESS_ROOTS];
  return {
    restrict: restrict || noWorkingDirectory,
    allowed,
    // Protected paths are denied too, so every walker that skips denied entries skips them.
    denied: denied.length === 0 ? protectedForms : [...new Set([...denied, ...protectedForms])],
    explicitRoots,
    protected: protectedForms,
    noWorkingDirectory: noWorkingDirectory && !explicitRoots,
    get workingDirectoryMoved() {
      return !explicitRoots && isMoved();
    },
    ...(restrict && bound && !explicitRoots ? { uncheckedRoot: base } : {}),
    ...(rootsResolvedLater && {
      resolvedAllowed: () => (resolvedAllowed ??= rootForms(explicitRoots ? allowedList : [base], base)),
    }),
  };
}

/**
 * Decides one already-resolved location against a policy. Returns null when allowed, else the rule that refuses
 * it: the confinement rule first ("noWorkingDirectory", "workingDirectoryMoved", "allowedPaths" or
 * "workingDirectory"), so a path outside the allowed directories gets the same answer whatever it is; then
 * "protected" (Toolhost's own files) or "deniedPaths". `lexical` and `real` are absolute; `canonical` says that
 * `real` is a realpath of something that exists (it then proves the working directory, see uncheckedRoot).
 */
export function policyRefusal(
  policy: EffectivePathPolicy,
  lexical: string,
  real: string,
  canonical = false,
): string | null {
  const inside = (list: readonly string[] | undefined) =>
    (list ?? []).some((d) => isPathInside(real, d) || isPathInside(lexical, d));
  // A canonical `real` (no link in it, every part existing) inside the unchecked working directory proves that the
  // directory resolves to itself; anything else asks the file system.
  const allowedIn = (root: string) =>
    isPathInside(real, root) && (root !== policy.uncheckedRoot || canonical || !policy.workingDirectoryMoved);
  if (policy.restrict && !policy.allowed.some(allowedIn) && !policy.resolvedAllowed?.().some(allowedIn)) {
    if (policy.noWorkingDirectory) return "noWorkingDirectory";
    if (policy.workingDirectoryMoved) return "workingDirectoryMoved";
    return policy.explicitRoots ? "allowedPaths" : "workingDirectory";
  }
  if (inside(policy.protected) || isOwnProcessEntry(lexical) || isOwnProcessEntry(real)) return "protected";
  if (inside(policy.denied)) return "deniedPaths";
  return null;
}

/** True when a walked entry must be left out: covered by deniedPaths or a protected path. */
export function isExcludedEntry(policy: EffectivePathPolicy, lexical: string, real: string): boolean {
  if (policy.denied.length === 0) return false;
  return policy.denied.some((d) => isPathInside(real, d) || isPathInside(lexical, d));
}

/**
 * A fast exclusion test for a walk of one root: answers isExcludedEntry for `rootLexical/rel` and `rootReal/rel`
 * (rel `/`-separated, relative to the root, as the walkers produce it) without resolving paths per entry.
 *
 * Containment is decided once for the root: a denied or protected path that contains the root excludes every
 * entry; one inside the root excludes exactly the entries at or beneath its relative path; any other is
 * irrelevant to this walk. Valid only for walks that do not follow symbolic links (an entry's real location is then
 * its real parent plus its name), which is how every walker here works.
 */
export function walkExclusion(
  policy: EffectivePathPolicy,
  rootLexical: string,
  rootReal: string,
): (rel: string) => boolean {
  const prefixes: string[] = [];
  for (const d of policy.denied) {
    for (const root of rootLexical === rootReal ? [rootLexical] : [rootLexical, rootReal]) {
      if (isPathInside(root, d)) return () => true;
      if (isPathInside(d, root)) prefixes.push(relative(resolve(root), resolve(d)).split(sep).join("/"));
    }
  }
  if (prefixes.length === 0) return () => false;
  return (rel) =>
    prefixes.some((p) => rel === p || (rel.length > p.length && rel.startsWith(p) && rel[p.length] === "/"));
}

/** True when a denied or protected path lies inside `root` (lexical or real form), i.e. a walk of it must skip some. */
export function hasExclusionsWithin(policy: EffectivePathPolicy, rootLexical: string, rootReal: string): boolean {
  return policy.denied.some((d) => isPathInside(d, rootLexical) || isPathInside(d, rootReal));
}

/** What resolveAndValidatePath resolved: see there. */
export interface ResolvedPath {
  absolute: string;
  real: string;
  policy: EffectivePathPolicy;
}

/**
 * Resolves a model-supplied path (absolute, ~-prefixed, or relative to context.workingDirectory, else
 * process.cwd()) and enforces the policy from context.settings.values (allowedPaths, deniedPaths,
 * restrictPaths).
 *
 * Returns `absolute` (the lexically normalized path, what results are reported from), `real` (the location
 * after every symlink; for a missing file, its nearest existing ancestor's real path plus the missing tail) —
 * open `real` — and `policy`, the effective policy it enforced (a walker reuses it instead of reading the settings
 * and resolving the configured roots again).
 *
 * Throws AccessDeniedError (access_denied, naming the input path and the rule, never leaking what lies outside),
 * NotFoundError when `mustExist` and it does not exist, ToolArgumentError for an empty path, a NUL byte, a
 * symlink loop, or the wrong kind (`kind: "file" | "directory"`).
 */
export async function resolveAndValidatePath(
  input: string,
  context: ToolContext,
  options: {
    mustExist?: boolean;
    kind?: "file" | "directory" | "any";
    argument?: string;
    /**
     * "read" lets the call open its own spill files (context.spillDirectory) despite the data directory's
     * protection, and reads a spill name (`spill:<id>`) as the caller's spill; "write" refuses a spill name
     * (spills are read-only, see {@link spillWriteRefusal}) and a path in a Git directory (see
     * {@link gitDirectoryRefusal}).
     */
    purpose?: "read" | "write";
  } = {},
): Promise<ResolvedPath> {
  const argument = options.argument ?? "path";
  checkPathArgument(input, argument);
  if (isSpillName(input)) {
    // A spill name is read as the caller's spill and never written (spills are read-only); `./spill:…` is a file.
    if (options.purpose === "read") return resolveSpillName(input, context, argument);
    if (options.purpose === "write") throw spillWriteRefusal(input, argument);
  }
  const absolute = expandPath(input, baseDirectory(context));
  const absoluteBytes = Buffer.byteLength(absolute, "utf8");
  if (absoluteBytes > MAX_PATH_BYTES) {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": "${clip(input)}" resolves to a path of ${absoluteBytes} bytes (with the working directory in front); a path is at most ${MAX_PATH_BYTES} bytes. Send a shorter path.`,
      { argument, rule: "path_too_long", bytes: absoluteBytes, max: MAX_PATH_BYTES },
    );
  }
  const policy = await effectivePathPolicy(context);
  let resolved: LooseReal;
  try {
    resolved = realpathLoose(absolute, input, 0, argument);
  } catch (error) {
    // A path that cannot be resolved (a link loop, a name too long, no permission on the way) is first judged
    // where it is written: outside the allowed directories it answers access_denied like every other outside path,
    // so its failure says nothing about what lies there.
    const outside = policyRefusal(policy, absolute, absolute);
    if (outside) throw accessDenied(input, outside, argument);
    throw pathSystemError(error, input, argument);
  }
  const { real, exists } = resolved;
  // A reading tool may open the call's own spill files, which the policy refuses (they are Toolhost's data).
  const rule = policyRefusal(policy, absolute, real, exists);
  if (rule && !(options.purpose === "read" && isOwnSpillPath(context, absolute, real))) {
    throw accessDenied(input, rule, argument);
  }
  if (options.purpose === "write") {
    const git = gitDirectoryRefusal(input, absolute, real, argument);
    if (git) throw git;
  }

  if (options.mustExist && !exists) {
    throw new NotFoundError(
      `No such file or directory: "${clip(input)}". Check the path (list_directory or glob can help).`,
      {
        path: clip(input),
        argument,
      },
    );
  }
  const kind = options.kind ?? "any";
  // As in POSIX path resolution, a trailing "/" (or "/.") names a directory: "a.txt/" is not the file a.txt.
  const namesDirectory = TRAILING_DIRECTORY.test(input);
  if (namesDirectory && kind === "file" && !exists) {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": "${clip(input)}" ends with "/", which names a directory; a file's path ends with its name.`,
      { argument, rule: "kind", path: clip(input) },
    );
  }
  if (exists && (kind !== "any" || namesDirectory || policy.denied.length > 0)) {
    let info: Stats;
    try {
      info = statSync(real);
    } catch (error) {
      throw pathSystemError(error, input, argument);
    }
    if (namesDirectory && !info.isDirectory()) {
      throw new ToolArgumentError(
        `Invalid argument "${argument}": "${clip(input)}" ends with "/", which names a directory, but it is a file; drop the trailing "/" to name the file.`,
        { argument, rule: "not_a_directory", path: clip(input) },
      );
    }
    if (kind === "file" && info.isDirectory()) {
      throw new ToolArgumentError(
        `Invalid argument "${argument}": "${clip(input)}" is a directory, not a file; use list_directory or glob for directories.`,
        { argument, rule: "kind", path: clip(input) },
      );
    }
    if (kind === "directory" && !info.isDirectory()) {
      throw new ToolArgumentError(
        `Invalid argument "${argument}": "${clip(input)}" is not a directory; use read_file for files.`,
        { argument, rule: "kind", path: clip(input) },
      );
    }
    // A hard link to a denied or protected file is that file, whatever its name (see path-aliases.ts).
    if (isDeniedFileAlias(policy.denied, info, real)) throw accessDenied(input, "deniedPaths", argument);
  }
  return { absolute, real, policy };
}

/**
 * resolveAndValidatePath for a spill name (`spill:<id>`): the local file of the caller's own spill (see
 * ToolContext.openSpill). Throws one NotFoundError, worded the same, for a name that is malformed, missing, expired,
 * another user's or another chat's, so the answer tells nothing about other users' spills.
 */
async function resolveSpillName(
  input: string,
  context: ToolContext,
  argument: string,
): Promise<{ absolute: string; real: string; policy: EffectivePathPolicy }> {
  const file = context.openSpill ? await context.openSpill(input) : undefined;
  if (!file) {
    throw new NotFoundError(
      `No spill "${clip(input)}" for you: spill names (spill:<id>) come from the outputTruncated notice of one of your own results in this chat, and expire after some days.`,
      { path: clip(input), argument },
    );
  }
  const policy = await effectivePathPolicy(context);
  return { absolute: file, real: file, policy };
}

/**
 * True when `real` (and its lexical form) lies inside the call's own spill directory: the full outputs of this
 * user's chat, the only part of the data directory a tool may read (and only tools that read).
 */
export function isOwnSpillPath(context: Pick<ToolContext, "spillDirectory">, lexical: string, real: string): boolean {
  const dir = context.spillDirectory;
  if (!dir) return false;
  const realDir = ownedRealPath(dir) ?? resolve(dir);
  return isPathInside(real, realDir) && (isPathInside(lexical, resolve(dir)) || isPathInside(lexical, realDir));
}

const realWorkingDirs = new Map<string, string | null>();

function realOf(dir: string): string | null {
  let value = realWorkingDirs.get(dir);
  if (value === undefined) {
    try {
      value = realpathSync.native(dir);
    } catch {
      value = null;
    }
    if (realWorkingDirs.size > 1000) realWorkingDirs.clear();
    realWorkingDirs.set(dir, value);
  }
  return value;
}

/** A relative result path that would read as a spill name (`spill:…`) written as `./spill:…`, the file it is. */
function notSpillName(rel: string): string {
  return isSpillName(rel) ? `./${rel}` : rel;
}

/**
 * A result path relative to the chat working directory ("." for the directory itself), or absolute when no
 * directory is bound or the path lies outside it (the path convention). Separators are `/`-style on POSIX. A file of
 * the call's spill directory is shown as its spill name (`spill:<id>`); a relative path that begins with `spill:`
 * (a file of that name in the working directory) as `./spill:…`, so that a tool given it back reaches the file.
 */
export function toResultPath(
  absolutePath: string,
  context: Pick<ToolContext, "workingDirectory" | "spillDirectory">,
): string {
  const target = resolve(absolutePath);
  // A spill is shown by its virtual name, never by where this instance keeps it.
  if (context.spillDirectory && dirname(target) === resolve(context.spillDirectory)) {
    const id = spillIdOfFileName(basename(target));
    if (id) return `spill:${id}`;
  }
  if (!context.workingDirectory) return target;
  const wd = resolve(context.workingDirectory);
  for (const root of [wd, realOf(wd)]) {
    if (root && isPathInside(target, root)) return notSpillName(relative(root, target)) || ".";
  }
  return target;
}

/**
 * toResultPath for every entry of one tree, without resolving each path: `(rel) => toResultPath(join(rootAbs,
 * rel), context)` with `rel` `/`-separated and relative to `rootAbs` ("" for the root itself). The answer for the
 * root decides every entry's, except when the working directory lies strictly inside the tree (then an entry may
 * fall inside it or not, and each is decided on its own).
 */
export function resultPathMapper(
  rootAbs: string,
  context: Pick<ToolContext, "workingDirectory" | "spillDirectory">,
): (rel: string) => string {
  const root = resolve(rootAbs);
  const single = (rel: string) => toResultPath(rel ? join(root, rel) : root, context);
  if (context.workingDirectory) {
    const wd = resolve(context.workingDirectory);
    const forms = [wd, realOf(wd)];
    if (forms.some((f) => f && f !== root && isPathInside(f, root))) return single;
  }
  const base = toResultPath(root, context);
  if (base === ".") return (rel) => notSpillName(rel) || ".";
  return (rel) => (rel ? `${base === "/" ? "" : base}/${rel}` : base);
}
