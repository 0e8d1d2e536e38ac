/**
 * `toolhost chat "prompt"`: runs one chat turn in the terminal. Streams the model's text to stdout and shows each tool
 * call (name, short arguments, outcome, duration) on stderr, with a spinner while it runs when stderr is a terminal
 * (plain lines otherwise). Ctrl-C (or SIGTERM) cancels the turn cleanly (the model stream and running tools stop, their
 * audit lines are written, completed steps are kept, then the database closes); a second one exits at once.
 */
import type { Command } from "commander";
import { Option } from "commander";
// Only types from the chat service here: it (with the tool loop and storage) loads when a chat runs, not when the
// program is built for `--version` or another command.
import type { ChatService } from "../../app/chat-service.js";
import type { ChatTurnEvent } from "../../app/chat-types.js";
import type { AppContext } from "../../app/context.js";
import { LOCAL_USER } from "../../core/config.js";
import { ToolError } from "../../core/errors.js";
import { describeProviderVariables, PROVIDER_NAMES, PROVIDER_TABLE, providerEntry } from "../../providers/table.js";
import type { ProviderName } from "../../providers/types.js";
import { createAppContext } from "../app-context.js";
import { importMcpTools } from "../mcp-tools.js";
import { parseUserId } from "../options.js";
import { CliError, clip, onStopSignals, operator, printable, SIGNAL_EXIT_CODE, type StopSignal } from "../util.js";

/** Options of the chat command as commander parses them. */
interface ChatOptions {
  provider?: string;
  model?: string;
  cwd?: string;
  chat?: string;
  user: string;
  maxIterations?: string;
  json?: boolean;
  yes?: boolean;
}

