/**
 * Secrets every instance on one database shares (the `server_secrets` table, migration 0009): the approval
 * signing key. Instances share the database and nothing else, so a secret that must agree between them lives here.
 */
import type { Kysely } from "kysely";
import type { DatabaseSchema } from "./database.js";

/** Reads and first-writes shared secrets. */
export class ServerSecretRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /**
   * The stored value of secret `name`; when none is stored yet, `candidate` is stored first. Two instances starting
   * at once both get the one value that was stored first (`INSERT … ON CONFLICT DO NOTHING`, then a read). Throws the
   * database error.
   */
  async adopt(name: string, candidate: string): Promise<string> {
    // Read first: every start but the first one writes nothing (on SQLite a write would take the database's lock).
    const stored = await this.#read(name);
    if (stored !== undefined) return stored;
    await this.db
      .insertInto("server_secrets")
      .values({ name, value: candidate, created_at: new Date().toISOString() })
      .onConflict((oc) => oc.column("name").doNothing())
      .execute();
    const value = await this.#read(name);
    if (value === undefined) throw new Error(`The shared secret ${name} could not be stored.`);
    return value;
  }

  async #read(name: string): Promise<string | undefined> {
    const row = await this.db.selectFrom("server_secrets").select("value").where("name", "=", name).executeTakeFirst();
    return row?.value;
  }
}
