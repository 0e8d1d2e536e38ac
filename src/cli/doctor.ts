/**
 * `toolhost doctor`: what a new user (or an operator) needs to know about this installation, one line per check:
 * the data directory and database (with its migrations), model and search providers (never their keys), ripgrep,
 * the shells, the shell sandbox (bubblewrap), chat roots, admin users and the external MCP servers. Each check is ok, warn (works, but something
 * is missing or odd) or fail (something a user will hit); the report is healthy when nothing failed.
 */

import { execFileSync } from "node:child_process";
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { CHAT_PROVIDERS } from "../app/chat-types.js";
import type { AppContext } from "../app/context.js";
import { ConfigError, LOCAL_USER, readConfig, type ToolhostConfig } from "../core/config.js";
import { loadProviderFileConfig, providerConfigPath } from "../core/credentials.js";
import { chooseDataDir, type DataDirChoice } from "../core/data-dir.js";
import { providerCredentials, providerEntry } from "../providers/table.js";
import { migrationStatus } from "../storage/migration-status.js";
import { ripgrepPath } from "../tools/builtin/grep.js";
import { probeSandbox } from "../tools/shell/sandbox/probe.js";
import { findInterpreter, SHELL_KINDS } from "../tools/shell/shell-tool.js";

/** The outcome of one check. */
export type DoctorStatus = "ok" | "warn" | "fail";

/** One line of the report: `detail` says what was found and, when not ok, what to do. */
export interface DoctorCheck {
  /** Stable id, e.g. "database", "provider.openai". */
  id: string;
  title: string;
  status: DoctorStatus;
  detail: string;
}

/** The whole report; `healthy` is false when any check failed. */
export interface DoctorReport {
  healthy: boolean;
  checks: DoctorCheck[];
}

/** What the checks read; every field has a default from the process. */
export interface DoctorInputs {
  env?: NodeJS.ProcessEnv;
  /**
   * Opens the application context (database) on `env`: the environment with the malformed TOOLHOST_* variables
   * unset, so the database check runs on their defaults instead of repeating the configuration error.
   */
  openContext: (env: NodeJS.ProcessEnv) => Promise<AppContext>;
  /**
   * Statuses of the external MCP servers after trying to connect (name, state, tool count, last error); undefined
   * when the MCP client is not available.
   */
  mcpStatuses?: (
    ctx: AppContext,
  ) => Promise<{ name: string; state: string; tools: number; lastError: string | null }[]>;
}

const check = (id: string, title: string, status: DoctorStatus, detail: string): DoctorCheck => ({
  id,
  title,
  status,
  detail,
});

function dataDirCheck(choice: DataDirChoice, createdNow: boolean, openError?: Error): DoctorCheck {
  const from =
    choice.source === "home"
      ? "the default, ~/.local/share/toolhost"
      : choice.source === "XDG_DATA_HOME"
        ? "$XDG_DATA_HOME/toolhost"
        : choice.source;
  if (!existsSync(choice.path) && openError)
    return check(
      "data-dir",
      "data directory",
      "fail",
      // The system's reason (the database's own message around it would repeat the advice below).
      `${choice.path} (from ${from}) cannot be created: ${openError.cause instanceof Error ? openError.cause.message : openError.message}. Set TOOLHOST_DATA_DIR to a directory this user can create or write.`,
    );
  if (!existsSync(choice.path))
    return check(
      "data-dir",
      "data directory",
      "warn",
      `${choice.path} (from ${from}) does not exist yet; the first command creates it.`,
    );
  if (!statSync(choice.path).isDirectory())
    return check(
      "data-dir",
      "data directory",
      "fail",
      `${choice.path} (from ${from}) is not a directory. Set TOOLHOST_DATA_DIR to a directory.`,
    );
  try {
    accessSync(choice.path, constants.R_OK | constants.W_OK);
  } catch {
    return check("data-dir", "data directory", "fail", `${choice.path} (from ${from}) is not writable by this user.`);
  }
  return check("data-dir", "data directory", "ok", `${choice.path} (from ${from})${createdNow ? ", created now" : ""}`);
}

