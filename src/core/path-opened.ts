/**
 * The path policy decided again on a file once it is open. A path is checked, then opened: between the two, a
 * directory on the way can be swapped for a symbolic link (by a concurrent process, a shell command), and the open
 * (O_NOFOLLOW guards only the last name) then lands wherever the link points, or a file can be replaced by a hard
 * link to a denied one. So what the descriptor really is gets the same answer its path got: where it lies (Linux:
 * `/proc/self/fd/N`) must pass the policy (and, for a write, lie outside Git directories), and a hard link to a
 * denied or protected file is refused as that file (path-aliases.ts).
 */
import { readlinkSync, type Stats } from "node:fs";
import type { ToolError } from "./errors.js";
import { isDeniedFileAlias } from "./path-aliases.js";
import { isOwnSpillPath, policyRefusal, type ResolvedPath } from "./path-policy.js";
import { accessDenied, gitDirectoryRefusal } from "./path-refusals.js";
import type { ToolContext } from "./types.js";

/** Where the file of an open descriptor lies now (Linux), or undefined where that cannot be told. */
export function descriptorLocation(fd: number): string | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    const at = readlinkSync(`/proc/self/fd/${fd}`);
    return at.endsWith(" (deleted)") ? at.slice(0, -" (deleted)".length) : at;
  } catch {
    return undefined;
  }
}

/**
 * The refusal (access_denied) of the file open on `fd` for a path resolveAndValidatePath admitted as `resolved`,
 * or undefined when it stands: its location decided by the same policy (a reading tool may still open its own
 * spills; a write may not land in a Git directory), and not a hard link to a denied or protected file. `info` is
 * the descriptor's fstat; `input` and `argument` name the path as the caller gave it.
 */
export function openedFileRefusal(
  resolved: ResolvedPath,
  fd: number,
  info: Stats,
  context: Pick<ToolContext, "spillDirectory">,
  options: { input: string; argument?: string; purpose: "read" | "write" },
): ToolError | undefined {
  const { input, argument = "path", purpose } = options;
  const at = descriptorLocation(fd);
  if (at !== undefined && at !== resolved.real) {
    const rule = policyRefusal(resolved.policy, at, at, true);
    if (rule && !(purpose === "read" && isOwnSpillPath(context, at, at))) return accessDenied(input, rule, argument);
    if (purpose === "write") {
      const git = gitDirectoryRefusal(input, at, at, argument);
      if (git) return git;
    }
  }
  if (isDeniedFileAlias(resolved.policy.denied, info, fd)) return accessDenied(input, "deniedPaths", argument);
  return undefined;
}
