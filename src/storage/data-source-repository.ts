/**
 * Data sources added through the admin API or `toolhost data-sources add` (`data_sources`). Sources named in the
 * config file are not stored here; both lists are merged by the data-source catalog (src/tools/data/sources.ts).
 * Adding and removing are single statements, atomic on SQLite and PostgreSQL alike (the primary key refuses a
 * duplicate). The stored URL holds the source's password: nothing reads this table except the catalog and the
 * admin service, which shows URLs redacted.
 */
import type { Kysely } from "kysely";
import { BrandedError, errorBrand } from "../core/errors.js";
import type { DatabaseSchema } from "./database.js";

/** A row of `data_sources`: the name and the declaration `{url, description?}` as JSON text. */
export interface DataSourcesTable {
  name: string;
  config: string;
  created_at: string;
}

/** A stored source: its name, its declaration and when it was added (ISO-8601 UTC). */
export interface StoredDataSource {
  name: string;
  config: Record<string, unknown>;
  createdAt: string;
}

/** Thrown by add when a source of that name is already stored. */
export class DataSourceExistsError extends BrandedError {
  static override readonly brand: symbol = errorBrand("DataSourceExistsError");
  override readonly name = "DataSourceExistsError";
}

type Db = Kysely<DatabaseSchema & { data_sources: DataSourcesTable }>;

/** Reads and changes the stored data sources. */
export class DataSourceRepository {
  readonly #db: Db;

  constructor(db: Kysely<DatabaseSchema>) {
    this.#db = db as unknown as Db;
  }

  /** Every stored source, sorted by name. */
  async list(): Promise<StoredDataSource[]> {
    const rows = await this.#db.selectFrom("data_sources").selectAll().orderBy("name").execute();
    return rows.map((r) => ({ name: r.name, config: JSON.parse(r.config), createdAt: r.created_at }));
  }

  /** Stores a source; throws DataSourceExistsError when the name is taken. */
  async add(name: string, config: Record<string, unknown>): Promise<StoredDataSource> {
    const createdAt = new Date().toISOString();
    const inserted = await this.#db
      .insertInto("data_sources")
      .values({ name, config: JSON.stringify(config), created_at: createdAt })
      .onConflict((oc) => oc.column("name").doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) {
      throw new DataSourceExistsError(`A data source named "${name}" already exists; remove it first.`);
    }
    return { name, config, createdAt };
  }

  /** Removes a source; returns whether it was stored. */
  async remove(name: string): Promise<boolean> {
    const result = await this.#db.deleteFrom("data_sources").where("name", "=", name).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