function providerChecks(env: NodeJS.ProcessEnv): DoctorCheck[] {
  let file: ReturnType<typeof loadProviderFileConfig>;
  try {
    file = loadProviderFileConfig(env);
  } catch (error) {
    return [check("providers", "model providers", "fail", (error as Error).message)];
  }
  const checks = CHAT_PROVIDERS.map((name) => {
    const credentials = providerEntry(name).credentials;
    const keyVars = credentials.apiKeyEnv;
    // A provider that needs no key once its base URL is set (openai-chat for a local server) says so.
    const orBaseURL = credentials.placeholderKeyWithBaseURL
      ? `; for a local server that needs no key, ${credentials.baseURLEnv} alone`
      : "";
    try {
      const config = providerCredentials(name, env, file);
      const fromEnv = keyVars.find((v) => env[v]?.trim());
      const where = fromEnv
        ? `key from ${fromEnv}`
        : config.apiKey === "not-needed"
          ? "no key (local server)"
          : `key from ${providerConfigPath(env)}`;
      const base = config.baseURL ? `, base URL ${config.baseURL}` : "";
      return check(`provider.${name}`, `provider ${name}`, "ok" as DoctorStatus, `configured (${where}${base})`);
    } catch {
      return check(
        `provider.${name}`,
        `provider ${name}`,
        "warn" as DoctorStatus,
        `not configured: set ${keyVars.join(" or ")} (or providers.${name}.apiKey in ${providerConfigPath(env)})${orBaseURL}`,
      );
    }
  });
  if (checks.every((c) => c.status !== "ok")) {
    checks.push(
      check(
        "providers",
        "model providers",
        "warn",
        "No provider has a key: `toolhost chat` and chats over HTTP cannot run a model.",
      ),
    );
  }
  const search = ["TAVILY_API_KEY", "BRAVE_API_KEY"].filter((v) => env[v]?.trim());
  checks.push(
    check(
      "search",
      "web search",
      "ok",
      search.length
        ? `keys: ${search.join(", ")} (DuckDuckGo needs none)`
        : "DuckDuckGo only (set TAVILY_API_KEY or BRAVE_API_KEY for others)",
    ),
  );
  return checks;
}

function ripgrepCheck(config: ToolhostConfig): DoctorCheck {
  const rg = ripgrepPath(config);
  if (!rg)
    return check(
      "ripgrep",
      "ripgrep",
      "warn",
      "not found: grep uses its slower JavaScript engine (set TOOLHOST_RG_PATH to an rg binary).",
    );
  try {
    const version = execFileSync(rg, ["--version"], { encoding: "utf8", timeout: 10_000 }).split("\n")[0];
    return check("ripgrep", "ripgrep", "ok", `${version} at ${rg}`);
  } catch (error) {
    return check(
      "ripgrep",
      "ripgrep",
      "warn",
      `${rg} does not run (${(error as Error).message}); grep falls back to JavaScript.`,
    );
  }
}

/**
 * One line per shell: where its interpreter is, and whether its tool is enabled for the local user (the CLI's
 * default user; `undefined` when the settings could not be read).
 */
async function shellChecks(env: NodeJS.ProcessEnv, ctx: AppContext | undefined): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  for (const shell of SHELL_KINDS) {
    const found = findInterpreter(shell, env.PATH);
    if (!found) {
      checks.push(check(`shell.${shell}`, `shell ${shell}`, "ok", `not installed: the "${shell}" tool is not offered`));
      continue;
    }
    const enabled = await ctx?.settings
      .get(LOCAL_USER, shell)
      .then((descriptor) => descriptor.enabled)
      .catch(() => undefined);
    const state =
      enabled === true
        ? `enabled for ${LOCAL_USER}`
        : enabled === false
          ? `off for ${LOCAL_USER}: \`toolhost settings set ${shell} --enable\` enables it; over HTTP only an admin may`
          : "off until enabled; only an admin may enable it over HTTP";
    checks.push(check(`shell.${shell}`, `shell ${shell}`, "ok", `${found} (tool "${shell}" available; ${state})`));
  }
  return checks;
}

