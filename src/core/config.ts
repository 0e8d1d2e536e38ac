/**
 * Toolhost's configuration from the environment: the one module that reads `TOOLHOST_*` variables. Everything else
 * receives a {@link ToolhostConfig} (or the environment to derive one from, through {@link readConfig}), so each
 * variable's name, shape, default and error message are stated here once.
 *
 * A value that is set but malformed (a number that is not one, a path that is not absolute where one must be) is an
 * error naming the variable and what it takes, thrown when the configuration is read (at start), never a silent
 * default. An empty value counts as unset.
 */
import { isAbsolute, resolve } from "node:path";
import { BrandedError, errorBrand } from "./errors.js";

/** The environment variables Toolhost reads, by field of {@link ToolhostConfig}. */
export const CONFIG_VARIABLES = {
  dataDir: "TOOLHOST_DATA_DIR",
  databaseUrl: "TOOLHOST_DATABASE_URL",
  configFile: "TOOLHOST_CONFIG",
  adminUsers: "TOOLHOST_ADMIN_USERS",
  chatRoots: "TOOLHOST_CHAT_ROOTS",
  chatMaxIterations: "TOOLHOST_CHAT_MAX_ITERATIONS",
  chatProvider: "TOOLHOST_CHAT_PROVIDER",
  chatModel: "TOOLHOST_CHAT_MODEL",
  approvalTimeoutMs: "TOOLHOST_APPROVAL_TIMEOUT_SECONDS",
  approvalStaleMs: "TOOLHOST_APPROVAL_STALE_MS",
  maxBodyBytes: "TOOLHOST_MAX_BODY_BYTES",
  validateResponses: "TOOLHOST_VALIDATE_RESPONSES",
  mcpAllowedHosts: "TOOLHOST_MCP_ALLOWED_HOSTS",
  mcpAllowedOrigins: "TOOLHOST_MCP_ALLOWED_ORIGINS",
  agentTemplatesDir: "TOOLHOST_AGENT_TEMPLATES_DIR",
  bwrap: "TOOLHOST_BWRAP",
  ripgrepPath: "TOOLHOST_RG_PATH",
  traceContent: "TOOLHOST_OTEL_CAPTURE_CONTENT",
  logLevel: "TOOLHOST_LOG_LEVEL",
  port: "TOOLHOST_PORT",
  host: "TOOLHOST_HOST",
  spillTtlMs: "TOOLHOST_SPILL_TTL_DAYS",
  spillQuotaBytes: "TOOLHOST_SPILL_QUOTA_MB",
  bodyTimeoutMs: "TOOLHOST_BODY_TIMEOUT_SECONDS",
  headersTimeoutMs: "TOOLHOST_HEADERS_TIMEOUT_SECONDS",
  publicUrl: "TOOLHOST_PUBLIC_URL",
  turnLeaseMs: "TOOLHOST_TURN_LEASE_MS",
} as const satisfies Record<keyof ToolhostConfig, `TOOLHOST_${string}`>;

