/**
 * The `toolhost` command line parsed by commander: serve, tools, call, settings, token, audit, chat, mcp, … (./main.ts
 * runs the usual forms of `call` without it). Every command opens the same data directory as the server
 * (TOOLHOST_DATA_DIR, else the XDG data directory ~/.local/share/toolhost), wherever it runs, so a setting made in one
 * is seen by the other.
 */
import { userInfo } from "node:os";
import { Command, Option } from "commander";
import { LOCAL_USER } from "../core/config.js";
import { VERSION } from "../version.js";
import { createAppContext, withContext } from "./app-context.js";
import { type CallOptions, runCall } from "./commands/call.js";
import { importMcpTools } from "./mcp-tools.js";
import { parseUserId } from "./options.js";
import {
  asUsageError,
  CliError,
  type CommandName,
  errorText,
  onStopSignals,
  operator,
  parseAssignment,
  print,
  table,
} from "./util.js";

/** The operating-system user running the CLI (recorded as who changed a setting). */
function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return "unknown";
  }
}

/**
 * Builds the program; exported for tests and for commands contributed by other modules. With `only`, just that
 * command is defined (or none, for ""): what main() does when the command line names one, since building every
 * command's options costs a short process (`toolhost call …`, `toolhost --version`) more than running it.
 */
