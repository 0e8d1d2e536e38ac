/**
 * shell_exec's default allowlist preset is named "default" (it was stored as "seed"): the migration rewrites stored
 * values, on SQLite and PostgreSQL, and leaves every other value as it was.
 */
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/storage/database.js";
import { migrateToLatest } from "../../src/storage/migrate.js";
import { migrations } from "../../src/storage/migrations.js";
import { SqlToolSettingsStore } from "../../src/storage/repositories.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { tempDir } from "../helpers/temp.js";

const NAME = "0015_allowlist_preset_default";

describe.each(["sqlite", "postgres"] as const)("allowlist preset migration on %s", (dialect) => {
  it.skipIf(dialect === "postgres" && !findPgBin())('rewrites a stored "seed" preset to "default"', async () => {
    const url = dialect === "sqlite" ? `sqlite:${tempDir()}/toolhost.db` : await freshPostgresDatabase();
    const database = await openDatabase({ url });
    try {
      const store = new SqlToolSettingsStore(database.db);
      // What an older version stored: its default preset by its old name, beside values the migration must keep.
      await store.save("ana", "shell_exec", {
        enabled: true,
        parameters: { allowlistPreset: "seed", timeoutSeconds: 9 },
      });
      await store.save("bob", "shell_exec", { enabled: true, parameters: { allowlistPreset: "strict" } });
      await store.save("cy", "bash", { enabled: true, parameters: { note: "seed" } });
      await sql`DELETE FROM kysely_migration WHERE name = ${NAME}`.execute(database.db);
      await migrateToLatest(database.db, migrations, { location: "test", warn: () => {} });
      expect((await store.get("ana", "shell_exec"))?.parameters).toEqual({
        allowlistPreset: "default",
        timeoutSeconds: 9,
      });
      expect((await store.get("bob", "shell_exec"))?.parameters).toEqual({ allowlistPreset: "strict" });
      expect((await store.get("cy", "bash"))?.parameters).toEqual({ note: "seed" });
    } finally {
      await database.close();
    }
  });
});
