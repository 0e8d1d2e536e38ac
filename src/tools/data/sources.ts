/**
 * Data sources: their declaration (`dataSources` in the config file, TOOLHOST_CONFIG; or stored by an admin), the
 * validation of a source's name and URL, how a source is shown without its password, and the catalog that lists
 * them and keeps one driver (with its small connection pool) per source. Light to import: the drivers and their
 * database clients load when a source is first used.
 */
import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { providerConfigPath } from "../../core/credentials.js";
import { ToolArgumentError } from "../../core/errors.js";
import type {
  DataDialect,
  DataDriver,
  DataSourceConfig,
  DataSourceService,
  DataSourceSummary,
  NamedDataSource,
} from "./types.js";

const SOURCE_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Checks a source name: 1–64 letters, digits, `_` or `-`, starting with a letter. Throws ToolArgumentError. */
export function parseDataSourceName(name: unknown): string {
  if (typeof name !== "string" || !SOURCE_NAME.test(name)) {
    throw new ToolArgumentError(
      `Data source name ${JSON.stringify(String(name).slice(0, 80))} is invalid: use 1–64 letters, digits, "_" or "-", starting with a letter.`,
      { argument: "name" },
    );
  }
  return name;
}

/**
 * The dialect of a data source URL: `postgres://` or `postgresql://`, `mysql://` or `mariadb://`, `sqlite:` followed
 * by an absolute path. Throws ToolArgumentError (without echoing the URL, which may hold a password).
 */
export function dialectOfUrl(url: string): DataDialect {
  if (/^postgres(ql)?:\/\//i.test(url)) return "postgres";
  if (/^(mysql|mariadb):\/\//i.test(url)) return "mysql";
  if (/^sqlite:/i.test(url)) {
    if (!isAbsolute(sqlitePath(url))) {
      throw new ToolArgumentError("A sqlite: data source URL must name an absolute path, e.g. sqlite:/srv/data.db.", {
        argument: "url",
      });
    }
    return "sqlite";
  }
  throw new ToolArgumentError(
    "A data source URL must start with postgres://, mysql:// (MySQL or MariaDB) or sqlite:/ (an absolute file path).",
    { argument: "url" },
  );
}

/** The file path of a `sqlite:` URL (`sqlite:/a/b.db`, `sqlite:///a/b.db`). */
export function sqlitePath(url: string): string {
  const rest = url.replace(/^sqlite:/i, "");
  return decodeURIComponent(rest.startsWith("///") ? rest.slice(2) : rest.startsWith("//") ? rest.slice(1) : rest);
}

/** Query parameters of a server URL that carry a secret: the drivers read a password from the query string too. */
const SECRET_PARAMS = ["password", "sslpassword"];

/**
 * The secrets of a server URL (its password, in the user part or a `password`/`sslpassword` query parameter), none
 * for SQLite. Used to scrub them from any text before it leaves.
 */
export function secretsOf(url: string): string[] {
  try {
    const parsed = new URL(url);
    const secrets = parsed.password ? [decodeURIComponent(parsed.password)] : [];
    for (const name of SECRET_PARAMS) for (const value of parsed.searchParams.getAll(name)) secrets.push(value);
    return secrets.filter((secret) => secret !== "");
  } catch {
    return [];
  }
}

/** `host:port/database` of a server URL, the path of a SQLite one; never the user or password. */
export function locationOf(url: string): string {
  if (dialectOfUrl(url) === "sqlite") return sqlitePath(url);
  try {
    const parsed = new URL(url);
    const database = parsed.pathname.replace(/^\//, "");
    return `${parsed.host}${database ? `/${decodeURIComponent(database)}` : ""}`;
  } catch {
    return "(unparsable URL)";
  }
}

/** The URL with its password (user part and query parameters, see secretsOf) replaced by `***` (for an admin's listing). */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    for (const name of SECRET_PARAMS) {
      if (parsed.searchParams.has(name)) parsed.searchParams.set(name, "***");
    }
    return parsed.toString();
  } catch {
    return "(unparsable URL)";
  }
}

/** Removes every occurrence of the source's secrets (raw and URL-encoded, see secretsOf) from a text. */
export function scrubSecret(text: string, url: string): string {
  let out = text;
  for (const password of secretsOf(url)) {
    for (const secret of new Set([password, encodeURIComponent(password)])) out = out.split(secret).join("***");
  }
  return out;
}

/**
 * Validates one source's declaration `{ url, description? }`. Throws ToolArgumentError naming the field (never the
 * URL's value).
 */
export function parseDataSourceConfig(name: string, raw: unknown): DataSourceConfig & { dialect: DataDialect } {
  const where = `dataSources["${name}"]`;
  if (!isRecord(raw)) throw new ToolArgumentError(`${where} must be an object with "url".`);
  for (const key of Object.keys(raw)) {
    if (key !== "url" && key !== "description") {
      throw new ToolArgumentError(`${where} has an unknown key "${key.slice(0, 40)}"; allowed: url, description.`);
    }
  }
  if (typeof raw.url !== "string" || raw.url.trim() === "") {
    throw new ToolArgumentError(`${where}.url must be a non-empty string.`, { argument: "url" });
  }
  const url = raw.url.trim();
  let dialect: DataDialect;
  try {
    dialect = dialectOfUrl(url);
  } catch (error) {
    throw new ToolArgumentError(`${where}.url: ${(error as Error).message}`, { argument: "url" });
  }
  if (dialect !== "sqlite") {
    try {
      new URL(url);
    } catch {
      throw new ToolArgumentError(`${where}.url is not a valid URL.`, { argument: "url" });
    }
  }
  if (raw.description !== undefined && (typeof raw.description !== "string" || raw.description.length > 2000)) {
    throw new ToolArgumentError(`${where}.description must be a string of at most 2000 characters.`);
  }
  return { url, dialect, ...(raw.description ? { description: raw.description as string } : {}) };
}

/** The sources of the config file and, per name, why an entry was rejected. A missing file has none. */
export function loadConfigFileDataSources(env: NodeJS.ProcessEnv = process.env): {
  sources: NamedDataSource[];
  errors: { name: string; message: string }[];
} {
  const path = providerConfigPath(env);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { sources: [], errors: [] };
    return { sources: [], errors: [{ name: "(config file)", message: `Cannot read ${path}.` }] };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { sources: [], errors: [{ name: "(config file)", message: `${path} is not valid JSON.` }] };
  }
  const entries = isRecord(value) ? value.dataSources : undefined;
  if (entries === undefined) return { sources: [], errors: [] };
  if (!isRecord(entries)) {
    return { sources: [], errors: [{ name: "(config file)", message: `${path}: "dataSources" must be an object.` }] };
  }
  const sources: NamedDataSource[] = [];
  const errors: { name: string; message: string }[] = [];
  for (const [name, raw] of Object.entries(entries)) {
    try {
      sources.push({ name: parseDataSourceName(name), ...parseDataSourceConfig(name, raw), origin: "config-file" });
    } catch (error) {
      errors.push({ name, message: (error as Error).message });
    }
  }
  return { sources, errors };
}

