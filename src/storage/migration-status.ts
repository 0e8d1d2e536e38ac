/** Which schema migrations a database has applied, for diagnostics (`toolhost doctor`). Reads only. */
import { type Kysely, type Migration, type MigrationProvider, Migrator } from "kysely";
import { migrations } from "./migrations.js";

/** Applied and pending migrations of a database, by name, in the order they run. */
export interface MigrationStatus {
  applied: string[];
  pending: string[];
}

class Provider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return migrations;
  }
}

/** Reads the migration state of an open database (does not migrate). Throws when the database cannot be read. */
export async function migrationStatus(db: Kysely<any>): Promise<MigrationStatus> {
  const all = await new Migrator({ db, provider: new Provider() }).getMigrations();
  return {
    applied: all.filter((m) => m.executedAt !== undefined).map((m) => m.name),
    pending: all.filter((m) => m.executedAt === undefined).map((m) => m.name),
  };
}
