/**
 * `toolhost mcp-servers list|add|remove|status`: the external MCP servers whose tools Toolhost imports. `list` shows
 * the configured servers (config file and database) without connecting; `status` connects to each (in parallel,
 * within its connect timeout) and prints its state, last error, stderr tail and imported tools; `add` stores a
 * server (a command after `--`, or `--url`) and checks it connects; `remove` deletes a stored one.
 */
import type { Command } from "commander";
import type { AppContext } from "../../app/context.js";
import { createAppContext } from "../app-context.js";
import { CliError, print, table } from "../util.js";

async function withServers<T>(
  fn: (ctx: AppContext, service: import("../../mcp/client/index.js").McpServersService) => Promise<T>,
): Promise<T> {
  const { createMcpClientManager, McpServersService } = await import("../../mcp/client/index.js");
  const ctx = await createAppContext();
  const manager = createMcpClientManager(ctx);
  try {
    return await fn(ctx, new McpServersService(ctx, manager));
  } finally {
    await manager.close();
    await ctx.close();
  }
}

function parsePairs(pairs: string[], what: string): Record<string, string> | undefined {
  if (pairs.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf(pair.includes("=") ? "=" : ":");
    if (at <= 0) throw new CliError(`${what} "${pair}" must look like NAME=VALUE.`);
    out[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  return out;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** Registers `mcp-servers` and its subcommands on the program. */
export function registerMcpServersCommand(program: Command): void {
  const group = program
    .command("mcp-servers")
    .description("Manage the external MCP servers whose tools Toolhost imports (as mcp__<server>__<tool>).");

  group
    .command("list")
    .description("List the configured MCP servers (config file `mcpServers` and stored ones) without connecting.")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) =>
      withServers(async (ctx) => {
        const { loadAllServers } = await import("../../mcp/client/index.js");
        const { McpServerRepository } = await import("../../storage/mcp-server-repository.js");
        const loaded = await loadAllServers(new McpServerRepository(ctx.database.db));
        for (const error of loaded.errors) process.stderr.write(`warning: ${error.name}: ${error.message}\n`);
        const servers = loaded.servers.map(({ name, source, config }) => ({
          name,
          source,
          transport: config.command ? "stdio" : "http",
          target: config.command ? [config.command, ...(config.args ?? [])].join(" ") : (config.url ?? ""),
          trusted: config.trusted === true,
          disabled: config.disabled === true,
        }));
        if (opts.json) return print({ servers });
        if (servers.length === 0)
          return print("No MCP servers configured. Add one: toolhost mcp-servers add NAME -- COMMAND [ARGS...]");
        print(
          table([
            ["NAME", "SOURCE", "TRANSPORT", "TRUSTED", "TARGET"],
            ...servers.map((s) => [s.name, s.source, s.transport, s.trusted ? "yes" : "no", s.target]),
          ]),
        );
      }),
    );

  group
    .command("status")
    .description("Connect to the MCP servers (or one) and print their state, last error, stderr tail and tools.")
    .argument("[name]", "only this server")
    .option("--json", "print JSON")
    .action(async (name: string | undefined, opts: { json?: boolean }) =>
      withServers(async (_ctx, service) => {
        await service.manager.start();
        await service.manager.settled();
        const all = name ? [service.get(name)] : service.list();
        if (opts.json) return print({ servers: all });
        for (const s of all) {
          print(`${s.name}: ${s.state}${s.lastError ? ` — ${s.lastError}` : ""}`);
          if (s.tools.length > 0) print(`  tools: ${s.tools.map((t) => t.name).join(", ")}`);
          for (const warning of s.warnings) print(`  warning: ${warning}`);
          if (s.stderrTail.trim()) print(`  stderr:\n${s.stderrTail.trimEnd().replace(/^/gm, "    ")}`);
        }
        if (all.some((s) => s.state === "failed")) process.exitCode = 1;
      }),
    );

  group
    .command("add")
    .description(
      "Store an MCP server: `add NAME -- COMMAND [ARGS...]` (stdio) or `add NAME --url URL` (Streamable HTTP).",
    )
    .argument("<name>", "server name (tools become mcp__<name>__<tool>)")
    .argument("[command...]", "the command and its arguments, after --")
    .option("--url <url>", "Streamable HTTP endpoint instead of a command")
    .option("-e, --env <NAME=VALUE>", "environment variable for the server (repeatable)", collect, [])
    .option("--header <NAME=VALUE>", "HTTP header for the server (repeatable)", collect, [])
    .option("--cwd <dir>", "working directory of the server process")
    .option("--trusted", "its tools default to approval allow instead of ask")
    .option("--connect-timeout-ms <ms>", "connect + initialize + list budget (default 10000)")
    .option("--call-timeout-ms <ms>", "per-call budget (default 60000)")
    .action(
      async (
        name: string,
        command: string[],
        opts: {
          url?: string;
          env: string[];
          header: string[];
          cwd?: string;
          trusted?: boolean;
          connectTimeoutMs?: string;
          callTimeoutMs?: string;
        },
      ) => {
        if (command.length === 0 && opts.url === undefined) {
          throw new CliError(
            "Give the server's command (after --) or --url. E.g. toolhost mcp-servers add NAME -- npx -y SERVER, or toolhost mcp-servers add NAME --url https://host/mcp.",
          );
        }
        if (command.length > 0 && opts.url !== undefined) {
          throw new CliError("Give either a command (after --) or --url, not both.");
        }
        const config: Record<string, unknown> = {};
        if (opts.url) config.url = opts.url;
        else {
          config.command = command[0];
          if (command.length > 1) config.args = command.slice(1);
        }
        const env = parsePairs(opts.env, "--env");
        if (env) config.env = env;
        const headers = parsePairs(opts.header, "--header");
        if (headers) config.headers = headers;
        if (opts.cwd) config.cwd = opts.cwd;
        if (opts.trusted) config.trusted = true;
        if (opts.connectTimeoutMs !== undefined) config.connectTimeoutMs = Number(opts.connectTimeoutMs);
        if (opts.callTimeoutMs !== undefined) config.callTimeoutMs = Number(opts.callTimeoutMs);
        await withServers(async (_ctx, service) => {
          await service.add(name, config);
          // Checks the new server only: the others are not started for it.
          await service.manager.start({ only: (server) => server === name });
          await service.manager.settled();
          const status = service.get(name);
          print(`Added ${name}: ${status.state}${status.lastError ? ` — ${status.lastError}` : ""}`);
          if (status.tools.length > 0) {
            print(`  tools (disabled until enabled in the settings): ${status.tools.map((t) => t.name).join(", ")}`);
          }
          if (status.state === "failed") {
            // Stored all the same (a server may be down for now): say so, or the next `add` meets a taken name.
            print(
              `  It is stored all the same: fix the cause, then check it with toolhost mcp-servers status ${name}, or remove it with toolhost mcp-servers remove ${name}.`,
            );
            process.exitCode = 1;
          }
        });
      },
    );

  group
    .command("remove")
    .description("Remove a stored MCP server (servers in the config file are removed by editing it).")
    .argument("<name>")
    .action(async (name: string) =>
      withServers(async (_ctx, service) => {
        await service.remove(name);
        print(`Removed ${name}.`);
      }),
    );
}
