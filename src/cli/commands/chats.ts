/**
 * `toolhost chats list|rename|delete`: a user's chats from the terminal (the same store the HTTP API and
 * `toolhost chat` use). `list` pages through them, most recently active first.
 */
import type { Command } from "commander";
import { LOCAL_USER } from "../../core/config.js";
import { withContext } from "../app-context.js";
import { parseUserId } from "../options.js";
import { CliError, printable, table } from "../util.js";

/** Registers `chats` and its subcommands on the program. */
export function registerChatsCommand(program: Command): void {
  const chats = program.command("chats").description("List, rename and delete chats.");

  chats
    .command("list")
    .description("List a user's chats, most recently active first.")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .option("-n, --limit <n>", "how many (1–1000)", "50")
    .option("--cursor <cursor>", "continue after the page that printed this cursor")
    .option("--json", "print JSON ({ chats, nextCursor })")
    .action(async (opts: { user: string; limit: string; cursor?: string; json?: boolean }) =>
      withContext(async (ctx) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
          throw new CliError("--limit must be an integer from 1 to 1000.");
        const page = await ctx.chats.page(opts.user, { limit, cursor: opts.cursor });
        if (opts.json) return void process.stdout.write(`${JSON.stringify(page, null, 2)}\n`);
        if (page.chats.length === 0) return void process.stdout.write(`No chats for "${opts.user}".\n`);
        process.stdout.write(
          `${table([
            ["ID", "UPDATED", "PROVIDER", "MODEL", "DIRECTORY", "TITLE"],
            ...page.chats.map((c) => [
              c.id,
              c.updatedAt,
              c.provider ?? "-",
              c.model ?? "-",
              c.workingDirectory ?? "-",
              c.title ?? "-",
            ]),
          ])}\n`,
        );
        if (page.nextCursor) process.stderr.write(`(more: --cursor ${page.nextCursor})\n`);
      }),
    );

  chats
    .command("rename")
    .description("Set a chat's title.")
    .argument("<id>", "chat id")
    .argument("<title...>", "the new title")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .action(async (id: string, words: string[], opts: { user: string }) =>
      withContext(async (ctx) => {
        const title = words.join(" ").trim();
        if (!title || title.length > 200) throw new CliError("The title must have 1–200 characters.");
        const renamed = await ctx.chats.rename(opts.user, id, title);
        if (!renamed) throw new CliError(`No chat "${id}" for user "${opts.user}" (see \`toolhost chats list\`).`, 1);
        process.stdout.write(`Renamed chat ${printable(id)} to "${printable(title)}".\n`);
      }),
    );

  chats
    .command("delete")
    .description("Delete a chat with its messages.")
    .argument("<id>", "chat id")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .action(async (id: string, opts: { user: string }) =>
      withContext(async (ctx) => {
        const { ChatService } = await import("../../app/chat-service.js");
        const service = new ChatService({ chats: ctx.chats, runtime: ctx.runtime, logger: ctx.logger });
        const deleted = await service.deleteChat(opts.user, id);
        if (!deleted) throw new CliError(`No chat "${id}" for user "${opts.user}" (see \`toolhost chats list\`).`, 1);
        process.stdout.write(`Deleted chat ${printable(id)}.\n`);
      }),
    );
}
