/**
 * The MCP client's entry points for the front ends (HTTP service, CLI): a manager wired to an application context
 * (config file + database as the server list, the context's registry and logger), and the service behind the admin
 * endpoints and `toolhost mcp-servers`.
 */
import type { AppContext } from "../../app/context.js";
import { AccessDeniedError, NotFoundError, ToolArgumentError } from "../../core/errors.js";
import { McpServerExistsError, McpServerRepository } from "../../storage/mcp-server-repository.js";
import { configFilePath, loadConfigFileServers, parseMcpServerConfig, parseServerName } from "./config.js";
import { McpClientManager, type McpServerStatus } from "./manager.js";
import { loadAllServers } from "./servers.js";

export type { McpServerConfig, NamedMcpServerConfig } from "./config.js";
export { McpClientManager, type McpServerStatus } from "./manager.js";
export { loadAllServers } from "./servers.js";

/** A manager for the context's registry whose servers come from the config file and the database. Not started. */
export function createMcpClientManager(ctx: AppContext, env: NodeJS.ProcessEnv = process.env): McpClientManager {
  const repository = new McpServerRepository(ctx.database.db);
  return new McpClientManager({
    registry: ctx.runtime.registry,
    logger: ctx.logger,
    loadConfigs: () => loadAllServers(repository, env),
  });
}

/** Listing, adding and removing external MCP servers (admin endpoints and CLI share it). */
export class McpServersService {
  readonly #repository: McpServerRepository;

  constructor(
    ctx: AppContext,
    readonly manager: McpClientManager,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    this.#repository = new McpServerRepository(ctx.database.db);
  }

  /** Status of every configured server. */
  list(): McpServerStatus[] {
    return this.manager.statuses();
  }

  /** Status of one server; throws NotFoundError when none has that name. */
  get(name: string): McpServerStatus {
    const status = this.manager.status(name);
    if (!status) throw new NotFoundError(`No MCP server named "${name}". List them with GET /api/admin/mcp-servers.`);
    return status;
  }

  /**
   * Stores a server and starts connecting it (in the background). Throws ToolArgumentError for an invalid name or
   * configuration, or when the name is taken (in the database or the config file).
   */
  async add(name: unknown, config: unknown): Promise<McpServerStatus> {
    const valid = parseServerName(name);
    const parsed = parseMcpServerConfig(valid, config);
    if (loadConfigFileServers(this.env).servers.some((s) => s.name === valid)) {
      throw new ToolArgumentError(
        `An MCP server named "${valid}" is already in the config file ${configFilePath(this.env)}.`,
      );
    }
    try {
      await this.#repository.add(valid, parsed as Record<string, unknown>);
    } catch (error) {
      if (error instanceof McpServerExistsError) throw new ToolArgumentError(error.message, { argument: "name" });
      throw error;
    }
    await this.manager.reload();
    return this.get(valid);
  }

  /**
   * Removes a stored server, disconnecting it and removing its tools. Throws NotFoundError when no stored server has
   * that name, AccessDeniedError when it comes from the config file (edit the file instead).
   */
  async remove(name: string): Promise<void> {
    if (!(await this.#repository.remove(name))) {
      if (loadConfigFileServers(this.env).servers.some((s) => s.name === name)) {
        throw new AccessDeniedError(
          `The MCP server "${name}" is defined in the config file ${configFilePath(this.env)}; remove it there.`,
          { rule: "config_file" },
        );
      }
      throw new NotFoundError(`No stored MCP server named "${name}".`);
    }
    await this.manager.reload();
  }
}
