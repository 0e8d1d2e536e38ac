/**
 * The configured external MCP servers (config file + database), read without loading the MCP client SDK: a command
 * can see that none is configured, or which one it needs, before paying for the client.
 */
import type { McpServerRepository } from "../../storage/mcp-server-repository.js";
import { loadConfigFileServers, type NamedMcpServerConfig, parseMcpServerConfig } from "./config.js";

/** Loads the configured servers: the config file's `mcpServers`, then the database's (a name in both: the file wins). */
export async function loadAllServers(
  repository: McpServerRepository,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ servers: NamedMcpServerConfig[]; errors: { name: string; message: string }[] }> {
  const file = loadConfigFileServers(env);
  const servers = [...file.servers];
  const errors = [...file.errors];
  for (const stored of await repository.list()) {
    if (servers.some((s) => s.name === stored.name)) {
      errors.push({
        name: `${stored.name} (database)`,
        message: `A server named "${stored.name}" is also in the config file, which wins; remove one of them.`,
      });
      continue;
    }
    try {
      servers.push({ name: stored.name, config: parseMcpServerConfig(stored.name, stored.config), source: "database" });
    } catch (error) {
      errors.push({ name: stored.name, message: (error as Error).message });
    }
  }
  return { servers, errors };
}
