/**
 * The refusals of the path policy (core/path-policy.ts): the AccessDeniedError of a path outside the allowed
 * directories or covered by a denied or protected path, and of a write into a Git directory; the refusal of a write
 * to a spill name; the length limits of a path; and the classified error of a filesystem failure met on a path argument.
 */
import { statSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import {
  AccessDeniedError,
  clip,
  messageWithoutPaths,
  NotFoundError,
  ToolArgumentError,
  ToolError,
  ToolExecutionError,
} from "./errors.js";
import { errnoOf, loopError } from "./path-resolve.js";

/** Longest path a path argument may have, or resolve to, in UTF-8 bytes (Linux PATH_MAX less its final NUL). */
export const MAX_PATH_BYTES = 4095;
/** Longest file or directory name (one path component), in UTF-8 bytes (NAME_MAX of Linux filesystems). */
export const MAX_NAME_BYTES = 255;

/**
 * The AccessDeniedError for a refused path: names the input (at most ~100 characters of it) and the rule, never
 * the resolved target. A protected path (Toolhost's own data and code) gets exactly the answer of a path covered by
 * deniedPaths (message and `details.rule` "deniedPaths"), so the refusal does not reveal where Toolhost keeps its
 * files.
 */
export function accessDenied(input: string, rule: string, argument = "path"): AccessDeniedError {
  const publicRule = rule === "protected" ? "deniedPaths" : rule;
  const why =
    publicRule === "deniedPaths"
      ? "it is covered by the deniedPaths setting or is one of the paths tools never touch (Toolhost's own data and installation)"
      : rule === "workingDirectoryMoved"
        ? "the working directory is a symbolic link, or was replaced by one after it was bound (bind the directory's real path)"
        : rule === "noWorkingDirectory"
          ? "no working directory is bound to this call (bind one when creating the chat, within TOOLHOST_CHAT_ROOTS, or ask an admin for allowedPaths)"
          : rule === "allowedPaths"
            ? "it resolves outside the directories allowed by the allowedPaths setting"
            : "it resolves outside the chat working directory (the only allowed directory while restrictPaths is on and allowedPaths is empty)";
  return new AccessDeniedError(
    `Access denied to "${clip(input)}": ${why}. Use a path inside the allowed directories, or ask the user to change the tool's path settings.`,
    { path: clip(input), argument, rule: publicRule },
  );
}

/**
 * The refusal of a write into a Git directory: a path with a `.git` component (the directory, a file in it, or a
 * `.git` pointer file), in its written or its real form. A repository's hooks and config run commands (`core.hooksPath`,
 * `core.fsmonitor`, …) when someone runs git there, so a file tool that could write them would let a later `git status`
 * run anything, approved or not; the shell sandbox keeps `.git` read-only for the same reason. Git commands change a
 * repository; file tools do not.
 */
export function gitDirectoryRefusal(
  input: string,
  absolute: string,
  real: string,
  argument = "path",
): AccessDeniedError | undefined {
  const inGit = (path: string) => path.split(sep).includes(".git");
  if (!inGit(absolute) && !inGit(real) && !inRepositoryDirectory(real)) return undefined;
  return new AccessDeniedError(
    `Access denied to "${clip(input)}": it is in a Git directory (.git, or a repository directory such as a worktree's separate one or a bare repository), which file tools never write (its hooks and config run commands). Use git commands to change a repository.`,
    { path: clip(input), argument, rule: "gitDirectory" },
  );
}

/**
 * True when a directory above `real` is a Git repository directory by its contents, as git itself tells one (a
 * `HEAD`, an `objects` and a `refs` directory), whatever its name: the repository of a worktree made with
 * `--separate-git-dir` (its `.git` is a pointer file), or a bare repository (`store.git`). One failed lookup per
 * level in the usual case (no `HEAD`).
 */
function inRepositoryDirectory(real: string): boolean {
  const isDirectory = (path: string) => {
    try {
      return statSync(path).isDirectory();
    } catch {
      return false;
    }
  };
  for (let dir = dirname(real); ; dir = dirname(dir)) {
    try {
      statSync(join(dir, "HEAD"));
      if (isDirectory(join(dir, "objects")) && isDirectory(join(dir, "refs"))) return true;
    } catch {
      // no HEAD: not a repository directory
    }
    if (dirname(dir) === dir) return false;
  }
}

/**
 * The refusal of a spill name (`spill:<id>`) given to a writing tool: spills are the read-only full outputs of cut
 * results, and a file written under that name would never be read back by it (a reading tool reads the spill). A
 * relative file of that name is written as `./spill:…`. ToolArgumentError (validation_failed, `details.rule`
 * "spill_read_only").
 */
export function spillWriteRefusal(input: string, argument = "path"): ToolArgumentError {
  return new ToolArgumentError(
    `Invalid argument "${argument}": "${clip(input)}" is a spill name, and spills are read-only (the full output of a cut result; read it with read_file or grep). To write a file of that name in the working directory, give its path as "./${clip(input)}".`,
    { argument, path: clip(input), rule: "spill_read_only" },
  );
}

/**
 * Classifies a filesystem error met while resolving or opening a path argument, naming only the argument as the
 * caller gave it (never the server's absolute path): ENAMETOOLONG → validation_failed (path_too_long), ELOOP →
 * validation_failed (symlink_loop), ENOTDIR → validation_failed (not_a_directory), EACCES/EPERM → access_denied
 * (permissions), ENOENT → not_found; anything else → execution_failed without paths. A ToolError is returned as is.
 */
export function pathSystemError(error: unknown, input: string, argument = "path"): ToolError {
  if (error instanceof ToolError) return error;
  const code = errnoOf(error);
  const shown = clip(input);
  switch (code) {
    case "ENAMETOOLONG":
      return new ToolArgumentError(
        `Invalid argument "${argument}": "${shown}" is too long for the filesystem once resolved (with the working directory in front and symbolic links followed: at most ${MAX_PATH_BYTES} bytes, ${MAX_NAME_BYTES} per name). Send a shorter path.`,
        { argument, path: shown, rule: "path_too_long" },
      );
    case "ELOOP":
      return loopError(input, argument);
    case "ENOTDIR":
      return new ToolArgumentError(
        `Invalid argument "${argument}": a parent of "${shown}" is a file, not a directory. Check the path (list_directory or glob can help).`,
        { argument, path: shown, rule: "not_a_directory" },
      );
    case "EACCES":
    case "EPERM":
      return new AccessDeniedError(
        `Access denied to "${shown}": the operating system does not let Toolhost open it (permissions).`,
        { argument, path: shown, rule: "permissions" },
      );
    case "ENOENT":
      return new NotFoundError(
        `No such file or directory: "${shown}". Check the path (list_directory or glob can help).`,
        {
          argument,
          path: shown,
        },
      );
    default:
      return error instanceof Error
        ? new ToolExecutionError(
            `"${shown}": ${messageWithoutPaths(error)}`,
            { argument, path: shown },
            { cause: error },
          )
        : new ToolExecutionError(`"${shown}": ${String(error)}`, { argument, path: shown });
  }
}
