/** Small helpers shared by CLI commands. */

import type { BindingCaller } from "../app/working-directory.js";
import { ToolError } from "../core/errors.js";

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
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return [name, text];
  }
  // JSON.parse reads 1e400 as Infinity, which would be stored as null: say what was typed instead.
  if (hasNonFiniteNumber(value)) {
    throw new CliError(`The value of ${name}, ${text}, holds a number too large to store; use a smaller one.`);
  }
  return [name, value];
}

function hasNonFiniteNumber(value: unknown): boolean {
  if (typeof value === "number") return !Number.isFinite(value);
  if (value && typeof value === "object") return Object.values(value).some(hasNonFiniteNumber);
  return false;
}

/**
 * The CLI's caller for the working-directory binder: the operator on this machine, an admin, whose relative
 * `--cwd` values resolve against the shell's current directory.
 */
export function operator(userId: string): BindingCaller {
  return { userId, admin: true, base: process.cwd(), argument: "--cwd", flag: "--cwd" };
}

/** Runs `fn`, turning a classified tool error (e.g. a refused `--cwd`) into a usage error (exit 2). */
export function asUsageError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof ToolError) throw new CliError(error.message);
    throw error;
  }
}

/**
 * Characters a terminal acts on rather than shows: C0 controls (ESC starts sequences that retitle the terminal,
 * move the cursor or rewrite what is on screen), DEL, C1 controls, and the Unicode bidirectional overrides and
 * isolates that reorder what is shown.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const NAMED_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * Text from users or models (chat titles, agent tasks, approval previews, error messages) made safe to print on a
 * terminal: every control character is shown escaped (`\n`, `\r`, `\t`, `\x1b`, `\u202e`), so none can retitle
 * the terminal, hide text or break a table row. `multiline` keeps newlines and tabs as they are (running text).
 */
export function printable(text: string, options: { multiline?: boolean } = {}): string {
  return text.replace(CONTROL, (c) => {
    if (options.multiline && (c === "\n" || c === "\t")) return c;
    const named = NAMED_ESCAPES[c];
    if (named) return named;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/**
 * `text` on one line (runs of whitespace become one space) and at most `max` characters: a longer one is cut at
 * the last word boundary that fits (mid-word only when a single word is longer than half of `max`) and ends
 * with "…".
 */
export function clip(text: string, max: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  if (line.length <= max) return line;
  const cut = line.slice(0, max - 1);
  const space = cut.lastIndexOf(" ");
  return `${(space >= max / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** Prints a value on stdout: a string with its control characters escaped (see printable), anything else as JSON. */
export function print(value: unknown): void {
  process.stdout.write(
    `${typeof value === "string" ? printable(value, { multiline: true }) : JSON.stringify(value, null, 2)}\n`,
  );
}

/**
 * Renders rows as an aligned text table. Every cell is printed on one line with its control characters escaped
 * (see printable): a title holding a newline or an escape sequence cannot break the table or the terminal.
 */
export function table(rows: string[][]): string {
  const safe = rows.map((r) => r.map((cell) => printable(cell)));
  const widths = safe[0]?.map((_, i) => Math.max(...safe.map((r) => (r[i] ?? "").length))) ?? [];
  return safe
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** User ids: the one rule, owned by app/admin.ts (the CLI's options and the admin routes both check it). */
export { isUserId, USER_ID_PATTERN } from "../app/admin.js";

/** Longest run of non-space characters an error line shows whole (a longer argument is cut). */
const LONGEST_WORD_IN_ERRORS = 100;

/**
 * An error message as the CLI prints it: control characters escaped (newlines kept), and any single run of
 * non-space characters longer than 100 characters (a long bad argument quoted back) cut, saying how much was left
 * out.
 */
export function errorText(message: string): string {
  return printable(message, { multiline: true }).replace(
    new RegExp(`\\S{${LONGEST_WORD_IN_ERRORS + 1},}`, "g"),
    (word) => `${word.slice(0, LONGEST_WORD_IN_ERRORS)}…(${word.length - LONGEST_WORD_IN_ERRORS} more characters)`,
  );
}

/**
 * Checks the `call` arguments text: a JSON object (or empty). Throws CliError (exit 2, a usage error) for
 * malformed JSON or another JSON value, naming where it broke. Returns the decoded object.
 */
export function parseArgumentsOption(text: string): Record<string, unknown> {
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CliError(
      `The arguments are not valid JSON (${(error as Error).message}). Pass one JSON object in single quotes, e.g. '{"timezone":"UTC"}'.`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new CliError(
      `The arguments must be a JSON object, got ${Array.isArray(value) ? "an array" : value === null ? "null" : typeof value}. E.g. '{"path":"."}'.`,
    );
  }
  return value as Record<string, unknown>;
}

/**
 * Makes a closed stdout (\`toolhost call … | head\`) end the process quietly with status 0, as Unix tools do,
 * instead of crashing with an EPIPE stack trace. Other stdout errors are reported in one line (exit 1).
 */
export function exitQuietlyOnClosedStdout(): void {
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
    process.stderr.write(`error: cannot write output: ${error.message}\n`);
    process.exit(1);
  });
}

/** The signals that ask a CLI process to stop: Ctrl-C in a terminal, and a service manager's or `kill`'s stop. */
export type StopSignal = "SIGINT" | "SIGTERM";

/** Exit code of a process that stopped because of a signal, by shell convention (128 + signal number). */
export const SIGNAL_EXIT_CODE: Record<StopSignal, number> = { SIGINT: 130, SIGTERM: 143 };

/**
 * Calls `onStop` on the first SIGINT or SIGTERM, so a command can cancel what runs and close its database in order;
 * a second one exits at once with 128 + its number. Returns a function that removes the handlers.
 */
export function onStopSignals(onStop: (signal: StopSignal) => void): () => void {
  let received = 0;
  const handler = (signal: StopSignal) => {
    received += 1;
    if (received > 1) process.exit(SIGNAL_EXIT_CODE[signal]);
    onStop(signal);
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return () => {
    process.removeListener("SIGINT", handler);
    process.removeListener("SIGTERM", handler);
  };
}

/** The names of the program's commands, in the order `--help` lists them. */
export const COMMAND_NAMES = [
  "serve",
  "tools",
  "call",
  "settings",
  "token",
  "audit",
  "approvals",
  "chat",
  "chats",
  "doctor",
  "agents",
  "mcp-servers",
  "data-sources",
  "mcp",
] as const;

/** One of {@link COMMAND_NAMES}. */
export type CommandName = (typeof COMMAND_NAMES)[number];

/**
 * Which command a command line runs, when that is certain before parsing: its first word when it names a command,
 * "" for a bare --version / -V; otherwise (help, an unknown command, nothing) undefined, and the whole program is
 * built so help and error messages list every command.
 */
export function commandNamedBy(args: readonly string[]): CommandName | "" | undefined {
  const first = args[0];
  if ((first === "--version" || first === "-V") && args.length === 1) return "";
  return COMMAND_NAMES.find((name) => name === first);
}
