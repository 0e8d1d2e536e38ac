/**
 * The working-directory binder: the one place that decides which directory a chat, a tool call or an MCP
 * connection may bind, for every surface (CLI call and chat, the HTTP tool route and chats, MCP over HTTP).
 *
 * Rules:
 * - Chat roots (TOOLHOST_CHAT_ROOTS, colon-separated; `{user}` stands for the user id) confine everyone's
 *   bindings when configured. A directory outside them gets one answer, whether it exists, is a file or is
 *   missing: existence is only reported for paths inside the caller's roots, so the binder is no oracle for the
 *   rest of the server's filesystem.
 * - Without roots, only admins may bind (anywhere); other callers get 403.
 * - A relative value resolves against the caller's own base: the shell directory of a local operator (CLI), else
 *   the caller's first chat root. A remote caller without roots must send an absolute path; nothing resolves
 *   against the server process's own directory.
 * - The real path is bound (symlinks resolved), and a bound directory later replaced by a link, or no longer
 *   within the roots, is refused before each turn and each tool call.
 * - A user's own root (a `{user}` template) is created, mode 0700, by their first binding request when the
 *   directory above the `{user}` part exists (the operator creates that one): a new user can start at once.
 */
import { existsSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { AccessDeniedError, ToolArgumentError } from "../core/errors.js";
import { makeDirectoriesSync } from "../core/make-directory.js";
import { isPathWithinRoots } from "../core/path-policy.js";
import type { AdminRule } from "./admin.js";

/** Who asks to bind a directory. */
export interface BindingCaller {
  userId: string;
  /** Whether the caller is an admin (see AdminRule). */
  admin: boolean;
  /**
   * The caller's own directory, against which relative values resolve: the shell's working directory of a local
   * operator (CLI, library). Absent for remote callers, whose relative values resolve against their first root.
   */
  base?: string;
  /**
   * How messages name the value (default `workingDirectory`, the HTTP field): the CLI says `--cwd`, or "the current
   * directory" when it binds the shell's directory by itself.
   */
  argument?: string;
  /** The command-line flag that chooses another directory (`--cwd`), named in refusals; absent over HTTP. */
  flag?: string;
}

/** A chat's binding as the binder checks it. */
export interface BoundChat {
  id: string;
  userId: string;
  workingDirectory: string | null;
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** The real path of `path` where it exists, with the missing tail appended to its deepest existing ancestor. */
function realOfLongestExisting(path: string): string {
  const missing: string[] = [];
  let current = path;
  for (;;) {
    try {
      const real = realpathSync(current);
      return missing.length > 0 ? join(real, ...missing.reverse()) : real;
    } catch {
      const parent = dirname(current);
      if (parent === current) return path;
      missing.push(current.slice(parent.length).replace(/^[/\\]/, ""));
      current = parent;
    }
  }
}

/** Quotes a caller's value for a message: JSON, at most ~100 characters. */
function quoted(value: string): string {
  const text = JSON.stringify(value);
  return text.length > 102 ? `${text.slice(0, 99)}…"` : text;
}

/** Decides and checks working-directory bindings (see the module docstring). */
export class WorkingDirectoryBinder {
  readonly #roots: string[] | null;

  /** `roots`: the configured chat roots (`{user}` templates allowed); null or empty: none. */
  constructor(roots: readonly string[] | null) {
    this.#roots = roots && roots.length > 0 ? [...roots] : null;
  }

  /** Whether chat roots are configured. */
  get hasRoots(): boolean {
    return this.#roots !== null;
  }

  /**
   * The roots one user may bind: each configured root with `{user}` replaced by the user id (so
   * `TOOLHOST_CHAT_ROOTS=/srv/work/{user}` gives every user a directory of their own), resolved to real paths.
   * A user id that is empty, only dots or holds a separator gets no templated root. Null when none are configured.
   */
  rootsFor(userId: string): string[] | null {
    if (!this.#roots) return null;
    const usable = userId !== "" && !/^\.+$/.test(userId) && !/[/\\\0]/.test(userId);
    return this.#roots
      .filter((r) => usable || !r.includes("{user}"))
      .map((r) => realOrSelf(resolve(r.replaceAll("{user}", userId))));
  }

  /**
   * Creates the user's templated roots (`{user}` replaced) that do not exist yet, mode 0700, when the directory
   * above the first `{user}` part exists; leaves alone what it cannot create (the binding then reports it missing).
   */
  ensureUserRoots(userId: string): void {
    if (!this.#roots || userId === "" || /^\.+$/.test(userId) || /[/\\\0]/.test(userId)) return;
    for (const root of this.#roots) {
      const at = root.indexOf("{user}");
      if (at < 0) continue;
      const target = resolve(root.replaceAll("{user}", userId));
      if (existsSync(target)) continue;
      const above = dirname(root.slice(0, at + "{user}".length));
      if (above.includes("{user}") || !existsSync(above)) continue;
      try {
        makeDirectoriesSync(target, 0o700);
      } catch {
        // Not creatable (permissions, a file in the way): the binding reports the root missing.
      }
    }
  }

  /**
   * Validates a directory to bind and returns its real path, or null when none is given and none is required.
   * Throws AccessDeniedError (403) when roots are configured and the value lies outside them (the same answer
   * whatever exists there) or is missing, or when no roots are configured and the caller is not an admin;
   * ToolArgumentError (400) for a NUL byte, a relative value with nothing to resolve it against, or — inside the
   * roots, or for an admin without roots — a path that does not exist or is not a directory.
   */
  bind(input: string | null | undefined, caller: BindingCaller): string | null {
    this.ensureUserRoots(caller.userId);
    const roots = this.rootsFor(caller.userId);
    const name = caller.argument ?? "workingDirectory";
    if (input === undefined || input === null || input === "") {
      if (roots) {
        throw new AccessDeniedError(
          `This server confines working directories to ${roots.join(", ")} (TOOLHOST_CHAT_ROOTS); pass a ${name} within one of them${caller.base === undefined ? ` (a relative one resolves against ${roots[0]}: "." binds ${roots[0]})` : ""}.`,
          { rule: "chat_roots", argument: "workingDirectory" },
        );
      }
      return null;
    }
    if (input.includes("\0")) {
      throw new ToolArgumentError(`${name} must not contain a NUL byte.`, { argument: "workingDirectory" });
    }
    if (!roots && !caller.admin) {
      throw new AccessDeniedError(
        "Only an admin may bind a working directory on this server, because no TOOLHOST_CHAT_ROOTS are configured. Ask the operator to set TOOLHOST_CHAT_ROOTS to the directories users may work in.",
        { rule: "chat_roots", argument: "workingDirectory" },
      );
    }
    const base = caller.base ?? roots?.[0];
    if (!isAbsolute(input) && base === undefined) {
      throw new ToolArgumentError(
        `${name} ${quoted(input)} is relative; pass an absolute path (this server has no chat root to resolve it against).`,
        { argument: "workingDirectory" },
      );
    }
    const absolute = isAbsolute(input) ? resolve(input) : resolve(base as string, input);
    const outside = () =>
      new AccessDeniedError(
        `${name} ${quoted(input)} is outside the directories you may bind (${(roots ?? []).join(", ")}; TOOLHOST_CHAT_ROOTS). Pass a directory within one of them${caller.flag ? ` with ${caller.flag} DIR` : ""}.`,
        { rule: "chat_roots", argument: "workingDirectory" },
      );
    // Inside-the-roots is decided before anything about existence is said.
    if (roots && !isPathWithinRoots(realOfLongestExisting(absolute), roots)) throw outside();
    let isDirectory = false;
    try {
      isDirectory = statSync(absolute).isDirectory();
    } catch {
      throw new ToolArgumentError(
        `${name} ${quoted(input)} does not exist (no such directory). Create it or pass an existing directory.`,
        { argument: "workingDirectory" },
      );
    }
    if (!isDirectory) {
      throw new ToolArgumentError(`${name} ${quoted(input)} is not a directory.`, {
        argument: "workingDirectory",
      });
    }
    // Bind the real path: a symlink swapped in later must not move the chat (the path policy refuses a working
    // directory whose real path no longer matches what was bound).
    const real = realOrSelf(absolute);
    if (roots && !isPathWithinRoots(real, roots)) throw outside();
    return real;
  }

  /**
   * Throws AccessDeniedError when the chat's bound directory has left the chat roots or no longer resolves to
   * itself (a symlink was swapped in after binding). Called before every turn and every tool call in a chat.
   */
  assertBound(chat: Pick<BoundChat, "workingDirectory" | "userId">): void {
    const dir = chat.workingDirectory;
    if (!dir) return;
    const real = realOrSelf(dir);
    const roots = this.rootsFor(chat.userId);
    if (real !== dir || (roots && !isPathWithinRoots(real, roots))) {
      throw new AccessDeniedError(
        `This chat's directory ${dir} ${real !== dir ? "has been replaced by a link since it was bound" : "is no longer within the allowed chat roots (TOOLHOST_CHAT_ROOTS)"}. Start a new chat.`,
        { rule: "chat_roots" },
      );
    }
  }

  /**
   * The directory a call in an existing chat uses: the chat's own (checked with assertBound). A `requested`
   * directory is allowed only when it binds to the same directory. Throws AccessDeniedError (see assertBound and
   * bind) or ToolArgumentError when `requested` differs from the chat's directory.
   */
  forChat(chat: BoundChat, requested: string | null | undefined, caller: BindingCaller): string | null {
    this.assertBound(chat);
    if (requested === undefined || requested === null || requested === "") return chat.workingDirectory;
    const wanted = this.bind(requested, caller);
    if (wanted !== chat.workingDirectory) {
      throw new ToolArgumentError(
        `Chat ${chat.id} is bound to ${chat.workingDirectory ?? "no directory"}; omit the working directory to use the chat's, or start another chat.`,
        { argument: "workingDirectory" },
      );
    }
    return wanted;
  }
}

/**
 * Who may run a call that has no bound working directory in the process's own directory (the runtime's
 * `processCwdFallback`): on a server shared by several users only admins (TOOLHOST_ADMIN_USERS), since a user must not
 * reach the server's own directory; in one user's process (the CLI, a library host) everyone.
 */
export function processDirectoryRule(admins: AdminRule, shared: boolean): (userId: string) => boolean {
  return shared ? (userId) => admins.isAdmin(userId) : () => true;
}
