/**
 * `toolhost audit`: the audit log of every tool call (who, tool, redacted arguments, working directory, outcome,
 * approval decision and who made it) and every settings change (who changed what for whom), newest first, filtered
 * by user, tool, kind and time. `toolhost approvals`: list the pending asks and answer one from the terminal.
 */

import type { Command } from "commander";
import { parseTimeBound, TIME_BOUND_RULE } from "../../app/time-bound.js";
import { LOCAL_USER } from "../../core/config.js";
import { withContext } from "../app-context.js";
import { parseUserId } from "../options.js";
import { CliError, clip, print, table } from "../util.js";

/** Parses a time option: ISO-8601, or a duration back from now such as 15m, 2h, 7d. */
export function parseTimeOption(value: string, name: string): string {
  const time = parseTimeBound(value);
  if (time === undefined) throw new CliError(`${name} must be ${TIME_BOUND_RULE}.`);
  return time;
}

const short = (value: unknown, max = 60): string =>
  clip(typeof value === "string" ? value : JSON.stringify(value ?? null), max);

/** Registers `audit`. */
export function registerAuditCommand(program: Command): void {
  program
    .command("audit")
    .description("Show the audit log of tool calls and settings changes, newest first.")
    .option("-u, --user <name>", "only this user's entries", parseUserId)
    .option("-t, --tool <name>", "only this tool's entries")
    .option("--kind <kind>", "tool_call or settings_change")
    .option("--since <time>", "entries at or after this time (ISO-8601, or 15m / 2h / 7d ago)")
    .option("--until <time>", "entries before this time")
    .option("-n, --limit <n>", "how many entries (1–1000)", "50")
    .option("--json", "print JSON")
    .action(
      async (opts: {
        user?: string;
        tool?: string;
        kind?: string;
        since?: string;
        until?: string;
        limit: string;
        json?: boolean;
      }) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
          throw new CliError("--limit must be an integer from 1 to 1000.");
        if (opts.kind !== undefined && opts.kind !== "tool_call" && opts.kind !== "settings_change")
          throw new CliError("--kind must be tool_call or settings_change.");
        const since = opts.since ? parseTimeOption(opts.since, "--since") : undefined;
        const until = opts.until ? parseTimeOption(opts.until, "--until") : undefined;
        await withContext(async (ctx) => {
          const entries = await ctx.audit.list({
            userId: opts.user,
            tool: opts.tool,
            kind: opts.kind as "tool_call" | "settings_change" | undefined,
            since,
            until,
            limit,
          });
          if (opts.json) return print({ entries });
          print(
            table([
              ["TIME", "KIND", "USER", "BY", "TOOL", "OUTCOME", "APPROVAL", "MS", "WHAT"],
              ...entries.map((e) => [
                e.createdAt,
                e.kind,
                e.userId,
                e.kind === "settings_change" ? (e.actor ?? "-") : (e.approvedBy ?? "-"),
                e.tool,
                e.kind === "settings_change"
                  ? "-"
                  : `${e.outcome ?? e.termination}${e.errorCode ? ` ${e.errorCode}` : ""}`,
                e.approval ?? "-",
                String(e.durationMs),
                short(
                  e.kind === "settings_change" ? (e.details as { new?: unknown })?.new : (e.command ?? e.arguments),
                ),
              ]),
            ]),
          );
        });
      },
    );
}

/** Registers `approvals list|allow|deny`. */
export function registerApprovalsCommand(program: Command): void {
  const approvals = program.command("approvals").description("List pending approval asks and answer them.");
  approvals
    .command("list")
    .description("A user's pending asks, oldest first.")
    .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER)
    .option("--chat <id>", "only this chat's")
    .option("--json", "print JSON")
    .action(async (opts: { user: string; chat?: string; json?: boolean }) =>
      withContext(async (ctx) => {
        const pending = await ctx.approvals.listPending(opts.user, opts.chat);
        if (opts.json) return print({ approvals: pending.map(({ hmac: _h, argsHash: _a, ...rest }) => rest) });
        print(
          table([
            ["ID", "CHAT", "TOOL", "EXPIRES", "REASON"],
            ...pending.map((a) => [a.id, a.chatId ?? "-", a.tool, a.expiresAt, short(a.reason, 80)]),
          ]),
        );
      }),
    );
  for (const [name, decision, help] of [
    ["allow", "allow_once", "Allow a pending call once (--always stores an allow rule)."],
    ["deny", "deny", "Deny a pending call (--message tells the model why)."],
  ] as const) {
    const command = approvals
      .command(name)
      .description(help)
      .argument("<id>", "approval id")
      .option("-u, --user <name>", "user id", parseUserId, LOCAL_USER);
    // Only an allow can be stored as a rule: `deny --always` is refused as an unknown option, not ignored.
    if (decision === "allow_once") command.option("--always", "also store an allow rule");
    command
      .option("-m, --message <text>", "words for the model")
      .action(async (id: string, opts: { user: string; always?: boolean; message?: string }) =>
        withContext(async (ctx) => {
          const { cliActor } = await import("../../app/approvals/service.js");
          const record = await ctx.approvals.decide(opts.user, id, {
            decision: decision === "allow_once" && opts.always ? "allow_always" : decision,
            ...(opts.message ? { message: opts.message } : {}),
            decidedBy: cliActor(),
            // The CLI runs with the data directory's permissions: its operator is an admin.
            admin: true,
          });
          print({ id: record.id, status: record.status, decision: record.decision });
        }),
      );
  }
}
