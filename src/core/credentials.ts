/**
 * The one credential reader for model providers (chats, sub-agents, image generation): a provider's API key and
 * base URL come from the environment first, then from the config file, and a missing key is always the same
 * {@link MissingCredentialsError}, naming the variable(s) to set and the config-file entry. The specs it reads
 * (which variables, which config-file key) live in the provider table (src/providers/table.ts); tools, which may
 * not import providers/, receive a {@link ProviderCredentialSource} through `context.services.providerCredentials`
 * (or the process-wide default the table registers).
 */

import { readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { readConfig } from "./config.js";
import { errorBrand, ToolExecutionError } from "./errors.js";

/** Where one provider's credentials are read from. */
export interface CredentialSpec {
  /** Provider id, e.g. "openai". */
  provider: string;
  /** Environment variables holding the API key, in order of precedence (e.g. GEMINI_API_KEY, GOOGLE_API_KEY). */
  apiKeyEnv: readonly string[];
  /** Environment variable holding the base URL, when the provider has one. */
  baseURLEnv?: string;
  /** Key under `providers` in the config file, then further keys tried in order (openai-chat falls back to openai). */
  configKeys: readonly string[];
  /**
   * When a base URL is configured but no key, send this placeholder instead of failing (local OpenAI-compatible
   * servers usually need no key).
   */
  placeholderKeyWithBaseURL?: string;
}

/** A provider's resolved key and base URL (`baseURL` absent: the SDK's own default). */
export interface ProviderCredentials {
  apiKey: string;
  baseURL?: string;
}

/** Gives a tool the credentials of a provider by id; throws {@link MissingCredentialsError} when none are set. */
export interface ProviderCredentialSource {
  credentials(provider: string): ProviderCredentials;
}

/**
 * No API key is configured for a provider. The message names the environment variable(s) and the config-file entry
 * to set, but not where the server's config file is (the message reaches users and models, who are told nothing
 * about the server's files; admins find the path in `toolhost doctor` and in {@link configFile}); `details` carries
 * `provider`, `variables` and `rule: "missing_api_key"`. Code `execution_failed` when a tool meets it; chats report
 * it as `provider_not_configured`.
 */
export class MissingCredentialsError extends ToolExecutionError {
  static override readonly brand: symbol = errorBrand("MissingCredentialsError");
  constructor(
    readonly provider: string,
    readonly variables: readonly string[],
    readonly configFile: string,
    hint = "",
  ) {
    const vars = variables.length > 1 ? `${variables[0]} (or ${variables.slice(1).join(", ")})` : variables[0];
    super(
      `No API key for provider ${provider}: set ${vars} in the environment${hint}, or providers.${provider}.apiKey in the config file (TOOLHOST_CONFIG).`,
      { provider, variables: [...variables], rule: "missing_api_key" },
    );
  }
}

/** Per-provider settings in the config file: `{ "providers": { "<id>": { "apiKey", "baseURL" } } }`. */
export interface ProviderFileConfig {
  providers?: Record<string, { apiKey?: string; baseURL?: string } | undefined>;
}

/**
 * Path of the config file: `TOOLHOST_CONFIG`, else `$XDG_CONFIG_HOME/toolhost/config.json`, else
 * `~/.config/toolhost/config.json`.
 */
export function providerConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const configured = readConfig(env).configFile;
  if (configured) return configured;
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "toolhost", "config.json");
}

/**
 * Reads the config file (parsed again only when it changed since the last read; the result is shared, do not change
 * it); returns `{}` when it does not exist. Throws an Error naming the file when it is not a
 * JSON object or a provider entry has a non-string `apiKey`/`baseURL`.
 */