/** Toolhost's configuration as read from the environment. Units are in the field names or their docs. */
export interface ToolhostConfig {
  /** TOOLHOST_DATA_DIR, resolved to an absolute path; undefined: the XDG/home default (core/data-dir.ts). */
  readonly dataDir: string | undefined;
  /** TOOLHOST_DATABASE_URL (`postgres://…` or `sqlite:/path`); undefined: SQLite in the data directory. */
  readonly databaseUrl: string | undefined;
  /** TOOLHOST_CONFIG, the config file's path, resolved; undefined: `$XDG_CONFIG_HOME/toolhost/config.json`. */
  readonly configFile: string | undefined;
  /** TOOLHOST_ADMIN_USERS, comma-separated user ids (blanks ignored); unset: `local`; set but empty: none. */
  readonly adminUsers: ReadonlySet<string>;
  /** TOOLHOST_CHAT_ROOTS, colon-separated, each resolved to an absolute path (`{user}` kept); null: none. */
  readonly chatRoots: readonly string[] | null;
  /** TOOLHOST_CHAT_MAX_ITERATIONS, a positive integer; undefined: the loop's default. */
  readonly chatMaxIterations: number | undefined;
  /** TOOLHOST_CHAT_PROVIDER, the CLI chat's default provider id (checked by the CLI against the provider table). */
  readonly chatProvider: string | undefined;
  /** TOOLHOST_CHAT_MODEL, the CLI chat's default model. */
  readonly chatModel: string | undefined;
  /** TOOLHOST_APPROVAL_TIMEOUT_SECONDS (positive seconds) in milliseconds; undefined: the service's default. */
  readonly approvalTimeoutMs: number | undefined;
  /** TOOLHOST_APPROVAL_STALE_MS, milliseconds ≥ 0; undefined: the service's default. */
  readonly approvalStaleMs: number | undefined;
  /** TOOLHOST_MAX_BODY_BYTES, the server-wide request body cap in bytes; default 16 MiB. */
  readonly maxBodyBytes: number;
  /** TOOLHOST_VALIDATE_RESPONSES=1: every HTTP response is checked against its schema (tests). */
  readonly validateResponses: boolean;
  /** TOOLHOST_MCP_ALLOWED_HOSTS, comma-separated names `/mcp` answers; undefined: by the bind address. */
  readonly mcpAllowedHosts: readonly string[] | undefined;
  /** TOOLHOST_MCP_ALLOWED_ORIGINS, comma-separated browser origins' hostnames; undefined: by the bind address. */
  readonly mcpAllowedOrigins: readonly string[] | undefined;
  /** TOOLHOST_AGENT_TEMPLATES_DIR, resolved; undefined: `~/.config/toolhost/agents/`. */
  readonly agentTemplatesDir: string | undefined;
  /** TOOLHOST_BWRAP: an absolute path to bwrap, or "off" (no sandbox); undefined: bwrap on PATH. */
  readonly bwrap: string | undefined;
  /** TOOLHOST_RG_PATH, a ripgrep binary; undefined: the one @vscode/ripgrep ships. */
  readonly ripgrepPath: string | undefined;
  /** TOOLHOST_OTEL_CAPTURE_CONTENT ("1" or "true"): tool arguments and results go on spans. */
  readonly traceContent: boolean;
  /** TOOLHOST_LOG_LEVEL (checked by the logger); default "warn". */
  readonly logLevel: string;
  /** TOOLHOST_PORT, `serve`'s default port (0 picks a free one); default "8787". */
  readonly port: string;
  /** TOOLHOST_HOST, `serve`'s default interface; default "127.0.0.1". */
  readonly host: string;
  /** TOOLHOST_SPILL_TTL_DAYS (positive days) in milliseconds; undefined: the spill area's default. */
  readonly spillTtlMs: number | undefined;
  /** TOOLHOST_SPILL_QUOTA_MB (positive MiB) in bytes; undefined: the spill area's default. */
  readonly spillQuotaBytes: number | undefined;
  /** TOOLHOST_BODY_TIMEOUT_SECONDS in milliseconds: a request body not arrived by then is answered 408; default 30 s. */
  readonly bodyTimeoutMs: number;
  /** TOOLHOST_HEADERS_TIMEOUT_SECONDS in milliseconds: the longest wait for a request's headers; default 20 s. */
  readonly headersTimeoutMs: number;
  /**
   * TOOLHOST_PUBLIC_URL, the server's public base URL (an http(s) origin and path, no trailing slash), used where it
   * names itself (OAuth protected-resource metadata); undefined: derived from accepted Host headers only.
   */
  readonly publicUrl: string | undefined;
  /**
   * TOOLHOST_TURN_LEASE_MS, a positive integer of milliseconds up to {@link TURN_LEASE_MAX_MS}: how long a chat turn's
   * lease lasts between renewals (a dead instance's turns move within about 1.4 times it); undefined: the
   * coordinator's default.
   */
  readonly turnLeaseMs: number | undefined;
}

