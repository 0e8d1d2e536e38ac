/**
 * The data sources of the SQL tools, for admins: list (config file `dataSources` and stored ones), add and remove
 * stored ones, and test a source (connect, read the server's version). The admin endpoints, `toolhost data-sources`
 * and `toolhost doctor` share it. A source's password never leaves it: URLs are shown with `***` in its place, and
 * failures name the source and its host only.
 */

import { providerConfigPath as configFilePath } from "../core/credentials.js";
import { AccessDeniedError, NotFoundError, ToolArgumentError, ToolError } from "../core/errors.js";
import { DataSourceExistsError, type DataSourceRepository } from "../storage/data-source-repository.js";
import {
  type DataSourceCatalog,
  loadConfigFileDataSources,
  locationOf,
  parseDataSourceConfig,
  parseDataSourceName,
  redactedUrl,
  scrubSecret,
} from "../tools/data/sources.js";
import type { DataDialect, DataSourceOrigin, NamedDataSource } from "../tools/data/types.js";

/** A data source as an admin sees it. */
export interface DataSourceListing {
  name: string;
  dialect: DataDialect;
  /** The URL with its password replaced by `***`. */
  url: string;
  /** `host:port/database`, or the SQLite file. */
  location: string;
  description?: string;
  origin: DataSourceOrigin;
}

/** The outcome of testing one source. */
export interface DataSourceTestResult {
  name: string;
  dialect: DataDialect;
  location: string;
  reachable: boolean;
  /** The server's version, when reachable. */
  version?: string;
  /** Why not, when unreachable or refused (never the URL or password). */
  error?: string;
}

/** How long a test may take. */
const TEST_TIMEOUT_MS = 10_000;

function listing(source: NamedDataSource): DataSourceListing {
  return {
    name: source.name,
    dialect: source.dialect,
    url: source.dialect === "sqlite" ? source.url : redactedUrl(source.url),
    location: locationOf(source.url),
    ...(source.description ? { description: source.description } : {}),
    origin: source.origin,
  };
}

/** Listing, adding, removing and testing data sources (admin endpoints, CLI and doctor share it). */
export class DataSourcesService {
  constructor(
    private readonly catalog: DataSourceCatalog,
    private readonly repository: DataSourceRepository,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** Every declared source (redacted), and why others were skipped. */
  async list(): Promise<{ sources: DataSourceListing[]; errors: { name: string; message: string }[] }> {
    const { sources, errors } = await this.catalog.load();
    return { sources: sources.map(listing), errors };
  }

  /**
   * Stores a source. Throws ToolArgumentError for an invalid name or declaration, or a name already taken (stored,
   * or in the config file).
   */
  async add(name: unknown, config: unknown): Promise<DataSourceListing> {
    const valid = parseDataSourceName(name);
    const { dialect: _dialect, ...declaration } = parseDataSourceConfig(valid, config);
    if (loadConfigFileDataSources(this.env).sources.some((s) => s.name === valid)) {
      throw new ToolArgumentError(
        `A data source named "${valid}" is already in the config file ${configFilePath(this.env)}.`,
        { argument: "name" },
      );
    }
    try {
      await this.repository.add(valid, declaration as unknown as Record<string, unknown>);
    } catch (error) {
      if (error instanceof DataSourceExistsError) throw new ToolArgumentError(error.message, { argument: "name" });
      throw error;
    }
    await this.catalog.forget(valid);
    const added = (await this.catalog.load()).sources.find((s) => s.name === valid);
    if (!added) throw new NotFoundError(`The data source "${valid}" was stored but could not be read back.`);
    return listing(added);
  }

  /**
   * Removes a stored source and closes its connections. Throws NotFoundError when none is stored under that name,
   * AccessDeniedError when it comes from the config file (edit the file instead).
   */
  async remove(name: string): Promise<void> {
    if (!(await this.repository.remove(name))) {
      if (loadConfigFileDataSources(this.env).sources.some((s) => s.name === name)) {
        throw new AccessDeniedError(
          `The data source "${name}" is defined in the config file ${configFilePath(this.env)}; remove it there.`,
          { rule: "config_file" },
        );
      }
      throw new NotFoundError(`No stored data source named "${name.slice(0, 100)}".`);
    }
    await this.catalog.forget(name);
    await this.catalog.load();
  }

  /** Connects to one source (every one without `name`) and reads its version. Throws NotFoundError for an unknown name. */
  async test(name?: string): Promise<DataSourceTestResult[]> {
    const { sources } = await this.catalog.load();
    const chosen = name === undefined ? sources : sources.filter((s) => s.name === name);
    if (name !== undefined && chosen.length === 0) {
      throw new NotFoundError(
        `No data source named "${name.slice(0, 100)}". List them with toolhost data-sources list.`,
      );
    }
    return Promise.all(
      chosen.map(async (source): Promise<DataSourceTestResult> => {
        const base = { name: source.name, dialect: source.dialect, location: locationOf(source.url) };
        try {
          const driver = await this.catalog.driver(source);
          const version = await driver.version(AbortSignal.timeout(TEST_TIMEOUT_MS));
          return { ...base, reachable: true, version };
        } catch (error) {
          // A classified error was written by the drivers' helpers with the server's text already scrubbed;
          // scrubbing it again would also cut a short password out of Toolhost's own words (the source's name).
          const message = error instanceof Error ? error.message : String(error);
          return {
            ...base,
            reachable: false,
            error: ToolError.isInstance(error) ? message : scrubSecret(message, source.url),
          };
        }
      }),
    );
  }
}
