/**
 * How the path policy resolves locations: lexical expansion (`~`, relative to a base), symbolic links followed
 * without requiring the target to exist (a dangling link leads where it points), and the lexical and real forms of
 * the configured roots. Used by path-policy.ts; nothing here decides what is allowed.
 */
import { existsSync, lstatSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { clip, ToolArgumentError } from "./errors.js";

/** Most symlink hops followed while resolving one path (same order as the kernel's limit). */
const MAX_LINK_HOPS = 40;

/**
 * Expands a path lexically: `~` and `~/…` → the home directory, absolute paths normalized, anything else
 * resolved against `base`. Does not touch the filesystem.
 */
export function expandPath(input: string, base: string): string {
  if (input === "~") return homedir();
  if (input.startsWith("~/") || (sep === "\\" && input.startsWith("~\\"))) return join(homedir(), input.slice(2));
  return isAbsolute(input) ? resolve(input) : resolve(base, input);
}

export function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Outcome of resolving a path through symlinks without requiring it to exist. */
export interface LooseReal {
  /** The real location the path designates (through every link, including dangling ones). */
  real: string;
  /** Whether something exists there (a dangling link does not count). */
  exists: boolean;
}

/**
 * Resolves `absolute` (already lexically normalized) through symlinks. When it does not exist, the nearest
 * existing ancestor is resolved and the missing tail appended; a dangling link is followed to where it points.
 * Throws ToolArgumentError on a symlink loop (naming `argument`), and the system error of anything else that
 * stops the lookup (no permission on the way, a name too long).
 *
 * Synchronous on purpose: a lookup of a local path is a few microseconds of the event loop (the kernel's
 * dentry cache answers it), where the thread pool's round trip of `fs.promises.realpath` cost tens of
 * microseconds of CPU on each side, more under load (see docs/filesystem.md, "Synchronous lookups").
 */
export function realpathLoose(absolute: string, input: string, hops = 0, argument = "path"): LooseReal {
  if (hops > MAX_LINK_HOPS) throw loopError(input, argument);
  try {
    return { real: realpathSync.native(absolute), exists: true };
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ELOOP") throw loopError(input, argument);
    if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
  }
  // Something on the way is missing. Is the last component itself a (dangling) link?
  let isLink = false;
  try {
    isLink = lstatSync(absolute).isSymbolicLink();
  } catch (error) {
    const code = errnoOf(error);
    if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
  }
  const parent = dirname(absolute);
  if (parent === absolute) return { real: absolute, exists: false };
  const parentReal = realpathLoose(parent, input, hops, argument);
  if (isLink) {
    const target = readlinkSync(absolute);
    const next = isAbsolute(target) ? resolve(target) : resolve(parentReal.real, target);
    return { real: realpathLoose(next, input, hops + 1, argument).real, exists: false };
  }
  return { real: join(parentReal.real, basename(absolute)), exists: false };
}

export function loopError(input: string, argument = "path"): ToolArgumentError {
  return new ToolArgumentError(
    `Path "${clip(input)}" goes through a symbolic link loop (or too many links); pass a path that does not cycle.`,
    { path: clip(input), argument, rule: "symlink_loop" },
  );
}

/**
 * Every form under which a configured root may be met: its lexical and its real location. The roots are resolved
 * afresh on every call (see {@link realpathLoose}).
 */
export function rootForms(entries: readonly string[], base: string): string[] {
  const out = new Set<string>();
  for (const entry of entries) {
    if (!isRootEntry(entry)) continue;
    const lexical = expandPath(entry.trim(), base);
    out.add(lexical);
    try {
      out.add(realpathLoose(lexical, entry).real);
    } catch {
      // an unresolvable root (loop) still counts under its lexical form
    }
  }
  return [...out];
}

/** Whether a configured root entry is usable (a non-blank string without NUL); others are skipped. */
function isRootEntry(entry: unknown): entry is string {
  return typeof entry === "string" && entry.trim() !== "" && !entry.includes("\0");
}

/** The lexical forms of configured roots: {@link rootForms} without the lookups of their real forms. */
export function lexicalRootForms(entries: readonly string[], base: string): string[] {
  return [...new Set(entries.filter(isRootEntry).map((entry) => expandPath(entry.trim(), base)))];
}

/** How long (ms) the resolved forms of a runtime's protected paths are reused before they are resolved again. */
const PROTECTED_FORMS_MS = 1_000;

/** The forms of each protected-path list (one per runtime: the same array on every call), with their expiry. */
const protectedFormsCache = new WeakMap<readonly string[], { base: string; forms: string[]; until: number }>();

/**
 * {@link rootForms} of the runtime's protected paths (Toolhost's own data and code, fixed when the runtime is made
 * and writable only by Toolhost's owner), resolved at most once per {@link PROTECTED_FORMS_MS}: about five path
 * lookups fewer per call. Their lexical forms are always part of the answer.
 */
export function protectedRootForms(entries: readonly string[], base: string): string[] {
  if (entries.length === 0) return [];
  const now = Date.now();
  const cached = protectedFormsCache.get(entries);
  if (cached && cached.base === base && cached.until > now) return cached.forms;
  const forms = rootForms(entries, base);
  protectedFormsCache.set(entries, { base, forms, until: now + PROTECTED_FORMS_MS });
  return forms;
}

/** Real forms of Toolhost's own directories (spill directories), with their expiry. */
const ownedRealForms = new Map<string, { real: string; until: number }>();

/**
 * The real path of a directory Toolhost made and only Toolhost's owner can change (a call's spill directory under
 * the data directory), reused for {@link PROTECTED_FORMS_MS}; null when it cannot be resolved (not cached: it may
 * be made the next moment). For a directory a user can swap, use {@link realNow}.
 */
export function ownedRealPath(dir: string): string | null {
  const now = Date.now();
  const cached = ownedRealForms.get(dir);
  if (cached && cached.until > now) return cached.real;
  const real = realNow(dir);
  if (real === null) return null;
  if (ownedRealForms.size >= 1000) ownedRealForms.clear();
  ownedRealForms.set(dir, { real, until: now + PROTECTED_FORMS_MS });
  return real;
}

/** The real path of `dir` right now (no cache: a swap must be seen), or null when it cannot be resolved. */
export function realNow(dir: string): string | null {
  try {
    return realpathSync.native(dir);
  } catch {
    return null;
  }
}

/**
 * The pids of this process's ancestors (parent, grandparent, … up to init), read once from /proc at startup: they
 * started it, so their environments hold the same provider keys and database URL (`npm start` runs it under npm
 * and a shell; a container's first process may be npm itself). Empty off Linux.
 */
function ancestorPids(): string[] {
  if (process.platform !== "linux") return [];
  const pids: string[] = [];
  let pid = process.ppid;
  while (pid > 0 && pids.length < 64 && !pids.includes(String(pid))) {
    pids.push(String(pid));
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the command's closing parenthesis: state, then ppid.
      pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    } catch {
      break;
    }
  }
  return pids;
}

const PROTECTED_PIDS = new Set(process.platform === "linux" ? [String(process.pid), ...ancestorPids()] : []);

/**
 * The /proc directories of this process and its ancestors: protected, so walks of /proc skip them (see
 * isOwnProcessEntry).
 */
export const OWN_PROCESS_ROOTS: readonly string[] = [...PROTECTED_PIDS].map((pid) => `/proc/${pid}`);

/**
 * True for the /proc entries of this process (`self`, `thread-self`, its pid, or the id of any of its threads) and
 * of its ancestors: their environments hold the provider keys and the database URL, which no tool may read, whatever
 * its settings.
 */
export function isOwnProcessEntry(path: string): boolean {
  if (!path.startsWith("/proc/") || process.platform !== "linux") return false;
  const id = path.slice(6).split("/", 1)[0] ?? "";
  if (id === "self" || id === "thread-self" || PROTECTED_PIDS.has(id)) return true;
  return /^\d+$/.test(id) && existsSync(`/proc/self/task/${id}`);
}