/**
 * The longest chat-turn lease (an hour): a dead instance's turns would wait longer than anyone would, and a lease
 * past what a timer holds (its renewal runs every third of it) would make the renewal timer fire every millisecond.
 */
export const TURN_LEASE_MAX_MS = 3_600_000;

/** A `TOOLHOST_*` variable is set to a value it cannot take (code `invalid_config`); the message names it. */
export class ConfigError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ConfigError");
  readonly code = "invalid_config";
  readonly variable: string;
  constructor(variable: string, expected: string, got: string) {
    super(`${variable} must be ${expected}; got ${JSON.stringify(got.length > 80 ? `${got.slice(0, 77)}…` : got)}.`);
    this.variable = variable;
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;
const MIB = 1024 * 1024;

/** The default server-wide request body cap (bytes). */
export const DEFAULT_MAX_BODY_BYTES = 16 * MIB;
/** How long a request body may take to arrive after its headers, by default (ms). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
/** How long a request's headers may take to arrive, by default (ms). */
export const DEFAULT_HEADERS_TIMEOUT_MS = 20_000;

/**
 * Parses a public base URL: an absolute http(s) URL without credentials, query or fragment, returned as origin plus
 * path without a trailing slash; undefined for an empty value. Throws {@link ConfigError} otherwise.
 */
export function parsePublicUrl(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const expected = "an absolute http(s) URL without credentials, query or fragment, such as https://tools.example.com";
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new ConfigError(CONFIG_VARIABLES.publicUrl, expected, value);
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.search || url.hash || url.username)
    throw new ConfigError(CONFIG_VARIABLES.publicUrl, expected, value);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

/**
 * The user of the machine's own process: the CLI's default `--user`, the owner of the first API token `serve`
 * creates, and the default admin.
 */
export const LOCAL_USER = "local";

/**
 * Parses an admin-users list (comma-separated, blanks ignored). Unset means the default {@link LOCAL_USER}; set but empty means
 * no admins at all (an operator's deliberate choice, which `toolhost doctor` warns about).
 */
export function parseAdminUsers(value: string | undefined): Set<string> {
  const users = (value ?? LOCAL_USER)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return new Set(users);
}

/** Parses a chat-roots list: colon-separated, each resolved to an absolute path; empty entries ignored; null: none. */
export function parseChatRoots(value: string | undefined): string[] | null {
  if (!value) return null;
  const roots = value
    .split(":")
    .map((r) => r.trim())
    .filter((r) => r !== "")
    .map((r) => resolve(r));
  return roots.length > 0 ? roots : null;
}

function text(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function list(env: NodeJS.ProcessEnv, name: string): string[] | undefined {
  const value = text(env, name);
  if (value === undefined) return undefined;
  const items = value
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  return items.length > 0 ? items : undefined;
}

function number(
  env: NodeJS.ProcessEnv,
  name: string,
  check: { integer?: boolean; min: number; max?: number; exclusive?: boolean; expected: string },
): number | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  const ok =
    Number.isFinite(n) &&
    (!check.integer || Number.isInteger(n)) &&
    (check.exclusive ? n > check.min : n >= check.min) &&
    (check.max === undefined || n <= check.max);
  if (!ok) throw new ConfigError(name, check.expected, raw);
  return n;
}

function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  return /^(1|true)$/i.test(text(env, name) ?? "");
}

/**
 * Reads Toolhost's configuration from `env` (default `process.env`). Pure apart from resolving relative paths
 * against the current directory; reading costs microseconds, but callers read it once (at construction), not per
 * call. Throws {@link ConfigError} naming the first malformed variable.
 */