/** A source as people and models see it. */
export function summarizeDataSource(source: NamedDataSource): DataSourceSummary {
  return {
    name: source.name,
    dialect: source.dialect,
    ...(source.description ? { description: source.description } : {}),
    location: locationOf(source.url),
    origin: source.origin,
  };
}

/** Makes the driver of a source (its dialect's module loads here, on first use). */
export async function createDriver(source: NamedDataSource): Promise<DataDriver> {
  switch (source.dialect) {
    case "postgres":
      return new (await import("./postgres.js")).PostgresDriver(source.name, source.url);
    case "mysql":
      return new (await import("./mysql.js")).MysqlDriver(source.name, source.url);
    case "sqlite":
      return new (await import("./sqlite.js")).SqliteDriver(source.name, sqlitePath(source.url));
  }
}

/** Options of a {@link DataSourceCatalog}. */
export interface DataSourceCatalogOptions {
  /** The stored sources (the database's); default none. */
  loadStored?: () => Promise<{ name: string; config: Record<string, unknown> }[]>;
  env?: NodeJS.ProcessEnv;
  /** Receives why a declared source was skipped (invalid, or a stored name the config file also has). */
  onError?: (error: { name: string; message: string }) => void;
}

let current: DataSourceSummary[] = [];
let currentOwner: DataSourceCatalog | undefined;

/**
 * The sources the most recently refreshed catalog of this process listed (for the tools' model-facing
 * descriptions, which are built from settings only).
 */
export function currentDataSources(): readonly DataSourceSummary[] {
  return current;
}

/**
 * The declared sources (config file first; a stored source whose name the file also has is skipped) and one
 * driver per source, made on first use and replaced when the source's URL changes. Implements the tools'
 * {@link DataSourceService}.
 */
export class DataSourceCatalog implements DataSourceService {
  readonly #options: DataSourceCatalogOptions;
  readonly #drivers = new Map<string, { url: string; driver: Promise<DataDriver> }>();
  #closed = false;

  constructor(options: DataSourceCatalogOptions = {}) {
    this.#options = options;
  }

  /** Every valid source, with the reasons others were skipped; refreshes {@link currentDataSources}. */
  async load(): Promise<{ sources: NamedDataSource[]; errors: { name: string; message: string }[] }> {
    const file = loadConfigFileDataSources(this.#options.env);
    const sources = [...file.sources];
    const errors = [...file.errors];
    for (const stored of (await this.#options.loadStored?.()) ?? []) {
      if (sources.some((s) => s.name === stored.name)) {
        errors.push({
          name: `${stored.name} (database)`,
          message: `A data source named "${stored.name}" is also in the config file, which wins; remove one of them.`,
        });
        continue;
      }
      try {
        sources.push({ name: stored.name, ...parseDataSourceConfig(stored.name, stored.config), origin: "database" });
      } catch (error) {
        errors.push({ name: stored.name, message: (error as Error).message });
      }
    }
    if (!this.#closed) {
      current = sources.map(summarizeDataSource);
      currentOwner = this;
    }
    return { sources, errors };
  }

  async list(): Promise<NamedDataSource[]> {
    const { sources, errors } = await this.load();
    for (const error of errors) this.#options.onError?.(error);
    return sources;
  }

  driver(source: NamedDataSource): Promise<DataDriver> {
    const known = this.#drivers.get(source.name);
    if (known && known.url === source.url) return known.driver;
    if (known) void known.driver.then((d) => d.close()).catch(() => {});
    const driver = createDriver(source);
    driver.catch(() => this.#drivers.delete(source.name));
    this.#drivers.set(source.name, { url: source.url, driver });
    return driver;
  }

  /** Closes the driver of one source (after it was removed or changed). */
  async forget(name: string): Promise<void> {
    const known = this.#drivers.get(name);
    this.#drivers.delete(name);
    if (known) await (await known.driver.catch(() => undefined))?.close();
  }

  /** Closes every driver's connections (on shutdown); the descriptions' list is emptied if it was this one's. */
  async close(): Promise<void> {
    this.#closed = true;
    if (currentOwner === this) {
      current = [];
      currentOwner = undefined;
    }
    const drivers = [...this.#drivers.values()];
    this.#drivers.clear();
    await Promise.all(drivers.map(async (d) => (await d.driver.catch(() => undefined))?.close().catch(() => {})));
  }
}
