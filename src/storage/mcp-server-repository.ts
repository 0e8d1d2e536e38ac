/**
 * External MCP servers added through the admin API or `toolhost mcp-servers add` (`mcp_servers`). Servers named in
 * the config file are not stored here; both lists are merged by the MCP client (src/mcp/client). Adding and
 * removing are single statements, atomic on SQLite and PostgreSQL alike (the primary key refuses a duplicate).
 */
import type { Kysely } from "kysely";
import { BrandedError, errorBrand } from "../core/errors.js";
import type { DatabaseSchema } from "./database.js";

/** A row of `mcp_servers`: the server's name and its configuration as JSON text. */
export interface McpServersTable {
  name: string;
  config: string;
  created_at: string;
}

/** A stored server: its name, its configuration object and when it was added (ISO-8601 UTC). */
export interface StoredMcpServer {
  name: string;
  config: Record<string, unknown>;
  createdAt: string;
}

/** Thrown by add when a server of that name is already stored. */
export class McpServerExistsError extends BrandedError {
  static override readonly brand: symbol = errorBrand("McpServerExistsError");
  override readonly name = "McpServerExistsError";
}

type Db = Kysely<DatabaseSchema & { mcp_servers: McpServersTable }>;

/** Reads and changes the stored MCP servers. */
export class McpServerRepository {
  readonly #db: Db;

  constructor(db: Kysely<DatabaseSchema>) {
    this.#db = db as unknown as Db;
  }

  /** Every stored server, sorted by name. */
  async list(): Promise<StoredMcpServer[]> {
    const rows = await this.#db.selectFrom("mcp_servers").selectAll().orderBy("name").execute();
    return rows.map((r) => ({ name: r.name, config: JSON.parse(r.config), createdAt: r.created_at }));
  }

  /** Stores a server; throws McpServerExistsError when the name is taken. */
  async add(name: string, config: Record<string, unknown>): Promise<StoredMcpServer> {
    const createdAt = new Date().toISOString();
    const inserted = await this.#db
      .insertInto("mcp_servers")
      .values({ name, config: JSON.stringify(config), created_at: createdAt })
      .onConflict((oc) => oc.column("name").doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) {
      throw new McpServerExistsError(`An MCP server named "${name}" already exists; remove it first.`);
    }
    return { name, config, createdAt };
  }

  /** Removes a server; returns whether it was stored. */
  async remove(name: string): Promise<boolean> {
    const result = await this.#db.deleteFrom("mcp_servers").where("name", "=", name).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