export function readConfig(env: NodeJS.ProcessEnv = process.env): ToolhostConfig {
  const V = CONFIG_VARIABLES;
  const dataDir = text(env, V.dataDir);
  const configFile = text(env, V.configFile);
  const templates = text(env, V.agentTemplatesDir);
  const bwrap = text(env, V.bwrap);
  if (bwrap !== undefined && bwrap !== "off" && !isAbsolute(bwrap))
    throw new ConfigError(V.bwrap, 'an absolute path to bwrap, or "off"', bwrap);
  const timeoutSeconds = number(env, V.approvalTimeoutMs, { min: 0, exclusive: true, expected: "positive seconds" });
  const ttlDays = number(env, V.spillTtlMs, { min: 0, exclusive: true, expected: "a positive number of days" });
  const quotaMb = number(env, V.spillQuotaBytes, { min: 0, exclusive: true, expected: "a positive number of MiB" });
  // A deadline is a timer: past what one holds it would fire at once, so an hour is the most.
  const seconds = { min: 0, exclusive: true, max: 3600, expected: "a positive number of seconds, at most 3600" };
  const bodySeconds = number(env, V.bodyTimeoutMs, seconds);
  const headerSeconds = number(env, V.headersTimeoutMs, seconds);
  return Object.freeze({
    dataDir: dataDir === undefined ? undefined : resolve(dataDir),
    databaseUrl: text(env, V.databaseUrl),
    configFile: configFile === undefined ? undefined : resolve(configFile),
    adminUsers: parseAdminUsers(env[V.adminUsers]),
    chatRoots: parseChatRoots(env[V.chatRoots]),
    chatMaxIterations: number(env, V.chatMaxIterations, {
      integer: true,
      min: 0,
      exclusive: true,
      expected: "a positive integer",
    }),
    chatProvider: text(env, V.chatProvider),
    chatModel: text(env, V.chatModel),
    approvalTimeoutMs: timeoutSeconds === undefined ? undefined : timeoutSeconds * 1000,
    approvalStaleMs: number(env, V.approvalStaleMs, { min: 0, expected: "milliseconds (0 or more)" }),
    maxBodyBytes:
      number(env, V.maxBodyBytes, { integer: true, min: 0, exclusive: true, expected: "a positive number of bytes" }) ??
      DEFAULT_MAX_BODY_BYTES,
    validateResponses: text(env, V.validateResponses) === "1",
    mcpAllowedHosts: list(env, V.mcpAllowedHosts),
    mcpAllowedOrigins: list(env, V.mcpAllowedOrigins),
    agentTemplatesDir: templates === undefined ? undefined : resolve(templates),
    bwrap,
    ripgrepPath: text(env, V.ripgrepPath),
    traceContent: flag(env, V.traceContent),
    logLevel: text(env, V.logLevel) ?? "warn",
    port: String(
      number(env, V.port, { integer: true, min: 0, max: 65535, expected: "a port number from 0 to 65535" }) ?? 8787,
    ),
    host: text(env, V.host) ?? "127.0.0.1",
    spillTtlMs: ttlDays === undefined ? undefined : ttlDays * DAY_MS,
    spillQuotaBytes: quotaMb === undefined ? undefined : quotaMb * MIB,
    bodyTimeoutMs: bodySeconds === undefined ? DEFAULT_BODY_TIMEOUT_MS : Math.ceil(bodySeconds * 1000),
    headersTimeoutMs: headerSeconds === undefined ? DEFAULT_HEADERS_TIMEOUT_MS : Math.ceil(headerSeconds * 1000),
    publicUrl: parsePublicUrl(env[V.publicUrl]),
    turnLeaseMs: number(env, V.turnLeaseMs, {
      integer: true,
      min: 0,
      exclusive: true,
      max: TURN_LEASE_MAX_MS,
      expected: `a positive integer of milliseconds, at most ${TURN_LEASE_MAX_MS} (an hour)`,
    }),
  });
}