export async function buildProgram(only?: CommandName | ""): Promise<Command> {
  const wanted = (name: CommandName) => only === undefined || only === name;
  const program = new Command();
  // Parse errors throw instead of exiting, so main() can give them the usage exit code (2).
  program.exitOverride();
  // Commander's error lines quote the bad argument: escaped and cut like every other error line.
  program.configureOutput({ writeErr: (text) => process.stderr.write(errorText(text)) });
  program
    .name("toolhost")
    .description("Tool-calling runtime for LLM apps: built-in tools, per-user settings, tool loop, HTTP API, MCP.")
    .version(VERSION)
    .showHelpAfterError("(run with --help for usage)")
    .addHelpText(
      "after",
      "\nEnvironment:\n  TOOLHOST_DATA_DIR      data directory (default $XDG_DATA_HOME/toolhost or ~/.local/share/toolhost; SQLite file toolhost.db inside)\n  TOOLHOST_DATABASE_URL  postgres://… to use PostgreSQL instead of SQLite\n  TOOLHOST_LOG_LEVEL     log level on stderr: fatal, error, warn, info, debug, trace (default warn)\n  TOOLHOST_CONFIG        config file: provider keys, data sources, MCP servers (default $XDG_CONFIG_HOME/toolhost/config.json or ~/.config/toolhost/config.json)\n  TOOLHOST_ADMIN_USERS   users who may widen tool settings and read the audit log over HTTP (default local)\n  TOOLHOST_CHAT_ROOTS    colon-separated directories chats and tool calls may bind\n  OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY (+ *_BASE_URL)  provider keys for toolhost chat\n\nExit codes: 0 success, 1 tool or runtime failure, 2 usage error, 130/143 cancelled by Ctrl-C/SIGTERM (chat, call).\n",
    );

  if (wanted("serve")) {
    program
      .command("serve")
      .description("Start the HTTP service (binds 127.0.0.1; prints a token on first start).")
      .addOption(new Option("-p, --port <port>", "port (0 picks a free one; default $TOOLHOST_PORT, else 8787)"))
      .addOption(new Option("-H, --host <host>", "interface to bind (default $TOOLHOST_HOST, else 127.0.0.1)"))
      .action(async (opts: { port?: string; host?: string }) => {
        const { readConfig } = await import("../core/config.js");
        const config = readConfig();
        opts.port ??= config.port;
        const port = Number(opts.port);
        if (!Number.isInteger(port) || port < 0 || port > 65535)
          throw new CliError(`--port must be 0–65535, got "${opts.port}".`);
        const { startServer } = await import("../server/serve.js");
        const ctx = await createAppContext();
        const host = opts.host ?? config.host;
        const server = await startServer(ctx, { port, host }).catch(async (error: unknown) => {
          await ctx.close();
          throw listenError(error, {
            host,
            port,
            hostFrom: opts.host !== undefined ? "--host" : "TOOLHOST_HOST",
          });
        });
        // SIGTERM or Ctrl-C: stop accepting, cancel running chats and tools, wait (bounded) for their audit lines and
        // stored steps, close the database, exit 0. A second signal exits at once.
        onStopSignals(() => {
          void server.shutdown().then(
            () => process.exit(0),
            (error) => {
              process.stderr.write(`error: shutting down: ${(error as Error)?.message ?? String(error)}\n`);
              process.exit(1);
            },
          );
        });
      });
  }

  if (wanted("tools")) {
    program
      .command("tools")
      .description(
        "List the tools with their enabled state (yes, no, or unavailable: enabled but not usable on this host, with why) and category for a user.",
      )
      .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
      .option("--json", "print JSON instead of a table")
      .action(async (opts: { user: string; json?: boolean }) =>
        withContext(async (ctx) => {
          await importMcpTools(ctx, true);
          const tools = await ctx.settings.list(opts.user);
          if (opts.json) return print({ tools });
          // An enabled tool that cannot work on this host (e.g. generate_image without a provider key) is not offered
          // to models: say so, and why, instead of "yes".
          const state = (t: (typeof tools)[number]) =>
            !t.enabled ? "no" : t.unavailableReason ? "unavailable" : "yes";
          print(
            table([
              ["NAME", "ENABLED", "CATEGORY", "TITLE"],
              ...tools.map((t) => [t.name, state(t), t.category, t.title]),
            ]),
          );
          const unavailable = tools.filter((t) => t.enabled && t.unavailableReason);
          if (unavailable.length > 0) {
            print("\nEnabled but unavailable here (not offered to models):");
            for (const t of unavailable) print(`  ${t.name}: ${t.unavailableReason}`);
          }
        }),
      );
  }

  if (wanted("call")) {
    program
      .command("call")
      .description(
        "Run a tool and print its JSON result (exit 0 on success, 1 on a classified tool error, 2 when the arguments are not a JSON object).",
      )
      .argument("<tool>", "tool name, e.g. get_current_datetime")
      .argument("[json]", "arguments as a JSON object", "{}")
      .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
      .option("--cwd <dir>", "bind this working directory, exactly as a chat does")
      .option("--chat <id>", "run in this chat's context (created, bound to --cwd, when it does not exist)")
      .option("-y, --yes", "allow calls the approval policy asks about (without a terminal they are denied)")
      .option("--approval <id>", "run a call approved earlier (POST /api/approvals/:id) with exactly its arguments")
      .action((toolName: string, json: string, opts: CallOptions) => runCall(toolName, json, opts));
  }

  if (wanted("settings")) {
    const settings = program.command("settings").description("Show or change a user's tool settings.");
    settings
      .command("get")
      .description(
        "Print a tool's effective settings: one line per value (marked when it is the default or locked); --json the same as JSON, --full the whole descriptor (descriptions, ranges, defaults, definition).",
      )
      .argument("<tool>")
      .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
      .option("--json", "print the values as JSON")
      .option("--full", "print the full descriptor as JSON")
      .action(async (toolName: string, opts: { user: string; json?: boolean; full?: boolean }) =>
        withContext(async (ctx) => {
          if (toolName.startsWith("mcp__")) await importMcpTools(ctx, true, toolName);
          const d = await ctx.settings.get(opts.user, toolName);
          if (opts.full) return print(d);
          const { name, enabled, lockedKeys, version, parameters, external, unavailableReason } = d;
          if (opts.json) return print({ name, enabled, lockedKeys, version, parameters, external, unavailableReason });
          const marks = (key: string, isDefault: boolean) =>
            [isDefault ? "default" : "", lockedKeys.includes(key) ? "locked by an admin" : ""].filter(Boolean);
          const note = (list: string[]) => (list.length ? `  (${list.join(", ")})` : "");
          const lines = [
            `${name}: ${enabled ? "enabled" : "disabled"}${note(marks("enabled", false))}`,
            ...(unavailableReason ? [`  not offered to models: ${unavailableReason}`] : []),
            ...Object.entries(parameters).map(
              ([key, value]) =>
                `  ${key} = ${JSON.stringify(value)}${note(marks(key, JSON.stringify(value) === JSON.stringify(d.defaultParameters[key])))}`,
            ),
          ];
          print(lines.join("\n"));
        }),
      );
    settings
      .command("set")
      .description("Enable/disable a tool and set parameters (values parsed as JSON where they parse; null resets).")
      .argument("<tool>")
      .argument("[assignments...]", "name=value pairs, e.g. timeoutSeconds=60")
      .option("--enable", "enable the tool")
      .option("--disable", "disable the tool")
      .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
      .action(
        async (
          toolName: string,
          assignments: string[],
          opts: { enable?: boolean; disable?: boolean; user: string },
        ) => {
          if (opts.enable && opts.disable) throw new CliError("Use either --enable or --disable, not both.");
          const parameters = Object.fromEntries(assignments.map(parseAssignment));
          const enabled = opts.enable ? true : opts.disable ? false : undefined;
          if (enabled === undefined && assignments.length === 0)
            throw new CliError("Nothing to change: pass --enable, --disable or name=value pairs.");
          await withContext(async (ctx) => {
            if (toolName.startsWith("mcp__")) await importMcpTools(ctx, true, toolName);
            // The CLI runs on the server with the data directory's permissions: its operator is an admin.
            const descriptor = await ctx.settings.update(
              opts.user,
              toolName,
              { ...(enabled === undefined ? {} : { enabled }), ...(assignments.length ? { parameters } : {}) },
              // What the operator sets for a non-admin is locked against that user; for an admin it is not.
              { admin: true, lock: !ctx.admins.isAdmin(opts.user), actor: `cli:${osUser()}` },
            );
            print({
              name: descriptor.name,
              enabled: descriptor.enabled,
              parameters: descriptor.parameters,
              lockedKeys: descriptor.lockedKeys,
            });
          });
        },
      );

    settings
      .command("unlock")
      .description(
        "Remove admin locks from a user's settings of a tool (all locks, or the named keys; values stay, the user may change them again).",
      )
      .argument("<tool>")
      .argument("[keys...]", 'keys to unlock ("enabled" or parameter names); none: every lock')
      .requiredOption("-u, --user <name>", "whose locks to remove", parseUserId)
      .action(async (toolName: string, keys: string[], opts: { user: string }) =>
        withContext(async (ctx) => {
          if (toolName.startsWith("mcp__")) await importMcpTools(ctx, true, toolName);
          const { descriptor, unlocked } = await ctx.settings.unlock(opts.user, toolName, keys, {
            actor: `cli:${osUser()}`,
          });
          print({ name: descriptor.name, unlocked, lockedKeys: descriptor.lockedKeys });
        }),
      );
  }

  // The other commands' modules load only when their command is defined (chat's pulls in the provider table).
  if (wanted("token")) (await import("./commands/token.js")).registerTokenCommand(program);
  if (wanted("audit")) (await import("./commands/audit.js")).registerAuditCommand(program);
  if (wanted("approvals")) (await import("./commands/audit.js")).registerApprovalsCommand(program);
  if (wanted("chat")) (await import("./commands/chat.js")).registerChatCommand(program);
  if (wanted("chats")) (await import("./commands/chats.js")).registerChatsCommand(program);
  if (wanted("doctor")) (await import("./commands/doctor.js")).registerDoctorCommand(program);
  if (wanted("agents")) (await import("./commands/agents.js")).registerAgentsCommand(program);
  if (wanted("mcp-servers")) (await import("./commands/mcp-servers.js")).registerMcpServersCommand(program);
  if (wanted("data-sources")) (await import("./commands/data-sources.js")).registerDataSourcesCommand(program);

  if (wanted("mcp")) {
    program
      .command("mcp")
      .description("Serve the user's enabled tools over MCP on stdio (for desktop assistants, IDEs, agent frameworks).")
      .option("-u, --user <name>", "user whose tool settings apply", parseUserId, LOCAL_USER)
      .option("--cwd <dir>", "working directory bound for path-taking tools (default: the current directory)")
      .option("--poll-ms <ms>", "how often to re-check the tool list for changes made elsewhere (ms; default 2000)")
      .action(async (opts: { user: string; cwd?: string; pollMs?: string }) => {
        const { serveMcpStdio, TOOL_LIST_POLL_MS: range } = await import("../mcp/server/stdio.js");
        const pollMs = opts.pollMs === undefined ? range.default : Number(opts.pollMs);
        if (!Number.isInteger(pollMs) || pollMs < range.min || pollMs > range.max)
          throw new CliError(
            `--poll-ms must be an integer from ${range.min} to ${range.max} (default ${range.default}).`,
          );
        const ctx = await createAppContext();
        // Bind the directory before any external MCP server is started: a refused --cwd then ends the process
        // instead of leaving it running on the servers' connections.
        let workingDirectory: string | null;
        try {
          workingDirectory = asUsageError(() => ctx.binder.bind(opts.cwd ?? process.cwd(), operator(opts.user)));
        } catch (error) {
          await ctx.close();
          throw error;
        }
        // Imported tools join as their servers connect; the connection does not wait for them (list_changed follows).
        await importMcpTools(ctx, false);
        const served = serveMcpStdio({
          runtime: ctx.runtime,
          approvals: ctx.approvals,
          userId: opts.user,
          workingDirectory,
          bindingHint: "The directory was chosen when the server was started (toolhost mcp --cwd DIR).",
          pollMs,
          maxMessageBytes: ctx.config.maxBodyBytes,
          onClose: () => void ctx.close(),
        });
        // SIGTERM or Ctrl-C: cancel running tool calls, wait for their audit lines, close the database, exit 0.
        onStopSignals(() => {
          void served
            .close()
            .catch(() => {})
            .then(() => ctx.close())
            .then(
              () => process.exit(0),
              () => process.exit(1),
            );
        });
      });
  }

  return program;
}