const SPINNER_FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** One-line rendering of tool arguments: `key=value …`, values as compact JSON, cut to `max` characters. */
export function shortArguments(raw: string, max = 80): string {
  let text: string;
  try {
    const parsed = JSON.parse(raw);
    text =
      parsed && typeof parsed === "object" && !Array.isArray(parsed)
        ? Object.entries(parsed)
            .filter(([, v]) => v !== null)
            .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
            .join(" ")
        : JSON.stringify(parsed);
  } catch {
    text = raw.replace(/\s+/g, " ");
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Renders loop events to a terminal or to plain streams. */
class ChatRenderer {
  readonly #out: NodeJS.WriteStream;
  readonly #err: NodeJS.WriteStream;
  readonly #tty: boolean;
  readonly #running = new Map<string, { name: string; args: string; note?: string }>();
  #midLine = false;
  #frame = 0;
  #timer: NodeJS.Timeout | undefined;
  #spinnerShown = false;

  constructor(out: NodeJS.WriteStream, err: NodeJS.WriteStream) {
    this.#out = out;
    this.#err = err;
    this.#tty = Boolean(err.isTTY) && process.env.TERM !== "dumb";
  }

  /** Ends a half-written line of model text before a status line. */
  #breakLine(): void {
    if (this.#midLine) {
      this.#out.write("\n");
      this.#midLine = false;
    }
  }

  #clearSpinner(): void {
    if (this.#spinnerShown) {
      this.#err.write("\r\x1b[2K");
      this.#spinnerShown = false;
    }
  }

  #drawSpinner(): void {
    if (!this.#tty || this.#paused || this.#running.size === 0) return;
    const frame = SPINNER_FRAMES[this.#frame++ % SPINNER_FRAMES.length];
    const parts = [...this.#running.values()].map((r) => `${r.name} ${r.args}${r.note ? ` (${r.note})` : ""}`.trim());
    const columns = this.#err.columns && this.#err.columns >= 20 ? this.#err.columns : 100;
    let line = printable(`${frame} ${parts.join(" · ")}`);
    if (line.length > columns - 1) line = `${line.slice(0, Math.max(10, columns - 2))}…`;
    this.#err.write(`\r\x1b[2K${line}`);
    this.#spinnerShown = true;
  }

  #paused = false;

  /** Stops the spinner while a prompt owns the terminal. */
  pause(): void {
    this.#paused = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#breakLine();
    this.#clearSpinner();
  }

  /** Gives the terminal back to the spinner after a prompt. */
  resume(): void {
    this.#paused = false;
    this.#syncTimer();
  }

  #syncTimer(): void {
    if (this.#paused) return;
    if (this.#tty && this.#running.size > 0 && !this.#timer) {
      this.#timer = setInterval(() => this.#drawSpinner(), 80);
    } else if (this.#running.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      this.#clearSpinner();
    }
  }

  /** Writes a status line to stderr without disturbing the spinner. */
  status(line: string): void {
    this.#breakLine();
    this.#clearSpinner();
    this.#err.write(`${printable(line)}\n`);
    this.#drawSpinner();
  }

  /** Renders a sub-agent's event as a status line indented by its depth. */
  #renderAgent(event: Extract<ChatTurnEvent, { agent: unknown }>): void {
    const indent = "  ".repeat(Math.max(1, event.agent.depth));
    const who = `[${event.agent.template} ${event.agent.id.slice(0, 8)}]`;
    switch (event.type) {
      case "agent_started":
        this.status(`${indent}↳ ${who} started: ${clip(event.task, 100)}`);
        return;
      case "agent_finished":
        this.status(
          `${indent}↲ ${who} ${event.status} · ${event.usage.turns} turns · ${event.usage.toolCalls} tool calls · ${formatDuration(event.usage.durationMs)}`,
        );
        return;
      case "tool_call_completed":
        this.status(`${indent}  → ${event.name} ${shortArguments(event.arguments)}`.trimEnd());
        return;
      case "tool_result": {
        const outcome = event.ok ? "ok" : `${event.error.code}: ${event.error.message.split("\n")[0]?.slice(0, 120)}`;
        this.status(
          `${indent}  ${event.ok ? "✓" : "✗"} ${event.name} · ${outcome} · ${formatDuration(event.durationMs)}`,
        );
        return;
      }
      case "error":
        this.status(`${indent}  error: ${event.message}`);
        return;
      default:
        return;
    }
  }

  render(event: ChatTurnEvent): void {
    if ("agent" in event) {
      this.#renderAgent(event);
      return;
    }
    switch (event.type) {
      case "text_delta":
        if (event.delta === "") return;
        this.#clearSpinner();
        this.#out.write(printable(event.delta, { multiline: true }));
        this.#midLine = !event.delta.endsWith("\n");
        return;
      case "tool_call_completed": {
        const args = shortArguments(event.arguments);
        this.#running.set(event.id, { name: event.name, args });
        if (this.#tty) {
          this.#breakLine();
          this.#drawSpinner();
          this.#syncTimer();
        } else {
          this.status(`→ ${event.name} ${args}`.trimEnd());
        }
        return;
      }
      case "tool_progress": {
        const running = this.#running.get(event.id);
        const note = event.progress.message ?? event.progress.kind;
        if (this.#tty && running) {
          running.note = note.slice(0, 40);
        } else {
          this.status(`  · ${event.name}: ${note}`);
        }
        return;
      }
      case "tool_result": {
        const running = this.#running.get(event.id);
        this.#running.delete(event.id);
        const args = running?.args ?? "";
        const outcome = event.ok ? "ok" : `${event.error.code}: ${event.error.message.split("\n")[0]?.slice(0, 160)}`;
        this.status(
          `${event.ok ? "✓" : "✗"} ${event.name} ${args}`.trimEnd() +
            ` · ${outcome} · ${formatDuration(event.durationMs)}`,
        );
        this.#syncTimer();
        return;
      }
      case "approval_requested":
        // On a terminal the prompt shows it; otherwise say what was asked (the answer follows).
        if (!this.#tty) this.status(`? ${event.tool} needs approval: ${event.reason}`);
        return;
      case "approval_resolved":
        this.status(
          `${event.decision.startsWith("allow") ? "✓" : "✗"} approval ${event.decision} for ${event.tool}${event.decidedBy ? ` (${event.decidedBy})` : ""}`,
        );
        return;
      case "error":
        this.status(`error: ${event.message}`);
        return;
      case "done":
        this.#running.clear();
        this.#syncTimer();
        this.#breakLine();
        if (event.reason === "aborted") this.status("Cancelled.");
        return;
      default:
        return;
    }
  }

  dispose(): void {
    this.#running.clear();
    this.#syncTimer();
  }
}

/**
 * Finds or creates the chat the turn runs in, applying --provider/--model/--cwd (bound by the context's binder,
 * as the operator: relative to the current directory). `created` says whether this run made it.
 */
async function resolveChat(
  ctx: AppContext,
  service: ChatService,
  opts: ChatOptions,
  parseProvider: (value: string) => ProviderName,
): Promise<{ id: string; created: boolean }> {
  if (opts.chat) {
    const existing = await ctx.chats.get(opts.user, opts.chat);
    if (existing) {
      ctx.binder.forChat(existing, opts.cwd, operator(opts.user));
      // A chat made by `toolhost call --chat` has no provider yet: give it the default one.
      const provider = opts.provider
        ? parseProvider(opts.provider)
        : existing.provider
          ? undefined
          : parseProvider(ctx.config.chatProvider ?? "openai");
      const providerChanges = provider !== undefined && provider !== existing.provider;
      const model =
        opts.model ??
        (providerChanges || !existing.model
          ? defaultModel(ctx, provider ?? parseProvider(existing.provider ?? "openai"))
          : undefined);
      if (provider || model) await service.updateChat(opts.user, opts.chat, { provider, model });
      return { id: existing.id, created: false };
    }
    if (await ctx.chats.exists(opts.chat)) throw new CliError(`Chat ${opts.chat} belongs to another user.`);
  }
  const provider = parseProvider(opts.provider ?? ctx.config.chatProvider ?? "openai");
  // Refusals name what the operator typed (--cwd) or "the current directory", as `toolhost call` does.
  const caller = operator(opts.user);
  const chat = await service.createChat(
    opts.user,
    {
      id: opts.chat,
      provider,
      model: opts.model ?? defaultModel(ctx, provider),
      workingDirectory: opts.cwd ?? process.cwd(),
    },
    opts.cwd === undefined ? { ...caller, argument: "the current directory" } : caller,
  );
  return { id: chat.id, created: true };
}

async function discardIfEmpty(ctx: AppContext, userId: string, chatId: string): Promise<void> {
  try {
    if ((await ctx.chats.messages(chatId)).length === 0) await ctx.chats.delete(userId, chatId);
  } catch (error) {
    ctx.logger.warn({ chatId, err: (error as Error)?.message ?? String(error) }, "could not discard an empty chat");
  }
}

function defaultModel(ctx: AppContext, provider: ProviderName): string {
  return ctx.config.chatModel ?? providerEntry(provider).defaultModel;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Registers `toolhost chat`. Exit codes: 0 answered, 1 provider/tool-loop failure or iteration limit,
 * 2 usage error (unknown provider, bad --cwd, missing API key), 130 cancelled with Ctrl-C, 143 with SIGTERM.
 */
export function registerChatCommand(program: Command): void {
  program
    .command("chat")
    .description("Run one chat turn: the model streams text and calls tools in the working directory.")
    .argument("[prompt...]", "the message (read from stdin when omitted and stdin is not a terminal)")
    .addOption(
      new Option("-p, --provider <name>", "provider wire format (default $TOOLHOST_CHAT_PROVIDER or openai)").choices([
        ...PROVIDER_NAMES,
      ]),
    )
    .option("-m, --model <id>", "model id (default $TOOLHOST_CHAT_MODEL or the provider's default)")
    .option("--cwd <dir>", "working directory the chat binds (default: the current directory)")
    .option("--chat <id>", "continue this chat (created with this id when it does not exist)")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .option("--max-iterations <n>", "model turns before the loop stops (default 10)")
    .option("--json", "print every loop event as a JSON line on stdout instead of rendering")
    .option("-y, --yes", "allow every call the approval policy asks about (without a terminal, asks are denied)")
    .addHelpText(
      "after",
      `\nProvider keys and endpoints come from the environment:\n${describeProviderVariables()
        .map((line) => `  ${line}`)
        .join(
          "\n",
        )}\nor from the config file $TOOLHOST_CONFIG (default $XDG_CONFIG_HOME/toolhost/config.json or ~/.config/toolhost/config.json): {"providers":{"openai":{"apiKey":"…"}}}\nDefault models: ${PROVIDER_TABLE.map(
        (entry) => `${entry.id}=${entry.defaultModel}`,
      ).join(", ")}\n`,
    )
    .action(async (words: string[], opts: ChatOptions) => {
      let prompt = words.join(" ").trim();
      if (!prompt && !process.stdin.isTTY) prompt = (await readStdin()).trim();
      if (!prompt)
        throw new CliError('Nothing to send: pass a prompt, e.g. toolhost chat "what is in this directory?"');
      let maxIterations: number | undefined;
      if (opts.maxIterations !== undefined) {
        maxIterations = Number(opts.maxIterations);
        if (!Number.isInteger(maxIterations) || maxIterations < 1 || maxIterations > 1000) {
          throw new CliError("--max-iterations must be an integer from 1 to 1000.");
        }
      }

      const [{ ChatService }, { parseProvider }] = await Promise.all([
        import("../../app/chat-service.js"),
        import("../../app/chat-types.js"),
      ]);
      const { cliResponder } = await import("../approval-prompt.js");
      const ctx = await createAppContext();
      // External MCP servers connect in the background; the turn does not wait for them.
      await importMcpTools(ctx, false);
      const renderer = opts.json ? undefined : new ChatRenderer(process.stdout, process.stderr);
      const controller = new AbortController();
      let stoppedBy: StopSignal | undefined;
      let removeStopHandlers = () => {};
      let createdChat: string | undefined;
      try {
        const service = new ChatService({
          chats: ctx.chats,
          runtime: ctx.runtime,
          logger: ctx.logger,
          binder: ctx.binder,
          maxIterations,
          agents: ctx.agents,
          approvals: ctx.approvals,
        });
        const resolved = await resolveChat(ctx, service, opts, parseProvider);
        const chatId = resolved.id;
        createdChat = resolved.created ? chatId : undefined;
        // Asks are prompted on a terminal; without one they are denied unless --yes.
        const responder = cliResponder({
          yes: opts.yes === true,
          interactive: Boolean(process.stdin.isTTY && process.stderr.isTTY),
          pause: () => renderer?.pause(),
          resume: () => renderer?.resume(),
        });
        const turn = await service.prepareTurn(opts.user, chatId, prompt, { responder });
        // Ctrl-C or SIGTERM cancels the turn (model stream and running tools); the database closes after the tools
        // stopped and their audit lines are written. A second signal quits at once.
        removeStopHandlers = onStopSignals((signal) => {
          stoppedBy = signal;
          controller.abort();
          renderer?.status(`Cancelling… (${signal === "SIGINT" ? "Ctrl-C" : signal} again to quit now)`);
        });
        let reason = "error";
        for await (const event of turn.run(controller.signal)) {
          if (opts.json) process.stdout.write(`${JSON.stringify(event)}\n`);
          else renderer?.render(event);
          if (event.type === "done") reason = event.reason;
        }
        const kept = !createdChat || (await ctx.chats.messages(chatId)).length > 0;
        if (!opts.json && kept)
          process.stderr.write(`(chat ${printable(chatId)}; continue with --chat ${printable(chatId)})\n`);
        process.exitCode = reason === "text" ? 0 : reason === "aborted" ? SIGNAL_EXIT_CODE[stoppedBy ?? "SIGINT"] : 1;
      } catch (error) {
        if (error instanceof ToolError && error.code !== "execution_failed") throw new CliError(error.message);
        throw error;
      } finally {
        renderer?.dispose();
        // A chat this run created whose first turn stored nothing (no key, provider error, cancel) is not kept.
        if (createdChat) await discardIfEmpty(ctx, opts.user, createdChat);
        await ctx.close();
        removeStopHandlers();
      }
    });
}
