/**
 * The sandbox profile of a shell call and its translation into bwrap arguments.
 *
 * Default profile:
 * - the whole filesystem read-only (`--ro-bind / /`), a fresh `/dev` and `/proc`, a private `/tmp` (tmpfs);
 * - the writable roots (the chat working directory or the call's cwd, plus admin-granted `writablePaths`)
 *   bound read-write;
 * - inside each writable root (and the call's cwd), what would let a command escalate later is bound again
 *   read-only: the top-level `.git` as a whole (so its hooks and config cannot be written, and the mount point
 *   cannot be renamed away and replaced), a worktree's `.git` pointer file and the repository directories it
 *   points to, every `.env*` file at the top of the root, and Toolhost's own installed code;
 * - Toolhost's data directory, its other data files (a database file kept elsewhere) and the `deniedPaths` are hidden (an empty read-only tmpfs over a directory,
 *   /dev/null over a file);
 * - its own PID namespace (the command cannot see or signal other processes), IPC namespace and session, killed
 *   with its parent (`--die-with-parent`); a network namespace with only a down loopback when the network is off;
 * - the seccomp filter (see seccomp.ts) on file descriptor `seccompFd`.
 */
import { lstatSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { isPathInside } from "../../../core/path-policy.js";

/** What one sandboxed call may do. All paths absolute and real (symlinks resolved). */
export interface SandboxProfile {
  /** Working directory of the command (inside the sandbox, at the same path). */
  cwd: string;
  /** Directories bound read-write. */
  writableRoots: string[];
  /** Whether the command may use the network (no network namespace, inet sockets allowed). */
  network: boolean;
  /** Paths hidden from the command (data directory, deniedPaths). */
  hiddenPaths: string[];
  /** Paths bound read-only again when they lie inside a writable root (Toolhost's installed code). */
  readOnlyPaths: string[];
  /** The file descriptor (in bwrap) carrying the seccomp filter bytes. */
  seccompFd: number;
}

type Kind = "dir" | "file" | "missing";

function kindOf(path: string): Kind {
  try {
    return statSync(path).isDirectory() ? "dir" : "file";
  } catch {
    return "missing";
  }
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync.native(path);
  } catch {
    return null;
  }
}

/** The repository directory a `.git` pointer file (`gitdir: …`) names, resolved against its folder; or null. */
function gitdirOf(pointer: string): string | null {
  try {
    const text = readFileSync(pointer, "utf8");
    const match = /^gitdir:\s*(.+)$/m.exec(text);
    if (!match?.[1]) return null;
    const target = match[1].trim();
    return realOrNull(isAbsolute(target) ? target : resolve(dirname(pointer), target));
  } catch {
    return null;
  }
}

/** A path to protect inside a writable root: bind read-only when it exists, or (createEmpty) an empty read-only dir. */
export interface ProtectedSubpath {
  path: string;
  kind: Kind;
  /** When missing: cover it with an empty read-only directory (so a command cannot create it). */
  createEmpty?: boolean;
}

/**
 * The paths inside `root` that a command could use to escalate later: its top-level `.git` (a directory, or a
 * worktree's pointer file together with the repository directories it points to), and the `.env*` files at the
 * top of the root. Looks at the filesystem; never throws.
 *
 * Where `root` has no `.git`, nothing stands in for it: a command may create a new repository there (`git init`),
 * and the hooks of a repository created inside the sandbox are the command's own (a documented limitation). A
 * `.git` that is a symbolic link is not covered either.
 */
export function protectedSubpaths(root: string): ProtectedSubpath[] {
  const out: ProtectedSubpath[] = [];
  const gitDirs: string[] = [];
  const dotGit = join(root, ".git");
  let dotGitKind: Kind = "missing";
  try {
    const info = lstatSync(dotGit);
    dotGitKind = info.isDirectory() ? "dir" : info.isFile() ? "file" : "missing";
  } catch {
    // no repository here
  }
  // The whole `.git` is read-only, not only its hooks and config: a command that could rename a writable `.git`
  // away could copy it back with hooks of its own. Bound onto itself, it is a mount point, which cannot be
  // renamed (EBUSY) nor replaced.
  if (dotGitKind === "dir") gitDirs.push(dotGit);
  if (dotGitKind === "file") {
    out.push({ path: dotGit, kind: "file" });
    const gitdir = gitdirOf(dotGit);
    if (gitdir) {
      gitDirs.push(gitdir);
      // A linked worktree keeps hooks and config in the common directory.
      try {
        const common = readFileSync(join(gitdir, "commondir"), "utf8").trim();
        const real = realOrNull(isAbsolute(common) ? common : resolve(gitdir, common));
        if (real) gitDirs.push(real);
      } catch {
        // not a linked worktree
      }
    }
  }
  for (const dir of gitDirs) {
    const kind = kindOf(dir);
    if (kind !== "missing") out.push({ path: dir, kind });
  }
  try {
    for (const name of readdirSync(root)) {
      if (!name.startsWith(".env")) continue;
      const path = join(root, name);
      const kind = kindOf(path);
      if (kind !== "missing") out.push({ path, kind });
    }
  } catch {
    // unreadable root: bwrap will report it
  }
  return out;
}

