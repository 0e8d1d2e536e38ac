/** Small helpers shared by CLI commands. */

import { realpathSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { InvalidArgumentError } from "commander";

/** An error the CLI reports as `error: <message>` with exit code `exitCode` (2 for usage errors). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
  }
}

/** Parses a `name=value` settings pair; the value is JSON where it parses, else the raw string. */
export function parseAssignment(pair: string): [string, unknown] {
  const eq = pair.indexOf("=");
  if (eq <= 0)
    throw new CliError(`Expected name=value, got "${pair}" (e.g. timeoutSeconds=60 or allowedPaths='["/srv"]').`);
  const name = pair.slice(0, eq);
  const text = pair.slice(eq + 1);
  try {
    return [name, JSON.parse(text)];
  } catch {
    return [name, text];
  }
}

/** Resolves `--cwd` to its real path: must exist and be a directory. Throws CliError otherwise. */
export function resolveDirectoryOption(dir: string): string {
  const absolute = resolve(dir);
  let isDir = false;
  try {
    isDir = statSync(absolute).isDirectory();
  } catch {
    throw new CliError(`--cwd ${dir}: no such directory.`);
  }
  if (!isDir) throw new CliError(`--cwd ${dir}: not a directory.`);
  return realpathSync(absolute);
}

/** Renders rows as an aligned text table. */
export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** User ids: 1–128 letters, digits, or `. _ @ -` (the same rule everywhere a user is named). */
export const USER_ID_PATTERN = /^[A-Za-z0-9._@-]{1,128}$/;

/** Commander argument parser for `--user`: throws InvalidArgumentError (exit 2) for a malformed user id. */
export function parseUserId(value: string): string {
  if (!USER_ID_PATTERN.test(value) || /^\.+$/.test(value)) {
    throw new InvalidArgumentError("use 1–128 letters, digits, or . _ @ - (not only dots)");
  }
  return value;
}
