/**
 * Crash-safe migrations on SQLite and PostgreSQL: a half-applied schema left by an older version is completed,
 * concurrent first starts all succeed, and SIGKILL at random points of a first start never leaves a directory that
 * fails to start.
 */
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { MigrationError, migrateToLatest, SchemaDamageError } from "../../src/storage/migrate.js";
import { migrations } from "../../src/storage/migrations.js";
import { runCli } from "../helpers/cli.js";
import { recordingLogger } from "../helpers/runtime.js";
import { freshStore, HAVE_POSTGRES, NO_EXTRA_CA, type TestStore } from "../helpers/stores.js";

const open = (store: TestStore) =>
  openDatabase(store.databaseUrl ? { url: store.databaseUrl } : { dataDir: store.dataDir });

/** Table → sorted column names, and the recorded migrations. */
async function schemaOf(database: ToolhostDatabase) {
  const tables = await database.db.introspection.getTables();
  const shape = Object.fromEntries(
    tables
      .filter((t) => !t.name.startsWith("kysely_"))
      .map((t) => [t.name, t.columns.map((c) => c.name).sort()] as const)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  const recorded = (
    await database.db
      .selectFrom("kysely_migration" as never)
      .select("name" as never)
      .execute()
  ).map((r) => (r as { name: string }).name);
  return { shape, recorded: recorded.sort() };
}

/**
 * The process a SIGKILL test kills: it opens a fresh data directory's database — creating the file, switching it to
 * WAL and migrating it — with openDatabase, the function every command's first start runs, and that is all a first
 * start writes. The Toolhost part is bundled once (esbuild) into one file, so that a child costs a Node start and
 * the few modules it runs rather than the import of the whole CLI. The child prints "started" once it has loaded that
 * file, right before openDatabase: loading writes nothing, so the kills are aimed at the part that writes. Written
 * into node_modules/.cache so that it resolves better-sqlite3 as the source does. Returns the child's script and a
 * function that removes what it wrote.
 */
async function bundleFirstStart(): Promise<{ script: string; remove(): void }> {
  const { build } = await import("esbuild");
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const dir = join(root, "node_modules", ".cache", "toolhost-tests");
  const script = join(dir, `first-start-${process.pid}.mjs`);
  const opener = join(dir, `first-start-${process.pid}-open.mjs`);
  await build({
    stdin: {
      contents: `export { openDatabase } from ${JSON.stringify(join(root, "src/storage/database.ts"))};`,
      resolveDir: root,
      loader: "ts",
    },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["better-sqlite3", "pg"],
    outfile: opener,
    logLevel: "error",
  });
  writeFileSync(
    script,
    `const { openDatabase } = await import(${JSON.stringify(pathToFileURL(opener).href)});
process.stdout.write("started\\n");
const database = await openDatabase({ dataDir: process.argv[2], url: "" });
await database.close();
`,
  );
  const remove = () => {
    for (const file of [script, opener]) rmSync(file, { force: true });
  };
  return { script, remove };
}

// Every test works on a store of its own, and most of their time is waiting (on PostgreSQL, on child processes):
// they run concurrently.
describe("migrations", { concurrent: true }, () => {
  describe("SIGKILL during a first start", () => {
    it("never leaves a data directory that fails to start (14 kills at random points of its writing part)", async () => {
      const { script, remove } = await bundleFirstStart();
      try {
        /** Starts a first start on a fresh data directory; `opening` resolves once the process has started. */
        const firstStart = async () => {
          const store = await freshStore("sqlite");
          const child = spawn(process.execPath, [script, store.dataDir], {
            env: { ...process.env, ...NO_EXTRA_CA },
            stdio: ["ignore", "pipe", "inherit"],
          });
          const exited = new Promise<string>((resolve) =>
            child.once("exit", (code, signal) => resolve(signal ?? `exit ${code}`)),
          );
          const opening = new Promise<number>((resolve) => child.stdout.once("data", () => resolve(performance.now())));
          return { store, child, exited, opening };
        };
        // How long a first start takes here once its code is loaded, so that the kills land across all of what it
        // writes (creating the file, WAL, migrating); Node's start and the code's loading, which write nothing, are
        // not aimed at (aimed across the loading too, 20 kills put 11–14 into the writing part; 14 do now). The shorter of
        // two runs, so that one slowed down by the machine does not send most kills after the end.
        const probe = async () => {
          const run = await firstStart();
          const began = await run.opening;
          expect(await run.exited).toBe("exit 0");
          return performance.now() - began;
        };
        const duration = Math.min(await probe(), await probe());
        /** One first start, killed at a random point of it; resolves once the process is gone. */
        const killed = async () => {
          const { store, child, exited, opening } = await firstStart();
          await opening;
          const at = Math.random() * duration;
          const timer = setTimeout(() => child.kill("SIGKILL"), at);
          const how = await exited;
          clearTimeout(timer);
          return { store, at: Math.round(at), exited: how };
        };
        // Seven at a time, the kills overlapping; this process does nothing else meanwhile, so that its timers fire
        // when they are due.
        const kills = [
          ...(await Promise.all(Array.from({ length: 7 }, killed))),
          ...(await Promise.all(Array.from({ length: 7 }, killed))),
        ];
        // Then the next start of each directory, in this process: the same start a command makes (open the data
        // directory, migrate, list the tools), without paying for a fresh Node process each time.
        for (const { store, at } of kills) {
          const logger = recordingLogger();
          const after = await createAppContext({ dataDir: store.dataDir, databaseUrl: "", logger })
            .then(async (ctx) => {
              try {
                return (await ctx.settings.list("local")).length > 0 ? "listed" : "no tools";
              } finally {
                await ctx.close();
              }
            })
            .catch((error: Error) => error.message);
          const errors = logger.lines.filter((l) => l.level === "error");
          expect({ at, after, errors }).toEqual({ at, after: "listed", errors: [] });
        }
        expect(kills).toHaveLength(14);
        // At least half the kills must have hit a running start (not one that had already finished).
        expect(
          kills.filter((k) => k.exited === "SIGKILL").length,
          JSON.stringify({ duration, kills: kills.map(({ at, exited }) => ({ at, exited })) }),
        ).toBeGreaterThanOrEqual(7);
      } finally {
        remove();
      }
    }, 120_000);
  });

  for (const dialect of ["sqlite", "postgres"] as const) {
    describe.skipIf(dialect === "postgres" && !HAVE_POSTGRES)(`migrations on ${dialect}`, () => {
      it("completes a half-applied schema (bookkeeping rows deleted, a table dropped) on the next start", async () => {
        const store = await freshStore(dialect);
        const first = await open(store);
        const expected = await schemaOf(first);
        expect(expected.recorded).toEqual(Object.keys(migrations).sort());
        // What an older version's crash could leave: no bookkeeping, one table missing, the rest in place.
        await sql`DELETE FROM kysely_migration`.execute(first.db);
        await sql`DROP TABLE file_reads`.execute(first.db);
        await first.close();
        const again = await open(store);
        try {
          expect(await schemaOf(again)).toEqual(expected);
          // And the repaired database works.
          await again.db
            .insertInto("file_reads")
            .values({ chat_id: "c", path: "/p", sha256: "x", read_at: "t" })
            .execute();
        } finally {
          await again.close();
        }
      });

      it("a table or column dropped while its bookkeeping row stays is recreated at the next start, with a warning", async () => {
        const store = await freshStore(dialect);
        const first = await open(store);
        const expected = await schemaOf(first);
        await sql`DROP TABLE approvals`.execute(first.db);
        await sql`ALTER TABLE audit_log DROP COLUMN sandboxed`.execute(first.db);
        const warnings: string[] = [];
        // What a start does: the bookkeeping says everything is applied.
        await migrateToLatest(first.db, migrations, { location: "test", warn: (m) => warnings.push(m) });
        try {
          expect(await schemaOf(first)).toEqual(expected);
          expect(warnings).toHaveLength(1);
          expect(warnings[0]).toMatch(
            /lacked audit_log\.sandboxed, approvals .*0001_initial, 0006_approvals_and_audit/,
          );
          expect(warnings[0]).toMatch(/comes back empty/);
          // Up to date and intact: no warning, nothing to do.
          await migrateToLatest(first.db, migrations, { location: "test", warn: (m) => warnings.push(m) });
          expect(warnings).toHaveLength(1);
        } finally {
          await first.close();
        }
      });

      it("says exactly what to do when a missing table cannot be recreated", async () => {
        const store = await freshStore(dialect);
        const database = await open(store);
        try {
          // A view in the dropped table's place: CREATE TABLE IF NOT EXISTS leaves it, so the table stays missing.
          await sql`DROP TABLE approval_turns`.execute(database.db);
          await sql`CREATE VIEW approval_turns AS SELECT 1 AS x`.execute(database.db);
          const error = await migrateToLatest(database.db, migrations, { location: "test", warn: () => {} }).catch(
            (e) => e,
          );
          expect(error).toBeInstanceOf(SchemaDamageError);
          expect(error.message).toMatch(/lacks approval_turns/);
          expect(error.message).toMatch(
            /DELETE FROM kysely_migration WHERE name IN \('0006_approvals_and_audit'\)\) and start again/,
          );
        } finally {
          await database.close();
        }
      });

      it("a failing migration is rolled back whole and named, with what to do", async () => {
        const store = await freshStore(dialect);
        const database = await open(store);
        try {
          const broken = {
            ...migrations,
            "9999_broken": {
              async up(db: typeof database.db) {
                await db.schema.createTable("half_done").addColumn("id", "text").execute();
                await sql`SELECT * FROM no_such_table`.execute(db);
              },
            },
          };
          const error = await migrateToLatest(database.db, broken, { location: "test" }).catch((e) => e);
          expect(error).toBeInstanceOf(MigrationError);
          expect(error.message).toMatch(/"9999_broken" failed on test: .*rolled back.*start again/s);
          const tables = (await database.db.introspection.getTables()).map((t) => t.name);
          expect(tables).not.toContain("half_done");
        } finally {
          await database.close();
        }
      });

      if (dialect === "sqlite") {
        it("three commands started at once on a fresh data directory all succeed", async () => {
          // Three processes of the real bin: each opens the same new SQLite file, one switches it to WAL and migrates,
          // the others wait for its write lock and find the migrations recorded.
          const store = await freshStore(dialect);
          const runs = await Promise.all([
            runCli(["settings", "get", "grep"], { ...store.env, ...NO_EXTRA_CA }),
            runCli(["audit", "--json"], { ...store.env, ...NO_EXTRA_CA }),
            runCli(["token", "list"], { ...store.env, ...NO_EXTRA_CA }),
          ]);
          expect(runs.map((r) => [r.code, r.stderr])).toEqual([
            [0, ""],
            [0, ""],
            [0, ""],
          ]);
        }, 60_000);
      } else {
        it("three starts at once on a fresh database all succeed", async () => {
          // Three starts of this process, each with its own connection pool: PostgreSQL sees three sessions racing to
          // migrate, as it would from three processes (the advisory lock serializes them; the others find the
          // migrations recorded). A process of the bin per start proves nothing more to the server.
          const store = await freshStore(dialect);
          const starts = await Promise.all([open(store), open(store), open(store)]);
          try {
            const schemas = await Promise.all(starts.map((database) => schemaOf(database)));
            expect(schemas[0]!.recorded).toEqual(Object.keys(migrations).sort());
            expect(schemas[1]).toEqual(schemas[0]);
            expect(schemas[2]).toEqual(schemas[0]);
          } finally {
            await Promise.all(starts.map((database) => database.close()));
          }
        }, 60_000);
      }
    });
  }

  describe("bookkeeping of earlier versions", () => {
    it("keeps the history recorded by Kysely's migrator and runs a migration that landed out of order", async () => {
      const store = await freshStore("sqlite");
      const database = await open(store);
      await sql`DELETE FROM kysely_migration WHERE name = '0003_settings_version'`.execute(database.db);
      await database.close();
      // The column exists already; re-running 0003 skips the ADD COLUMN and records it.
      const raw = new Database(`${store.dataDir}/toolhost.db`);
      expect(
        raw.prepare("SELECT count(*) AS n FROM pragma_table_info('user_tool_settings') WHERE name = 'version'").get(),
      ).toEqual({ n: 1 });
      raw.close();
      const again = await open(store);
      try {
        expect((await schemaOf(again)).recorded).toContain("0003_settings_version");
      } finally {
        await again.close();
      }
    });
  });
});