/** Deduplicated absolute paths, parents before children. */
function ordered(paths: readonly string[]): string[] {
  return [...new Set(paths.map((p) => resolve(p)))].sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
}

/**
 * The bwrap arguments (without the trailing `--` and command) that confine a call to `profile`. Looks at the
 * filesystem for the protected subpaths and the kinds of hidden paths; never throws.
 */
export function bwrapArguments(profile: SandboxProfile): string[] {
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
  const writable = ordered(profile.writableRoots);
  const inWritable = (path: string) => writable.some((root) => isPathInside(path, root));
  // Visible at all inside the sandbox: anything outside the private /tmp, or inside a writable root.
  const visible = (path: string) => inWritable(path) || !isPathInside(path, "/tmp");
  // A hidden directory that holds a writable root (an admin's writablePaths entry inside deniedPaths): covered by an
  // empty tmpfs first, the roots bound inside it, then made read-only, so only the roots show through.
  const hidden = ordered(profile.hiddenPaths).map((path) => ({ path, kind: kindOf(path) }));
  const covering: string[] = [];
  for (const { path, kind } of hidden) {
    if (kind !== "dir" || !visible(path) || covering.some((dir) => isPathInside(path, dir))) continue;
    if (writable.some((root) => root !== path && isPathInside(root, path))) covering.push(path);
  }
  for (const dir of covering) args.push("--tmpfs", dir);
  for (const root of writable) args.push("--bind", root, root);
  for (const dir of covering) args.push("--remount-ro", dir);

  // The roots' own repositories and .env files, and the cwd's when it lies deeper inside a root.
  const scanned = [...new Set([...writable, profile.cwd])];
  const seen = new Set<string>();
  for (const root of scanned) {
    for (const sub of protectedSubpaths(root)) {
      if (seen.has(sub.path)) continue;
      seen.add(sub.path);
      if (!inWritable(sub.path)) continue; // already read-only
      if (sub.kind === "missing") {
        if (sub.createEmpty && kindOf(dirname(sub.path)) === "dir") {
          args.push("--tmpfs", sub.path, "--remount-ro", sub.path);
        }
        continue;
      }
      args.push("--ro-bind", sub.path, sub.path);
    }
  }
  for (const path of ordered(profile.readOnlyPaths)) {
    if (inWritable(path) && kindOf(path) !== "missing") args.push("--ro-bind", path, path);
  }
  const hiddenDirs: string[] = [];
  for (const { path, kind } of hidden) {
    if (kind === "missing" || !visible(path)) continue;
    // Already out of sight under a hidden directory (the database inside the data directory): nothing to add, and
    // the empty read-only tmpfs there has no place for another mount point. Only the writable roots bound inside a
    // covering directory show through it.
    if (hiddenDirs.some((dir) => isPathInside(path, dir))) continue;
    if (covering.some((dir) => isPathInside(path, dir)) && !inWritable(path)) continue;
    // A hidden path that is a writable root, or holds the cwd, cannot be hidden without hiding them too.
    if (writable.some((root) => isPathInside(root, path)) || isPathInside(profile.cwd, path)) continue;
    if (kind === "dir") {
      args.push("--tmpfs", path, "--remount-ro", path);
      hiddenDirs.push(path);
    } else args.push("--ro-bind", "/dev/null", path);
  }
  args.push("--unshare-pid", "--unshare-ipc");
  if (!profile.network) args.push("--unshare-net");
  args.push("--die-with-parent", "--new-session", "--chdir", profile.cwd, "--seccomp", String(profile.seccompFd));
  return args;
}