/**
 * What `serve` says when it cannot listen: which option or variable to change, instead of the bare system error
 * (`getaddrinfo ENOTFOUND`, `listen EADDRINUSE`). Anything else is returned as it is. Exit code 1: the usage was
 * well-formed, the machine refused it.
 */
function listenError(error: unknown, where: { host: string; port: number; hostFrom: string }): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "EADDRINUSE") {
    return new CliError(
      `Port ${where.port} on ${where.host} is already in use. Stop what holds it, or pick another port with --port (or TOOLHOST_PORT; 0 picks a free one).`,
      1,
    );
  }
  if (code === "EACCES") {
    return new CliError(
      `Not allowed to listen on port ${where.port}${where.port > 0 && where.port < 1024 ? " (ports below 1024 need privileges)" : ""}. Pick another port with --port (or TOOLHOST_PORT).`,
      1,
    );
  }
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EADDRNOTAVAIL" || code === "EINVAL") {
    return new CliError(
      `Cannot listen on host "${where.host}" (${where.hostFrom}): ${code === "EADDRNOTAVAIL" ? "no interface of this machine has that address" : "it is not an address or name this machine can resolve"}. Use an address of this machine, such as 127.0.0.1 (the default) or 0.0.0.0 for every interface.`,
      1,
    );
  }
  return error;
}
