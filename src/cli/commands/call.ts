/**
 * `toolhost call <tool> [json]`: runs one tool through the approval gate and prints its JSON result. The command
 * line of the usual forms is read here without commander ({@link parseCallCommandLine}), so a process per call
 * loads neither commander nor the other commands; anything else goes through the full parser (./program.ts), which
 * runs the same {@link runCall}.
 */
import { parseChatId } from "../../app/chat-id.js";
import { LOCAL_USER } from "../../core/config.js";
import { withToolCallContext } from "../app-context.js";
import { importMcpTools } from "../mcp-tools.js";
import {
  asUsageError,
  CliError,
  errorText,
  isUserId,
  onStopSignals,
  operator,
  parseArgumentsOption,
  print,
  printable,
  SIGNAL_EXIT_CODE,
  type StopSignal,
} from "../util.js";

/** Options of `toolhost call` (as commander gives them, with `user` defaulting to LOCAL_USER). */
export interface CallOptions {
  user: string;
  cwd?: string;
  chat?: string;
  yes?: boolean;
  approval?: string;
}

/** A `toolhost call` command line read without commander: the tool, its arguments text and the options. */
export interface CallCommandLine {
  tool: string;
  json: string;
  options: CallOptions;
}

/** `call`'s options that take a value, by spelling, and the option each sets. */
const VALUE_OPTIONS: Record<string, "user" | "cwd" | "chat" | "approval"> = {
  "-u": "user",
  "--user": "user",
  "--cwd": "cwd",
  "--chat": "chat",
  "--approval": "approval",
};

/**
 * Reads `args` (the words after the program name) when they are `call`, a tool name, optionally its JSON arguments,
 * and options among -u/--user NAME, --cwd DIR, --chat ID, --approval ID (also as --long=VALUE) and -y/--yes, each
 * at most once, in any order. Returns undefined for anything else — help, `--`, an unknown or repeated option, a
 * missing or extra argument, an option value that starts with "-", an invalid user id — which the full parser
 * handles (and reports) exactly as before. What it accepts, it reads as commander does.
 */
export function parseCallCommandLine(args: readonly string[]): CallCommandLine | undefined {
  if (args[0] !== "call") return undefined;
  const positional: string[] = [];
  const options: Partial<CallOptions> = {};
  for (let i = 1; i < args.length; i++) {
    const word = args[i] as string;
    if (!word.startsWith("-")) {
      positional.push(word);
      continue;
    }
    if (word === "-y" || word === "--yes") {
      if (options.yes) return undefined;
      options.yes = true;
      continue;
    }
    const eq = word.startsWith("--") ? word.indexOf("=") : -1;
    const spelling = eq > 0 ? word.slice(0, eq) : word;
    const key = Object.hasOwn(VALUE_OPTIONS, spelling) ? VALUE_OPTIONS[spelling] : undefined;
    if (!key || options[key] !== undefined) return undefined;
    const value = eq > 0 ? word.slice(eq + 1) : args[++i];
    if (value === undefined || value.startsWith("-")) return undefined;
    if (key === "user" && !isUserId(value)) return undefined;
    options[key] = value;
  }
  if (positional.length < 1 || positional.length > 2) return undefined;
  return {
    tool: positional[0] as string,
    json: positional[1] ?? "{}",
    options: { ...options, user: options.user ?? LOCAL_USER },
  };
}

/**
 * Runs `toolhost call`: checks the arguments text (a usage error, exit 2, when it is not a JSON object), opens the
 * context the tool needs (cli/app-context.ts withToolCallContext), binds the working directory (--cwd, or the
 * chat's; under chat roots the current directory when --cwd is absent), runs the call through the approval gate
 * and prints the result as JSON on stdout, or the error once, as `error: <code>: <message>` on stderr, with exit
 * code 1 (130/143 when Ctrl-C or SIGTERM cancelled it). Throws CliError for usage errors.
 */
export async function runCall(toolName: string, json: string, opts: CallOptions): Promise<void> {
  // Arguments that are not a JSON object are a usage error (exit 2), before anything runs.
  parseArgumentsOption(json);
  // A built-in runs with the core context and its own module only; other names get the full context.
  return withToolCallContext(toolName, async (ctx, app) => {
    if (app && toolName.startsWith("mcp__")) await importMcpTools(app, true, toolName);
    // The same binder as chats and the HTTP route; a call in a chat uses the chat's directory.
    const caller = operator(opts.user);
    const chat = opts.chat ? await ctx.chats.get(opts.user, opts.chat) : undefined;
    // Under chat roots a call binds the current directory when --cwd is absent, as `toolhost chat` does.
    const implicit = opts.cwd === undefined && !chat && ctx.binder.hasRoots;
    const workingDirectory = asUsageError(() =>
      chat
        ? ctx.binder.forChat(chat, opts.cwd, caller)
        : implicit
          ? ctx.binder.bind(process.cwd(), { ...caller, argument: "the current directory" })
          : ctx.binder.bind(opts.cwd, caller),
    );
    if (opts.chat && !chat) {
      // The id becomes the chat's: the same rule as a chat created through the API or `toolhost chat --chat`.
      asUsageError(() => parseChatId(opts.chat as string));
      if (await ctx.chats.exists(opts.chat)) throw new CliError(`Chat ${opts.chat} belongs to another user.`);
      await ctx.chats.create({ id: opts.chat, userId: opts.user, workingDirectory });
    }
    // Ctrl-C or SIGTERM cancels the call (a shell tool's processes are killed); the context closes after its
    // audit line is written. A second signal quits at once.
    const controller = new AbortController();
    let stoppedBy: StopSignal | undefined;
    const removeStopHandlers = onStopSignals((signal) => {
      stoppedBy = signal;
      controller.abort();
    });
    // Through the approval gate: an ask is prompted on a terminal, denied without one unless --yes.
    const { runGatedCall } = await import("../../app/approvals/one-off.js");
    const { cliResponder } = await import("../approval-prompt.js");
    const outcome = await runGatedCall(toolName, json, {
      runtime: ctx.runtime,
      approvals: ctx.approvals,
      userId: opts.user,
      chatId: opts.chat ?? null,
      workingDirectory,
      signal: controller.signal,
      onProgress: (event) =>
        process.stderr.write(`${printable(event.kind)}${event.message ? `: ${printable(event.message)}` : ""}\n`),
      ...(opts.approval
        ? { approvalId: opts.approval }
        : {
            responder: cliResponder({
              yes: opts.yes === true,
              interactive: Boolean(process.stdin.isTTY && process.stderr.isTTY),
            }),
          }),
    });
    removeStopHandlers();
    if (outcome.ok) return print(outcome.result);
    // The runtime words an unknown name for a model; an operator is told where the tools are listed.
    const message =
      outcome.error.code === "not_found" && !ctx.runtime.registry.get(toolName)
        ? `Unknown tool "${toolName}". List the tools with \`toolhost tools\`${opts.user === "local" ? "" : ` --user ${opts.user}`}.`
        : outcome.error.message;
    // A failed call is reported once: one line on stderr, `error: <code>: <message>`, exit code 1; stdout stays
    // empty, so what a script reads there is always a result.
    process.stderr.write(`error: ${outcome.error.code}: ${errorText(message)}\n`);
    process.exitCode = stoppedBy && outcome.error.code === "aborted" ? SIGNAL_EXIT_CODE[stoppedBy] : 1;
  });
}
