/**
 * `toolhost token create|list|revoke|rotate`: API bearer tokens, stored hashed. A token's plaintext is printed
 * once, when it is created or rotated; listings show ids, users, labels, and when each was created and last used.
 */
import type { Command } from "commander";
import { LOCAL_USER } from "../../core/config.js";
import { withContext } from "../app-context.js";
import { parseUserId } from "../options.js";
import { CliError, table } from "../util.js";

/** Registers `token` and its subcommands on the program. */
export function registerTokenCommand(program: Command): void {
  const token = program.command("token").description("Create, list, revoke and rotate API tokens.");

  token
    .command("create")
    .description("Create a bearer token for a user and print it (shown only once; stored hashed).")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .option("--label <text>", "a note to remember the token by (e.g. the laptop or script using it)")
    .option("--expires-in <time>", "lifetime: a number and m, h, d or w (e.g. 30d); default: never expires")
    .action(async (opts: { user: string; label?: string; expiresIn?: string }) => {
      const { parseTokenLifetime } = await import("../../storage/token-repository.js");
      let expiresInMs: number | undefined;
      try {
        expiresInMs = opts.expiresIn === undefined ? undefined : parseTokenLifetime(opts.expiresIn);
      } catch (error) {
        throw new CliError(`--expires-in: ${(error as Error).message}`, 2);
      }
      await withContext(async (ctx) => {
        const issued = await ctx.tokens.create(opts.user, { label: opts.label ?? null, expiresInMs });
        if (expiresInMs !== undefined) {
          const { expiresAt } = await ctx.tokens.find(issued.id);
          process.stderr.write(`Token ${issued.id} of "${opts.user}" expires at ${expiresAt}.\n`);
        }
        process.stdout.write(`${issued.token}\n`);
      });
    });

  token
    .command("list")
    .description(
      "List tokens (ids, each token's first characters, users, labels, created, last-used and expiry times; never the tokens themselves).",
    )
    .option("-u, --user <name>", "only this user's tokens", parseUserId)
    .option("--json", "print JSON")
    .action(async (opts: { user?: string; json?: boolean }) =>
      withContext(async (ctx) => {
        const tokens = await ctx.tokens.list(opts.user);
        if (opts.json) return void process.stdout.write(`${JSON.stringify({ tokens }, null, 2)}\n`);
        if (tokens.length === 0) {
          process.stdout.write(
            `No tokens${opts.user ? ` for "${opts.user}"` : ""}. Create one with \`toolhost token create --user NAME\`.\n`,
          );
          return;
        }
        const nowIso = new Date().toISOString();
        const expiry = (at: string | null) => (at === null ? "never" : at <= nowIso ? `expired ${at}` : at);
        process.stdout.write(
          `${table([
            ["ID", "TOKEN", "USER", "LABEL", "CREATED", "LAST USED", "EXPIRES"],
            ...tokens.map((t) => [
              t.id,
              t.prefix ? `${t.prefix}…` : "-",
              t.userId,
              t.label ?? "-",
              t.createdAt,
              t.lastUsedAt ?? "never",
              expiry(t.expiresAt),
            ]),
          ])}\n`,
        );
      }),
    );

  token
    .command("revoke")
    .description("Revoke a token: requests with it get 401 from now on.")
    .argument("<id>", "token id from `toolhost token list` (or its first 6+ characters)")
    .option("-u, --user <name>", "only look among this user's tokens", parseUserId)
    .action(async (id: string, opts: { user?: string }) =>
      withContext(async (ctx) => {
        const revoked = await ctx.tokens.revoke(id, opts.user);
        process.stdout.write(
          `Revoked token ${revoked.id} of "${revoked.userId}"${revoked.label ? ` (${revoked.label})` : ""}.\n`,
        );
      }),
    );

  token
    .command("rotate")
    .description("Replace a token by a new one for the same user and label; prints the new token once.")
    .argument("<id>", "token id from `toolhost token list` (or its first 6+ characters)")
    .option("-u, --user <name>", "only look among this user's tokens", parseUserId)
    .action(async (id: string, opts: { user?: string }) =>
      withContext(async (ctx) => {
        const rotated = await ctx.tokens.rotate(id, opts.user);
        process.stderr.write(
          `Token ${rotated.replaced.id} of "${rotated.replaced.userId}" no longer works; its replacement (id ${rotated.id}) is shown only this once:\n`,
        );
        process.stdout.write(`${rotated.token}\n`);
      }),
    );
}
