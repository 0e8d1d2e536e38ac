/**
 * Configuration of external MCP servers, in the shape desktop assistants and IDEs use: under `mcpServers` in the
 * config file (TOOLHOST_CONFIG, else ~/.config/toolhost/config.json), a name mapped to
 *
 * - `{ "command": "npx", "args": [...], "env": {...}, "cwd": "..." }` for a server Toolhost starts (stdio), or
 * - `{ "url": "https://…/mcp", "headers": {...} }` for a Streamable HTTP server,
 *
 * plus Toolhost's own optional keys: `trusted` (its tools default to approval `allow` instead of `ask`),
 * `disabled`, `connectTimeoutMs` (connect + initialize + list, default 10 s) and `callTimeoutMs` (each call,
 * default 60 s). Servers added through the admin API or CLI are stored in the database in the same shape.
 */
import { readFileSync } from "node:fs";
import { providerConfigPath } from "../../core/credentials.js";
import { ToolArgumentError } from "../../core/errors.js";

/** One external server's configuration (see the module comment). */
export interface McpServerConfig {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  url?: string;
  headers?: Record<string, string>;
  trusted?: boolean;
  disabled?: boolean;
  connectTimeoutMs?: number;
  callTimeoutMs?: number;
}

/** Where a server's configuration came from. */
export type McpServerSource = "config-file" | "database";

/** A named server configuration and its source. */
export interface NamedMcpServerConfig {
  name: string;
  config: McpServerConfig;
  source: McpServerSource;
}

/** Default time (ms) for connect + initialize + the first tools/list. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Default time (ms) for one tools/call. */
export const DEFAULT_CALL_TIMEOUT_MS = 60_000;

const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function stringMap(value: unknown, what: string): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value) || Object.values(value).some((v) => typeof v !== "string")) {
    throw new ToolArgumentError(`${what} must be an object of string values.`, { argument: what });
  }
  return value as Record<string, string>;
}

function timeout(value: unknown, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || (value as number) < 100 || (value as number) > 3_600_000) {
    throw new ToolArgumentError(`${what} must be an integer number of milliseconds from 100 to 3600000.`, {
      argument: what,
    });
  }
  return value as number;
}

/** Checks a server name: 1–64 letters, digits, spaces, `.`, `_` or `-`, starting with a letter or digit. */
export function parseServerName(name: unknown): string {
  if (typeof name !== "string" || !SERVER_NAME.test(name)) {
    throw new ToolArgumentError(
      `MCP server name ${JSON.stringify(name)} is invalid: use 1–64 letters, digits, spaces, ".", "_" or "-", starting with a letter or digit.`,
      { argument: "name" },
    );
  }
  return name;
}

/**
 * Validates one server's configuration. Throws ToolArgumentError (validation_failed) naming the field when it is
 * neither a stdio (`command`) nor an HTTP (`url`) server, is both, or a field has the wrong type.
 */
export function parseMcpServerConfig(name: string, raw: unknown): McpServerConfig {
  const where = `mcpServers["${name}"]`;
  if (!isRecord(raw)) throw new ToolArgumentError(`${where} must be an object with "command" or "url".`);
  const type = raw.type;
  if (type === "sse") {
    throw new ToolArgumentError(
      `${where}: the old HTTP+SSE transport is not supported; use the server's Streamable HTTP URL.`,
    );
  }
  const hasCommand = raw.command !== undefined;
  const hasUrl = raw.url !== undefined;
  if (hasCommand === hasUrl) {
    throw new ToolArgumentError(
      `${where} needs exactly one of "command" (a server Toolhost starts) or "url" (a Streamable HTTP server).`,
    );
  }
  const config: McpServerConfig = {};
  if (hasCommand) {
    if (typeof raw.command !== "string" || raw.command.trim() === "") {
      throw new ToolArgumentError(`${where}.command must be a non-empty string.`);
    }
    config.command = raw.command;
    if (raw.args !== undefined) {
      if (!Array.isArray(raw.args) || raw.args.some((a) => typeof a !== "string")) {
        throw new ToolArgumentError(`${where}.args must be a list of strings.`);
      }
      config.args = raw.args as string[];
    }
    const env = stringMap(raw.env, `${where}.env`);
    if (env) config.env = env;
    if (raw.cwd !== undefined) {
      if (typeof raw.cwd !== "string" || raw.cwd === "") throw new ToolArgumentError(`${where}.cwd must be a path.`);
      config.cwd = raw.cwd;
    }
  } else {
    let url: URL;
    try {
      url = new URL(String(raw.url));
    } catch {
      throw new ToolArgumentError(`${where}.url must be an absolute http(s) URL.`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new ToolArgumentError(`${where}.url must be an http(s) URL.`);
    }
    config.url = url.toString();
    const headers = stringMap(raw.headers, `${where}.headers`);
    if (headers) config.headers = headers;
  }
  for (const key of ["trusted", "disabled"] as const) {
    if (raw[key] !== undefined) {
      if (typeof raw[key] !== "boolean") throw new ToolArgumentError(`${where}.${key} must be true or false.`);
      config[key] = raw[key] as boolean;
    }
  }
  const connect = timeout(raw.connectTimeoutMs, `${where}.connectTimeoutMs`);
  if (connect !== undefined) config.connectTimeoutMs = connect;
  const call = timeout(raw.callTimeoutMs, `${where}.callTimeoutMs`);
  if (call !== undefined) config.callTimeoutMs = call;
  return config;
}

/** Path of the config file (the same file that holds provider keys). */
export function configFilePath(env: NodeJS.ProcessEnv = process.env): string {
  return providerConfigPath(env);
}

/** The servers of the config file and, per name, why an entry was rejected. A missing file has none. */
export function loadConfigFileServers(env: NodeJS.ProcessEnv = process.env): {
  servers: NamedMcpServerConfig[];
  errors: { name: string; message: string }[];
} {
  const path = configFilePath(env);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { servers: [], errors: [] };
    return {
      servers: [],
      errors: [{ name: "(config file)", message: `Cannot read ${path}: ${(error as Error).message}` }],
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return {
      servers: [],
      errors: [{ name: "(config file)", message: `${path} is not valid JSON: ${(error as Error).message}` }],
    };
  }
  const entries = isRecord(value) ? value.mcpServers : undefined;
  if (entries === undefined) return { servers: [], errors: [] };
  if (!isRecord(entries)) {
    return { servers: [], errors: [{ name: "(config file)", message: `${path}: "mcpServers" must be an object.` }] };
  }
  const servers: NamedMcpServerConfig[] = [];
  const errors: { name: string; message: string }[] = [];
  for (const [name, raw] of Object.entries(entries)) {
    try {
      servers.push({ name: parseServerName(name), config: parseMcpServerConfig(name, raw), source: "config-file" });
    } catch (error) {
      errors.push({ name, message: (error as Error).message });
    }
  }
  return { servers, errors };
}
