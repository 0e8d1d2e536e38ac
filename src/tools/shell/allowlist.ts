/**
 * Which executables shell_exec may run, and how a name becomes a file: only allowlisted programs run, and the first
 * element of the argv names one.
 *
 * - argv[0] must be a bare name (no `/` or `\`): `/bin/sh`, `./git` and `../bin/git` are refused.
 * - The name must be on the effective allowlist: SHELL_COMMAND_ALLOWLIST (preset "default"),
 *   STRICT_SHELL_COMMAND_ALLOWLIST (preset "strict"), or the `allowedCommands` setting (preset "custom").
 * - The name is looked up on the absolute entries of PATH only, skipping any directory inside an untrusted root
 *   (the call's cwd and the chat working directory, where a model can write), and must resolve to an executable
 *   regular file that does not itself live in an untrusted root: a `./git` in the working directory is not `git`.
 */
import { accessSync, constants, realpathSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { AccessDeniedError, NotFoundError } from "../../core/errors.js";
import { isPathInside } from "../../core/path-policy.js";
import { stringListSetting, stringSetting } from "../../core/settings-declaration.js";
import type { ToolParameterDescriptor } from "../../core/types.js";

/** The default allowlist (preset "default"). Several entries run arbitrary code: see docs/shell.md. */
export const SHELL_COMMAND_ALLOWLIST: readonly string[] = [
  "git",
  "node",
  "npm",
  "npx",
  "bun",
  "deno",
  "python3",
  "python",
  "pip",
  "ls",
  "cat",
  "grep",
  "find",
  "echo",
  "mkdir",
  "touch",
  "cp",
  "mv",
  "head",
  "tail",
  "wc",
  "sort",
  "uniq",
  "diff",
  "curl",
  "wget",
  "tar",
  "zip",
  "unzip",
  "jq",
  "sed",
  "awk",
  "which",
  "env",
  "date",
  "cargo",
  "rustc",
  "go",
  "make",
  "cmake",
];

/**
 * The default list without every entry that can run another program or arbitrary code through its own arguments
 * or the files it reads (interpreters, package managers and build tools, `env`, `awk`, `find -exec`, `sed e`,
 * `sort --compress-program`, `tar --to-command`, `zip -TT`, git aliases and hooks) and without the network
 * clients (`curl`, `wget`). What remains reads, lists, compares and copies files.
 */
export const STRICT_SHELL_COMMAND_ALLOWLIST: readonly string[] = [
  "ls",
  "cat",
  "grep",
  "echo",
  "mkdir",
  "touch",
  "cp",
  "mv",
  "head",
  "tail",
  "wc",
  "uniq",
  "diff",
  "jq",
  "which",
  "date",
];

/** Names of the allowlist presets (setting `allowlistPreset`). */
export const ALLOWLIST_PRESETS = ["default", "strict", "custom"] as const;
/** An allowlist preset: the default list ("default"), the strict list, or the `allowedCommands` setting. */
export type AllowlistPreset = (typeof ALLOWLIST_PRESETS)[number];

/** allowlistPreset: which command list shell_exec uses (admin only). */
export const ALLOWLIST_PRESET_DESCRIPTOR: ToolParameterDescriptor = {
  name: "allowlistPreset",
  type: "string",
  description:
    'Which commands may run: "default" (the documented list, which includes interpreters such as python3, node, env, awk, make, git that run arbitrary code), "strict" (file viewing and copying tools only), or "custom" (the allowedCommands setting).',
  allowedValues: ALLOWLIST_PRESETS,
  default: "default",
  adminOnly: true,
};

/** allowedCommands: the command names of the "custom" preset (admin only). */
export const ALLOWED_COMMANDS_DESCRIPTOR: ToolParameterDescriptor = {
  name: "allowedCommands",
  type: "string[]",
  description: 'Command names allowed when allowlistPreset is "custom" (bare names, e.g. "git").',
  default: [...SHELL_COMMAND_ALLOWLIST],
  max: 500,
  adminOnly: true,
};

/** The effective allowlist of a call from its settings (`allowlistPreset`, `allowedCommands`; corrupt → defaults). */
export function effectiveAllowlist(parameters: Record<string, unknown>): string[] {
  const preset = stringSetting(parameters, ALLOWLIST_PRESET_DESCRIPTOR) as AllowlistPreset;
  if (preset === "strict") return [...STRICT_SHELL_COMMAND_ALLOWLIST];
  if (preset === "custom") return stringListSetting(parameters, ALLOWED_COMMANDS_DESCRIPTOR);
  return [...SHELL_COMMAND_ALLOWLIST];
}

/** Options of findExecutable. */
export interface FindExecutableOptions {
  /** Platform whose lookup rules apply (default process.platform). */
  platform?: NodeJS.Platform;
  /** Directories where a match is ignored (looked up by real path). */
  untrustedRoots?: readonly string[];
  /** Windows: extensions tried, in order (default from PATHEXT, else .COM .EXE .BAT .CMD). */
  extensions?: readonly string[];
}

function isExecutableFile(path: string, windows: boolean): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    if (!windows) accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * Looks `name` up on `pathValue` (a PATH string) like a shell would, but only in absolute entries and never inside
 * `untrustedRoots`. Returns the real absolute path of the first executable regular file, or null.
 * Used by registerShellTools to decide whether bash / zsh / powershell are registered, and by shell_exec.
 */
export function findExecutable(
  name: string,
  pathValue: string | undefined,
  options: FindExecutableOptions = {},
): string | null {
  const windows = (options.platform ?? process.platform) === "win32";
  if (!name || /[/\\\0]/.test(name)) return null;
  const untrusted = (options.untrustedRoots ?? []).map(realOrSelf);
  const inUntrusted = (path: string) => untrusted.some((root) => isPathInside(path, root));
  const extensions = windows
    ? (options.extensions ?? (process.env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter(Boolean))
    : [""];
  const candidates =
    windows && extensions.some((e) => name.toUpperCase().endsWith(e.toUpperCase())) ? [""] : extensions;
  for (const dir of (pathValue ?? "").split(windows ? ";" : delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const realDir = realOrSelf(dir);
    if (inUntrusted(realDir) || inUntrusted(dir)) continue;
    for (const ext of candidates) {
      const candidate = join(dir, name + ext);
      if (!isExecutableFile(candidate, windows)) continue;
      const real = realOrSelf(candidate);
      if (inUntrusted(real)) continue;
      return real;
    }
  }
  return null;
}

/** Options of resolveAllowedExecutable. */
export interface ResolveExecutableOptions {
  allowlist: readonly string[];
  /** The PATH to search (the child's, already sanitized). */
  pathValue: string | undefined;
  /** Directories a model can write to: the call's cwd and the chat working directory. */
  untrustedRoots: readonly string[];
  platform?: NodeJS.Platform;
}

/**
 * Checks argv[0] against the allowlist and resolves it to a real executable (see the module comment).
 * Throws AccessDeniedError for a path-like name or a name not on the allowlist (rule `not_a_bare_name` /
 * `not_allowlisted`), NotFoundError when no trusted PATH directory holds it.
 */
export function resolveAllowedExecutable(name: string, options: ResolveExecutableOptions): string {
  const windows = (options.platform ?? process.platform) === "win32";
  if (/[/\\]/.test(name)) {
    throw new AccessDeniedError(
      `Command "${name}" is refused: argv[0] must be a bare command name from the allowlist (e.g. "git"), not a path.`,
      { argument: "argv", command: name, rule: "not_a_bare_name" },
    );
  }
  const key = windows ? name.toLowerCase().replace(/\.(exe|com)$/, "") : name;
  const allowed = options.allowlist.some((entry) => (windows ? entry.toLowerCase() : entry) === key);
  if (!allowed) {
    const shown = options.allowlist.slice(0, 60).join(", ");
    throw new AccessDeniedError(
      `Command "${name}" is not on the shell_exec allowlist. Allowed commands: ${shown || "(none)"}. Use one of them, or ask the user to change the allowlist settings.`,
      { argument: "argv", command: name, rule: "not_allowlisted" },
    );
  }
  const file = findExecutable(key, options.pathValue, {
    platform: options.platform,
    untrustedRoots: options.untrustedRoots,
    // Windows: only real executables; .bat/.cmd would go through cmd.exe, i.e. a shell.
    extensions: windows ? [".EXE", ".COM"] : undefined,
  });
  if (!file) {
    throw new NotFoundError(
      `Command "${name}" is allowed but not installed on this server (not found on PATH outside the working directory).`,
      { argument: "argv", command: name },
    );
  }
  return file;
}
