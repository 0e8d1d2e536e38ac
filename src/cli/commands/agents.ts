/**
 * `toolhost agents list|show|cancel|templates`: the user's sub-agents (optionally of one chat), one agent with
 * its status, usage, response and conversation, cancelling an agent with its descendants, and the templates.
 */
import type { Command } from "commander";
import type { AppContext } from "../../app/context.js";
import { LOCAL_USER } from "../../core/config.js";
import { withContext } from "../app-context.js";
import { parseUserId } from "../options.js";
import { CliError, clip, print, table } from "../util.js";

/** The error for an id that names none of the user's agents, saying which ids are accepted (exit 1). */
function noAgent(given: string, userId: string): CliError {
  return new CliError(
    `No agent "${clip(given, 80)}" for user ${userId}. Use an id from \`toolhost agents list\` (or its first 6+ characters).`,
    1,
  );
}

/** Registers `toolhost agents`. Exit codes: 0 success, 1 unknown agent or failure, 2 usage error. */
export function registerAgentsCommand(program: Command): void {
  const agents = program.command("agents").description("Sub-agents: list, show, cancel, and the templates.");

  agents
    .command("list")
    .description("The user's sub-agents, newest first.")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .option("--chat <id>", "only this chat's agents")
    .option("-n, --limit <n>", "how many (1–1000)", "50")
    .option("--json", "print JSON")
    .action(async (opts: { user: string; chat?: string; limit: string; json?: boolean }) =>
      withContext(async (ctx) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
          throw new CliError("--limit must be an integer from 1 to 1000.");
        }
        const list = await ctx.agents.list(opts.user, { chatId: opts.chat, limit });
        if (opts.json) return print({ agents: list.map(({ userId: _u, ...a }) => a) });
        print(
          table([
            ["ID", "STATUS", "DEPTH", "TEMPLATE", "TURNS", "TOKENS", "CHAT", "TASK"],
            ...list.map((a) => [
              a.id,
              a.status,
              String(a.depth),
              a.template,
              String(a.usage.turns),
              String(a.usage.inputTokens + a.usage.outputTokens),
              a.chatId ?? "-",
              clip(a.task, 60),
            ]),
          ]),
        );
      }),
    );

  agents
    .command("show")
    .description("One agent: status, usage, response and its conversation, as JSON.")
    .argument("<id>", "agent id from `toolhost agents list` (or its first 6+ characters)")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .action(async (id: string, opts: { user: string }) =>
      withContext(async (ctx) => {
        const agent = await ctx.agents.get(opts.user, await agentId(ctx, opts.user, id));
        if (agent?.kind !== "child") throw noAgent(id, opts.user);
        const { userId: _u, ...view } = agent;
        print(view);
      }),
    );

  agents
    .command("cancel")
    .description("Cancel an agent and all its descendants (their model streams and tool processes stop).")
    .argument("<id>", "agent id from `toolhost agents list` (or its first 6+ characters)")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .action(async (given: string, opts: { user: string }) =>
      withContext(async (ctx) => {
        const id = await agentId(ctx, opts.user, given);
        const agent = await ctx.agents.get(opts.user, id);
        if (agent?.kind !== "child") throw noAgent(given, opts.user);
        print(await ctx.agents.cancel(opts.user, id));
      }),
    );

  agents
    .command("templates")
    .description("The agent templates agent_spawn offers (built-in general, config file, templates directory).")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) =>
      withContext(async (ctx) => {
        const { summarizeTemplate } = await import("../../agents/templates.js");
        const templates = ctx.agents.templates.list().map(summarizeTemplate);
        if (opts.json) return print({ templates });
        print(
          table([
            ["ID", "PROVIDER", "MODEL", "TOOLS", "SOURCE", "DESCRIPTION"],
            ...templates.map((t) => [
              t.id,
              t.provider ?? "(parent's)",
              t.model ?? "(parent's)",
              t.tools ? t.tools.join(",") : "(parent's)",
              t.source,
              clip(t.description, 70),
            ]),
          ]),
        );
      }),
    );
}

/** Agents a prefix is looked up among (the user's most recent). */
const PREFIX_SEARCH_LIMIT = 1000;

/**
 * The id of the user's agent that `given` names: the id itself, or the one id among the user's agents that starts
 * with it (at least 6 characters, as `toolhost token` accepts). Throws CliError (exit 1) for a prefix that
 * matches several; an unknown id is returned as given (the caller reports it missing).
 */
async function agentId(ctx: AppContext, userId: string, given: string): Promise<string> {
  if ((await ctx.agents.get(userId, given)) !== undefined || given.length < 6) return given;
  const matches = (await ctx.agents.list(userId, { limit: PREFIX_SEARCH_LIMIT }))
    .map((a) => a.id)
    .filter((id) => id.startsWith(given));
  if (matches.length > 1)
    throw new CliError(`Agent id prefix "${given}" matches ${matches.length} agents; give more of the id.`, 1);
  return matches[0] ?? given;
}
