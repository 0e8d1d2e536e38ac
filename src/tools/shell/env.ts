/**
 * The environment a shell child receives: the server's variables filtered through TAINT_ENV_ALLOWLIST, for
 * shell_exec and for bash / zsh / powershell alike.
 *
 * Only the variables named in TAINT_ENV_ALLOWLIST pass, by exact name (case-insensitively on Windows), so a
 * secret in the server's environment (OPENAI_API_KEY, GITHUB_TOKEN, DATABASE_URL, AWS_SECRET_ACCESS_KEY, …) never
 * reaches a model-chosen command. Relative and empty entries are removed from PATH (a `./git` planted in the
 * working directory is never found through PATH). A few fixed variables keep tools from waiting on a terminal.
 */
import { delimiter, isAbsolute } from "node:path";

/** Names of the variables passed from the server's environment to a shell child; every other one is dropped. */
export const TAINT_ENV_ALLOWLIST: readonly string[] = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "LC_ALL",
  "LC_CTYPE",
  "LC_COLLATE",
  "LC_MESSAGES",
  "LC_MONETARY",
  "LC_NUMERIC",
  "LC_TIME",
  "TERM",
  "TZ",
  "TMPDIR",
  "TMP",
  "TEMP",
  // Windows: needed for processes to start at all.
  "SYSTEMROOT",
  "WINDIR",
  "COMSPEC",
  "PATHEXT",
  "SYSTEMDRIVE",
  "USERPROFILE",
  "HOMEDRIVE",
  "HOMEPATH",
  "APPDATA",
  "LOCALAPPDATA",
  "PROGRAMDATA",
  "PROGRAMFILES",
  "NUMBER_OF_PROCESSORS",
  "PROCESSOR_ARCHITECTURE",
  "OS",
];

/** Variables set for every child, whatever the server's environment: no pager, no credential prompt. */
export const FIXED_CHILD_ENV: Readonly<Record<string, string>> = {
  PAGER: "cat",
  GIT_PAGER: "cat",
  GIT_TERMINAL_PROMPT: "0",
};

/** PATH without empty or relative entries (which would resolve against the child's working directory). */
export function sanitizePathVariable(value: string | undefined, pathDelimiter = delimiter): string {
  return (value ?? "")
    .split(pathDelimiter)
    .filter((entry) => entry !== "" && isAbsolute(entry))
    .join(pathDelimiter);
}

/**
 * The child environment built from `source` (default process.env): only TAINT_ENV_ALLOWLIST names, PATH
 * sanitized, plus FIXED_CHILD_ENV. Names compare exactly on POSIX and case-insensitively on Windows.
 */
export function filterEnvironment(
  source: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  const windows = platform === "win32";
  const allowed = new Set(windows ? TAINT_ENV_ALLOWLIST.map((n) => n.toUpperCase()) : TAINT_ENV_ALLOWLIST);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (typeof value !== "string") continue;
    if (!allowed.has(windows ? name.toUpperCase() : name)) continue;
    out[name] =
      (windows ? name.toUpperCase() : name) === "PATH" ? sanitizePathVariable(value, windows ? ";" : ":") : value;
  }
  return { ...out, ...FIXED_CHILD_ENV };
}