async function sandboxCheck(env: NodeJS.ProcessEnv): Promise<DoctorCheck> {
  try {
    const probe = await probeSandbox(env);
    if (probe.available)
      return check(
        "sandbox",
        "shell sandbox",
        "ok",
        `bubblewrap${probe.version ? ` ${probe.version}` : ""} at ${probe.bwrap}: shell commands run confined`,
      );
    return check(
      "sandbox",
      "shell sandbox",
      probe.kind === "disabled" ? "ok" : "warn",
      `unavailable (${probe.kind}): ${probe.reason}${probe.kind === "disabled" ? "" : ' Shell tools with sandbox "preferred" ask before running a command unconfined.'}`,
    );
  } catch (error) {
    return check("sandbox", "shell sandbox", "warn", `could not be probed: ${(error as Error).message}`);
  }
}

function chatRootsCheck(config: ToolhostConfig): DoctorCheck {
  const roots = config.chatRoots;
  if (!roots || roots.length === 0)
    return check("chat-roots", "chat roots", "ok", "unset: over HTTP only admins may bind a working directory");
  // A `{user}` root is created by the user's first request, below the directory above `{user}`, which must exist.
  const required = roots.map((r) => (r.includes("{user}") ? dirname(r.slice(0, r.indexOf("{user}") + 6)) : r));
  const missing = [...new Set(required.filter((r) => !r.includes("{user}") && !existsSync(r)))];
  const perUser = roots.some((r) => r.includes("{user}"))
    ? "; each user's {user} directory is created (mode 0700) by their first request"
    : "";
  if (missing.length)
    return check(
      "chat-roots",
      "chat roots",
      "warn",
      `${roots.join(":")} — missing: ${missing.join(", ")} (create them, or fix TOOLHOST_CHAT_ROOTS)${perUser}`,
    );
  return check("chat-roots", "chat roots", "ok", `${roots.join(":")}${perUser}`);
}