export function loadProviderFileConfig(env: NodeJS.ProcessEnv = process.env): ProviderFileConfig {
  const path = providerConfigPath(env);
  // Read again only when the file changed (a stat is a few microseconds; the settings list asks on every request).
  let signature: string;
  try {
    // A missing file (the common case) answers undefined without an exception being made.
    const stats = statSync(path, { throwIfNoEntry: false });
    if (!stats) return {};
    signature = `${stats.ino}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`;
  } catch (error) {
    throw new Error(`Cannot read the config file ${path}: ${(error as Error).message}`);
  }
  const cached = parsedConfigFiles.get(path);
  if (cached?.signature === signature) return cached.config;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new Error(`Cannot read the config file ${path}: ${(error as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`The config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  const providers = (value as ProviderFileConfig | null)?.providers;
  if (
    !value ||
    typeof value !== "object" ||
    Array.isArray(value) ||
    (providers !== undefined && (typeof providers !== "object" || providers === null))
  ) {
    throw new Error(`The config file ${path} must be a JSON object like {"providers": {"openai": {"apiKey": "..."}}}.`);
  }
  for (const [name, entry] of Object.entries(providers ?? {})) {
    for (const key of ["apiKey", "baseURL"] as const) {
      const v = (entry as Record<string, unknown> | null)?.[key];
      if (v !== undefined && typeof v !== "string") {
        throw new Error(`The config file ${path}: providers.${name}.${key} must be a string.`);
      }
    }
  }
  if (parsedConfigFiles.size >= 16) parsedConfigFiles.clear();
  parsedConfigFiles.set(path, { signature, config: value as ProviderFileConfig });
  return value as ProviderFileConfig;
}

/**
 * The config files read so far, by path, with the stat signature (inode, size, mtime, ctime) they had: a file is
 * parsed again only when it changed. The parsed object is shared: callers read it, never change it.
 */
const parsedConfigFiles = new Map<string, { signature: string; config: ProviderFileConfig }>();

/**
 * Resolves one provider's credentials: the key from the first set variable of `spec.apiKeyEnv`, else the first
 * config-file entry of `spec.configKeys` that has one; the base URL from `spec.baseURLEnv`, else the config file.
 * The environment always wins. Throws {@link MissingCredentialsError} when no key is found (unless a base URL is set
 * and the spec allows a placeholder key), and the config file's own Error when the file is broken.
 */
export function resolveCredentials(
  spec: CredentialSpec,
  env: NodeJS.ProcessEnv = process.env,
  file?: ProviderFileConfig,
): ProviderCredentials {
  const fromEnv = (name: string | undefined) => (name ? env[name]?.trim() || undefined : undefined);
  let config = file;
  const fromFile = (key: "apiKey" | "baseURL") => {
    config ??= loadProviderFileConfig(env);
    for (const id of spec.configKeys) {
      const value = config.providers?.[id]?.[key]?.trim();
      if (value) return value;
    }
    return undefined;
  };
  const baseURL = fromEnv(spec.baseURLEnv) ?? fromFile("baseURL");
  let apiKey = spec.apiKeyEnv.map(fromEnv).find((v) => v !== undefined) ?? fromFile("apiKey");
  if (!apiKey && baseURL && spec.placeholderKeyWithBaseURL) apiKey = spec.placeholderKeyWithBaseURL;
  if (!apiKey) {
    const hint =
      spec.placeholderKeyWithBaseURL && spec.baseURLEnv
        ? ` (or set ${spec.baseURLEnv} to a server that needs no key)`
        : "";
    throw new MissingCredentialsError(spec.provider, spec.apiKeyEnv, providerConfigPath(env), hint);
  }
  return { apiKey, ...(baseURL ? { baseURL } : {}) };
}

let defaultSource: ProviderCredentialSource | undefined;

/**
 * Sets the process-wide credential source tools fall back to when their context carries none (the provider table
 * registers itself on import). Returns the previous one.
 */
export function setDefaultCredentialSource(
  source: ProviderCredentialSource | undefined,
): ProviderCredentialSource | undefined {
  const previous = defaultSource;
  defaultSource = source;
  return previous;
}

/**
 * The credential source for a tool call: `services.providerCredentials` when the host gave one, else the
 * process-wide default. Throws ToolExecutionError when neither exists (the host never loaded the provider table).
 */
export function credentialSourceFor(services: Record<string, unknown> | undefined): ProviderCredentialSource {
  const given = services?.providerCredentials as ProviderCredentialSource | undefined;
  if (given && typeof given.credentials === "function") return given;
  if (defaultSource) return defaultSource;
  throw new ToolExecutionError(
    "No provider credential source is configured: import Toolhost's providers (or pass services.providerCredentials).",
  );
}
