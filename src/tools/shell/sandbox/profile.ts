/**
 * The sandbox profile of a shell call and its translation into bwrap arguments.
 *
 * Default profile:
 * - the whole filesystem read-only (`--ro-bind / /`), a fresh `/dev` and `/proc`, a private `/tmp` (tmpfs);
 * - the writable roots (the chat working directory or the call's cwd, plus admin-granted `writablePaths`)
 *   bound read-write;
 * - inside each writable root, what would let a command escalate later is bound again read-only: `.git/hooks`
 *   (an empty read-only directory when a repository has none yet), `.git/config`, a `.git` pointer file and the
 *   hooks/config of the repository it points to, every `.env*` file at the top of the root, and Toolhost's own
 *   installed code;
 * - Toolhost's data directory and the `deniedPaths` are hidden (an empty read-only tmpfs over a directory,
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

/** A path to protect inside a writable root: bind read-only when it exists, or (hooks) an empty read-only dir. */
export interface ProtectedSubpath {
  path: string;
  kind: Kind;
  /** When missing: cover it with an empty read-only directory (so a command cannot create it). */
  createEmpty?: boolean;
}

/**
 * The paths inside `root` that a command could use to escalate later (hooks and config of its Git repository,
 * `.env*` files at the top of the root). Looks at the filesystem; never throws.
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
    const hooks = join(dir, "hooks");
    const hooksKind = kindOf(hooks);
    out.push(
      hooksKind === "missing" ? { path: hooks, kind: "missing", createEmpty: true } : { path: hooks, kind: hooksKind },
    );
    const config = join(dir, "config");
    const configKind = kindOf(config);
    if (configKind !== "missing") out.push({ path: config, kind: configKind });
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
  for (const root of writable) args.push("--bind", root, root);
  const inWritable = (path: string) => writable.some((root) => isPathInside(path, root));
  // Visible at all inside the sandbox: anything outside the private /tmp, or inside a writable root.
  const visible = (path: string) => inWritable(path) || !isPathInside(path, "/tmp");

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
  for (const path of ordered(profile.hiddenPaths)) {
    const kind = kindOf(path);
    if (kind === "missing" || !visible(path)) continue;
    // A hidden directory that holds a writable root (or the cwd) cannot be covered without hiding them too.
    if (writable.some((root) => isPathInside(root, path)) || isPathInside(profile.cwd, path)) continue;
    if (kind === "dir") args.push("--tmpfs", path, "--remount-ro", path);
    else args.push("--ro-bind", "/dev/null", path);
  }
  args.push("--unshare-pid", "--unshare-ipc");
  if (!profile.network) args.push("--unshare-net");
  args.push("--die-with-parent", "--new-session", "--chdir", profile.cwd, "--seccomp", String(profile.seccompFd));
  return args;
}