/** Runs every check. Never throws: a check that cannot run is reported as failed with the reason. */
export async function runDoctor(inputs: DoctorInputs): Promise<DoctorReport> {
  const env = inputs.env ?? process.env;
  const checks: DoctorCheck[] = [];
  // A malformed TOOLHOST_* variable is reported (and every other check still runs, on the defaults).
  let config: ToolhostConfig | undefined;
  const malformed: string[] = [];
  // The environment the checks below read: the malformed variables unset (their defaults apply).
  let readable: NodeJS.ProcessEnv = { ...env };
  while (!config) {
    try {
      config = readConfig(readable);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      malformed.push(error.message);
      readable = { ...readable, [error.variable]: "" };
    }
  }
  checks.push(
    malformed.length
      ? check("config", "configuration", "fail", malformed.join(" "))
      : check("config", "configuration", "ok", "every TOOLHOST_* variable that is set is well-formed"),
  );
  const choice = chooseDataDir(undefined, readable);
  const existed = existsSync(choice.path);
  const fresh = !existsSync(join(choice.path, "toolhost.db"));
  let ctx: AppContext | undefined;
  let opened: Error | undefined;
  try {
    ctx = await inputs.openContext(readable);
  } catch (error) {
    opened = error as Error;
  }
  checks.push(dataDirCheck(choice, !existed && existsSync(choice.path), opened));
  try {
    if (!ctx) throw opened;
    const { applied, pending } = await migrationStatus(ctx.database.db);
    checks.push(
      check(
        "database",
        "database",
        pending.length ? "fail" : "ok",
        `${ctx.database.dialect} ${ctx.database.location}${fresh && ctx.database.dialect === "sqlite" ? " (created now)" : ""}; migrations ${applied.length}/${applied.length + pending.length} applied${applied.length ? ` (latest ${applied[applied.length - 1]})` : ""}${pending.length ? `; pending: ${pending.join(", ")}` : ""}`,
      ),
    );
  } catch (error) {
    checks.push(check("database", "database", "fail", (error as Error)?.message ?? String(error)));
  }
  if (ctx) {
    // Where the full outputs of cut results are (users and models see only their spill:<id> names).
    try {
      const row = await ctx.database.db
        .selectFrom("spills")
        .select((eb) => [eb.fn.countAll<number>().as("n"), eb.fn.sum<number>("size").as("bytes")])
        .executeTakeFirst();
      const mib = (Number(row?.bytes ?? 0) / (1024 * 1024)).toFixed(1);
      const cache = ctx.runtime.spill ? `; this instance's cache ${ctx.runtime.spill.root}` : "";
      checks.push(
        check("spills", "spilled outputs", "ok", `${Number(row?.n ?? 0)} in the database (${mib} MiB)${cache}`),
      );
    } catch (error) {
      checks.push(check("spills", "spilled outputs", "warn", `could not be counted: ${(error as Error).message}`));
    }
  }
  checks.push(...providerChecks(readable));
  checks.push(ripgrepCheck(config));
  checks.push(...(await shellChecks(readable, ctx)));
  checks.push(await sandboxCheck(readable));
  checks.push(chatRootsCheck(config));
  const admins = [...config.adminUsers];
  if (ctx) {
    const tokens = await ctx.tokens.list().catch(() => []);
    const withToken = admins.filter((a) => tokens.some((t) => t.userId === a));
    checks.push(
      check(
        "admins",
        "admin users",
        admins.length === 0 ? "warn" : "ok",
        admins.length === 0
          ? "none (TOOLHOST_ADMIN_USERS is empty): nobody can enable shell tools or read the audit log over HTTP"
          : `${admins.join(", ")} (with a token: ${withToken.length ? withToken.join(", ") : "none yet — `toolhost token create --user NAME`"})`,
      ),
    );
    if (inputs.mcpStatuses) {
      try {
        const statuses = await inputs.mcpStatuses(ctx);
        if (statuses.length === 0) checks.push(check("mcp", "MCP servers", "ok", "none configured"));
        for (const s of statuses) {
          const status: DoctorStatus = s.state === "connected" || s.state === "disabled" ? "ok" : "warn";
          checks.push(
            check(
              `mcp.${s.name}`,
              `MCP server ${s.name}`,
              status,
              `${s.state}${s.state === "connected" ? `, ${s.tools} tools` : ""}${s.lastError ? `: ${s.lastError}` : ""}`,
            ),
          );
        }
      } catch (error) {
        checks.push(check("mcp", "MCP servers", "warn", `could not be checked: ${(error as Error).message}`));
      }
    }
    checks.push(...(await dataSourceChecks(ctx)));
    await ctx.close().catch(() => {});
  }
  return { healthy: checks.every((c) => c.status !== "fail"), checks };
}

/** One line per declared data source: reachable or not, with its host (never its URL or password). */
async function dataSourceChecks(ctx: AppContext): Promise<DoctorCheck[]> {
  try {
    const { DataSourcesService } = await import("../app/data-sources.js");
    const { DataSourceRepository } = await import("../storage/data-source-repository.js");
    const results = await new DataSourcesService(ctx.dataSources, new DataSourceRepository(ctx.database.db)).test();
    return results.map((r) =>
      check(
        `data.${r.name}`,
        `data source ${r.name}`,
        r.reachable ? "ok" : "warn",
        r.reachable ? `reachable at ${r.location} (${r.version})` : `unreachable at ${r.location}: ${r.error}`,
      ),
    );
  } catch (error) {
    return [check("data", "data sources", "warn", `could not be checked: ${(error as Error).message}`)];
  }
}

/** Renders the report as aligned text lines: `ok   data directory  /path …`. */
export function formatDoctorReport(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((c) => c.title.length));
  const lines = report.checks.map((c) => `${c.status.padEnd(4)} ${c.title.padEnd(width)}  ${c.detail}`);
  lines.push(report.healthy ? "Healthy." : "Not healthy: fix the lines marked fail.");
  return lines.join("\n");
}
