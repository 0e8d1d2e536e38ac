/**
 * The `toolhost` command line: main() runs it with the process's arguments. The usual forms of `toolhost call` are
 * read without commander (commands/call.ts), so a process per tool call loads only what that call needs; every
 * other command line is parsed by commander (./program.ts). Every command opens the same data directory as the
 * server (TOOLHOST_DATA_DIR, else the XDG data directory ~/.local/share/toolhost), wherever it runs, so a setting made
 * in one is seen by the other.
 */
import type { Command } from "commander";
import { classifiedError, ToolError } from "../core/errors.js";
import { asksForVersion, VERSION } from "../version.js";
import { parseCallCommandLine, runCall } from "./commands/call.js";
import { CliError, type CommandName, commandNamedBy, errorText, exitQuietlyOnClosedStdout } from "./util.js";

/**
 * Builds the commander program (./program.ts, loaded on first use); exported for tests and for commands contributed
 * by other modules. With `only`, just that command is defined (or none, for ""): what main() does when the command
 * line names one, since building every command's options costs a short process more than running it.
 */
export async function buildProgram(only?: CommandName | ""): Promise<Command> {
  const program = await import("./program.js");
  return program.buildProgram(only);
}

/** Runs the CLI with process.argv; maps errors to messages and exit codes (2 usage, 1 tool/other failures). */
export async function main(argv = process.argv): Promise<void> {
  exitQuietlyOnClosedStdout();
  try {
    const args = argv.slice(2);
    // `--version` alone prints the version as commander would, without loading it.
    if (asksForVersion(args)) {
      process.stdout.write(`${VERSION}\n`);
      return;
    }
    const call = parseCallCommandLine(args);
    if (call) {
      await runCall(call.tool, call.json, call.options);
      return;
    }
    const program = await buildProgram(commandNamedBy(args));
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CliError) {
      process.stderr.write(`error: ${errorText(error.message)}\n`);
      process.exitCode = error.exitCode;
    } else if (error instanceof ToolError) {
      process.stderr.write(`error: ${error.code}: ${errorText(error.message)}\n`);
      process.exitCode = 1;
    } else if (classifiedError(error)) {
      // The application's refusals (a busy chat, a provider without a key, …): the message says what to do next.
      const { code, message } = classifiedError(error)!;
      process.stderr.write(`error: ${errorText(message)}\n`);
      process.exitCode = USAGE_ERROR_CODES.has(code) ? 2 : 1;
    } else if (isCommanderError(error)) {
      // Commander has already printed its message (or the help text).
      const ok = ["commander.helpDisplayed", "commander.help", "commander.version"].includes(error.code);
      process.exitCode = ok ? 0 : 2;
    } else {
      process.stderr.write(`error: ${errorText((error as Error)?.message ?? String(error))}\n`);
      process.exitCode = 1;
    }
  }
}

/** Codes of the application's refusals that a corrected command line fixes (exit 2, like usage errors). */
const USAGE_ERROR_CODES = new Set(["bad_request", "provider_not_configured"]);

/**
 * Whether `error` is commander's (a parse error, help or version shown): its CommanderError carries a `commander.*`
 * code (and an exit code). Checked by shape, so that main() need not load commander for a command line it did not parse.
 */
function isCommanderError(error: unknown): error is Error & { code: string; exitCode: number } {
  const { code, exitCode } = (error ?? {}) as { code?: unknown; exitCode?: unknown };
  return (
    error instanceof Error && typeof code === "string" && code.startsWith("commander.") && typeof exitCode === "number"
  );
}
