/**
 * sql_schema and sql_query on real databases: the suite's PostgreSQL cluster, its MariaDB server and SQLite files.
 * Per database: the schema listing, a count, a parameterized query, JSON-safe values, every write shape refused with
 * the data unchanged (row counts; the SQLite file's hash), one statement per call, a sleep past the timeout stopped
 * on the server (nothing left in its process list), maxRows cutting a 100,000-row result and a 10-billion-row one
 * (which could never be read within the budget), the source's password absent from every result, error, audit
 * record and log line, an unreachable source, a privileged account refused, and a user without the source refused.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { type ToolCallOutcome, ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import { sqlQueryTool } from "../../src/tools/builtin/sql-query.js";
import { sqlSchemaTool } from "../../src/tools/builtin/sql-schema.js";
import { ROW_MAX_BYTES } from "../../src/tools/data/common.js";
import { DataSourceCatalog } from "../../src/tools/data/sources.js";
import { freshMariadbDatabase, mariadbSkipReason } from "../helpers/mariadb.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { recordingLogger } from "../helpers/runtime.js";
import { until } from "../helpers/until.js";
import { tempDir } from "../shell/helpers.js";

const ROWS = 100_000;
const tag = Math.random().toString(36).slice(2, 8);
const PASSWORDS = {
  reader: `Rd-${tag}-s3cr3t`,
  writer: `Wr-${tag}-s3cr3t`,
  down: `Dn-${tag}-s3cr3t`,
  member: `Mb-${tag}-s3cr3t`,
};

/** One database under test: its sources (reader, writer, privileged, down) and how to inspect it directly. */
interface Fixture {
  dialect: "postgres" | "mysql" | "sqlite";
  sources: Record<string, { url: string; description?: string }>;
  /** Row counts of the tables, read directly (not through the tools). */
  counts(): Promise<Record<string, number>>;
  /** Statements currently running on the server that contain `marker`. */
  running?(marker: string): Promise<number>;
  /** Ends, from another session, the connections running a statement that contains `marker` (as an admin would). */
  terminate?(marker: string): Promise<void>;
  /** A statement taking a session-level lock that outlives its transaction, and whether the lock is held (read directly). */
  sessionLock?: { sql: string; held(): Promise<boolean> };
  /** Fingerprint of everything on disk (SQLite) for "unchanged". */
  fingerprint?(): string;
  placeholder(n: number): string;
  sleep: string;
  /** Write shapes beyond the common ones, each refused as a write. */
  writes: string[];
  /**
   * Sources whose account could get around a read-only transaction (a superuser; a role it may switch to holds what
   * a read-only transaction does not stop): refused before any statement runs.
   */
  privileged: string[];
  close(): Promise<void>;
}

const COMMON_WRITES = [
  "DELETE FROM items",
  "INSERT INTO items (id, name) VALUES (99, 'x')",
  "UPDATE items SET name = 'changed'",
  "DROP TABLE items",
  "CREATE TABLE intruder (a int)",
  "ALTER TABLE items ADD COLUMN extra int",
];

async function postgresFixture(): Promise<Fixture> {
  const adminUrl = await freshPostgresDatabase();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const reader = `reader_${tag}`;
  const writer = `writer_${tag}`;
  await admin.query(`
    CREATE ROLE ${writer} LOGIN PASSWORD '${PASSWORDS.writer}';
    CREATE ROLE ${reader} LOGIN PASSWORD '${PASSWORDS.reader}';
    CREATE ROLE boss_${tag} NOLOGIN SUPERUSER;
    CREATE ROLE member_${tag} LOGIN NOINHERIT PASSWORD '${PASSWORDS.member}';
    GRANT boss_${tag} TO member_${tag};
    GRANT CREATE, USAGE ON SCHEMA public TO ${writer};
    SET ROLE ${writer};
    CREATE TABLE owners (id int PRIMARY KEY, name text NOT NULL);
    CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, owner int REFERENCES owners(id), price numeric(12,2),
      big bigint, created timestamptz, day date, data bytea, doc jsonb);
    CREATE INDEX items_name_idx ON items (name);
    CREATE TABLE big (id int);
    CREATE SEQUENCE counter;
    CREATE FUNCTION bump() RETURNS int LANGUAGE sql AS $$ INSERT INTO owners VALUES (nextval('counter')::int + 100, 'bumped') RETURNING 1 $$;
    INSERT INTO owners VALUES (1, 'ann'), (2, 'bob');
    INSERT INTO items VALUES (1, 'apple', 1, 1.50, 9007199254740993, '2024-05-01T10:20:30Z', '2024-05-01', '\\x00ff10', '{"a": [1, 2]}'),
                             (2, 'pear', 2, 2.25, 2, NULL, NULL, NULL, NULL);
    INSERT INTO big SELECT g FROM generate_series(1, ${ROWS}) g;
    ANALYZE;
    GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${reader};
    GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ${reader};
    RESET ROLE;
  `);
  const url = (user: string, password: string) => adminUrl.replace("toolhost@", `${user}:${password}@`);
  return {
    dialect: "postgres",
    sources: {
      ro: { url: url(reader, PASSWORDS.reader), description: "Shop items and owners" },
      rw: { url: url(writer, PASSWORDS.writer) },
      root: { url: adminUrl },
      big: { url: url(reader, PASSWORDS.reader) },
      // Not a superuser itself, but may SET ROLE to one (then COPY … TO PROGRAM runs inside a read-only transaction).
      member: { url: url(`member_${tag}`, PASSWORDS.member) },
      down: { url: `postgres://someone:${PASSWORDS.down}@127.0.0.1:1/nothing` },
    },
    privileged: ["root", "member"],
    async counts() {
      const { rows } = await admin.query(
        "SELECT (SELECT count(*) FROM items)::int AS items, (SELECT count(*) FROM owners)::int AS owners, (SELECT count(*) FROM big)::int AS big, (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')::int AS tables",
      );
      return rows[0];
    },
    async running(marker) {
      const { rows } = await admin.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()",
        [`%${marker}%`],
      );
      return rows[0].n;
    },
    async terminate(marker) {
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()",
        [`%${marker}%`],
      );
    },
    sessionLock: {
      sql: "SELECT pg_advisory_lock(4242) IS NULL AS locked",
      async held() {
        const { rows } = await admin.query(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted",
        );
        return rows[0].n > 0;
      },
    },
    placeholder: (n) => `$${n}`,
    sleep: "SELECT pg_sleep(30) AS marker_sleep",
    writes: [
      "WITH d AS (DELETE FROM items RETURNING *) SELECT count(*) FROM d",
      "SET TRANSACTION READ WRITE",
      "COPY (SELECT 1) TO PROGRAM 'true'",
      "SELECT bump()",
      "SELECT nextval('counter')",
      "TRUNCATE items",
      "SELECT * INTO intruder FROM items",
      // Transaction control inside a DO block (or a procedure that commits) cannot end the read-only transaction.
      "DO $$ BEGIN COMMIT; END $$",
    ],
    close: () => admin.end(),
  };
}

async function mysqlFixture(): Promise<Fixture> {
  const adminUrl = await freshMariadbDatabase();
  const database = new URL(adminUrl).pathname.slice(1);
  const admin = await mysql.createConnection({ uri: adminUrl, multipleStatements: true });
  const reader = `reader_${tag}`;
  const writer = `writer_${tag}`;
  await admin.query(`
    CREATE TABLE owners (id int PRIMARY KEY, name varchar(50) NOT NULL);
    CREATE TABLE items (id int PRIMARY KEY, name varchar(50) NOT NULL, owner int, price decimal(12,2), big bigint,
      created datetime, day date, data varbinary(10), doc json, INDEX items_name_idx (name),
      CONSTRAINT items_owner_fk FOREIGN KEY (owner) REFERENCES owners(id));
    CREATE TABLE big (id int);
    CREATE TABLE log (id int AUTO_INCREMENT PRIMARY KEY, note varchar(20)) ENGINE=MyISAM;
    INSERT INTO owners VALUES (1, 'ann'), (2, 'bob');
    INSERT INTO items VALUES (1, 'apple', 1, 1.50, 9007199254740993, '2024-05-01 10:20:30', '2024-05-01', x'00ff10', '{"a": [1, 2]}'),
                             (2, 'pear', 2, 2.25, 2, NULL, NULL, NULL, NULL);
    SET SESSION max_recursive_iterations = 1000000;
    INSERT INTO big (id) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${ROWS}) SELECT n FROM s;
    CREATE FUNCTION bump() RETURNS int MODIFIES SQL DATA BEGIN INSERT INTO log (note) VALUES ('bumped'); RETURN 1; END;
    CREATE USER '${reader}'@'127.0.0.1' IDENTIFIED BY '${PASSWORDS.reader}';
    GRANT SELECT, EXECUTE ON \`${database}\`.* TO '${reader}'@'127.0.0.1';
    CREATE USER '${writer}'@'127.0.0.1' IDENTIFIED BY '${PASSWORDS.writer}';
    GRANT ALL PRIVILEGES ON \`${database}\`.* TO '${writer}'@'127.0.0.1';
    CREATE ROLE filer_${tag};
    GRANT FILE ON *.* TO filer_${tag};
    CREATE ROLE outer_${tag};
    GRANT filer_${tag} TO outer_${tag};
    CREATE USER 'member_${tag}'@'127.0.0.1' IDENTIFIED BY '${PASSWORDS.member}';
    GRANT SELECT ON \`${database}\`.* TO 'member_${tag}'@'127.0.0.1';
    GRANT outer_${tag} TO 'member_${tag}'@'127.0.0.1';
  `);
  const url = (user: string, password: string) => adminUrl.replace(/\/\/[^@]+@/, `//${user}:${password}@`);
  return {
    dialect: "mysql",
    sources: {
      ro: { url: url(reader, PASSWORDS.reader), description: "Shop items and owners" },
      rw: { url: url(writer, PASSWORDS.writer) },
      root: { url: adminUrl },
      // FILE only through a role (granted to a role granted to the account): SET ROLE, then INTO OUTFILE.
      member: { url: url(`member_${tag}`, PASSWORDS.member) },
      down: { url: `mysql://someone:${PASSWORDS.down}@127.0.0.1:1/nothing` },
    },
    privileged: ["root", "member"],
    async counts() {
      const [rows] = await admin.query(
        `SELECT (SELECT count(*) FROM items) AS items, (SELECT count(*) FROM owners) AS owners, (SELECT count(*) FROM big) AS big,
                (SELECT count(*) FROM log) AS log, (SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()) AS tables`,
      );
      return Object.fromEntries(
        Object.entries((rows as Record<string, unknown>[])[0] ?? {}).map(([k, v]) => [k, Number(v)]),
      );
    },
    async running(marker) {
      const [rows] = await admin.query(
        "SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()",
        [`%${marker}%`],
      );
      return Number((rows as { n: number }[])[0]?.n);
    },
    async terminate(marker) {
      const [rows] = await admin.query(
        "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()",
        [`%${marker}%`],
      );
      for (const { id } of rows as { id: number }[]) await admin.query(`KILL ${Number(id)}`);
    },
    sessionLock: {
      sql: `SELECT GET_LOCK('toolhost_${tag}', 0) AS locked`,
      async held() {
        const [rows] = await admin.query(`SELECT IS_USED_LOCK('toolhost_${tag}') AS holder`);
        return (rows as { holder: unknown }[])[0]?.holder != null;
      },
    },
    placeholder: () => "?",
    sleep: "SELECT SLEEP(30) AS marker_sleep",
    writes: [
      "INSERT INTO log (note) VALUES ('x')",
      "SET TRANSACTION READ WRITE",
      "SELECT bump()",
      "TRUNCATE items",
      "SELECT 1 INTO OUTFILE '/tmp/toolhost-outfile-test'",
      "CREATE TEMPORARY TABLE intruder (a int)",
      "CREATE USER intruder",
      "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE owners",
      // One statement holding several (MariaDB's compound statements, also prepared and run at once): it must not
      // end the read-only transaction, make the session writable and write in a new one.
      "BEGIN NOT ATOMIC COMMIT; SET SESSION TRANSACTION READ WRITE; INSERT INTO log (note) VALUES ('x'); END",
      "IF 1 THEN ROLLBACK; SET SESSION tx_read_only = 0; START TRANSACTION; DELETE FROM items; COMMIT; END IF",
      "FOR i IN 1..1 DO CREATE TABLE intruder (a int); END FOR",
      "EXECUTE IMMEDIATE 'BEGIN NOT ATOMIC COMMIT; SET SESSION TRANSACTION READ WRITE; INSERT INTO log (note) VALUES (1); END'",
    ],
    close: () => admin.end(),
  };
}

async function sqliteFixture(dir: string): Promise<Fixture> {
  const file = join(dir, "shop.db");
  const db = new Database(file);
  db.exec(`
    CREATE TABLE owners (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, owner INTEGER REFERENCES owners(id), price NUMERIC,
      big INTEGER, created TEXT, day TEXT, data BLOB, doc TEXT);
    CREATE INDEX items_name_idx ON items (name);
    CREATE TABLE big (id INTEGER);
    INSERT INTO owners VALUES (1, 'ann'), (2, 'bob');
    INSERT INTO items VALUES (1, 'apple', 1, 1.5, 9007199254740993, '2024-05-01T10:20:30.000Z', '2024-05-01', x'00ff10', '{"a":[1,2]}'),
                             (2, 'pear', 2, 2.25, 2, NULL, NULL, NULL, NULL);
    WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${ROWS}) INSERT INTO big SELECT n FROM s;
  `);
  db.close();
  const vacuumTarget = join(dir, "copy.db");
  return {
    dialect: "sqlite",
    sources: {
      ro: { url: `sqlite:${file}`, description: "Shop items and owners" },
      rw: { url: `sqlite:${file}` },
      down: { url: `sqlite:${join(dir, "missing.db")}` },
    },
    privileged: [],
    async counts() {
      const check = new Database(file, { readonly: true });
      try {
        const row = check
          .prepare(
            "SELECT (SELECT count(*) FROM items) AS items, (SELECT count(*) FROM owners) AS owners, (SELECT count(*) FROM big) AS big, (SELECT count(*) FROM sqlite_schema) AS tables",
          )
          .get() as Record<string, number>;
        return { ...row, vacuumCopy: existsSync(vacuumTarget) ? 1 : 0 };
      } finally {
        check.close();
      }
    },
    fingerprint: () =>
      createHash("sha256")
        .update(readFileSync(file))
        .update(String(existsSync(`${file}-journal`)))
        .update(String(existsSync(`${file}-wal`)))
        .digest("hex"),
    placeholder: () => "?",
    sleep: "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s) SELECT count(*) AS marker_sleep FROM s",
    writes: [
      `VACUUM INTO '${vacuumTarget}'`,
      "PRAGMA user_version = 7",
      "REPLACE INTO owners VALUES (1, 'zed')",
      `ATTACH DATABASE '${join(dir, "attached.db")}' AS other`,
      "CREATE TEMP TABLE intruder (a int)",
    ],
    close: async () => {},
  };
}

const pgSkip = findPgBin() ? undefined : "PostgreSQL is not installed";
const mariadbSkip = mariadbSkipReason();

/** Resolves once `check` holds (the shared until()); fails after 5 s. */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  await until(check, "the condition", { timeoutMs: 5_000, intervalMs: 20 });
}

const cases: { name: string; skip: string | undefined; make: (dir: string) => Promise<Fixture> }[] = [
  { name: "PostgreSQL", skip: pgSkip, make: postgresFixture },
  { name: "MariaDB", skip: mariadbSkip, make: mysqlFixture },
  { name: "SQLite", skip: undefined, make: sqliteFixture },
];

for (const { name, skip, make } of cases) {
  describe.skipIf(skip !== undefined).concurrent(`SQL tools on ${name}${skip ? ` (skipped: ${skip})` : ""}`, () => {
    let fixture: Fixture;
    let runtime: ToolRuntime;
    let store: MemoryToolSettingsStore;
    let audit: MemoryAuditSink;
    let logger: ReturnType<typeof recordingLogger>;
    let catalog: DataSourceCatalog;
    let cleanup: () => void;
    const outputs: unknown[] = [];

    beforeAll(async () => {
      const temp = tempDir("toolhost-sql-");
      cleanup = temp.cleanup;
      fixture = await make(temp.dir);
      const config = join(temp.dir, "config.json");
      writeFileSync(config, JSON.stringify({ dataSources: fixture.sources }));
      logger = recordingLogger();
      catalog = new DataSourceCatalog({ env: { TOOLHOST_CONFIG: config }, onError: (e) => logger.warn(e, "skipped") });
      const registry = new ToolRegistryStore();
      registry.register(sqlQueryTool);
      registry.register(sqlSchemaTool);
      store = new MemoryToolSettingsStore();
      audit = new MemoryAuditSink();
      runtime = new ToolRuntime({ registry, store, audit, logger, services: { dataSources: catalog } });
      for (const tool of ["sql_query", "sql_schema"]) {
        await store.save("u1", tool, { enabled: true, parameters: {} });
        await store.save("short", tool, { enabled: true, parameters: { timeoutSeconds: 1 } });
        await store.save("limited", tool, { enabled: true, parameters: { allowedSources: ["rw"] } });
      }
    });

    afterAll(async () => {
      // The password check covers everything the calls produced (results, errors, audit records, log lines).
      const text = JSON.stringify([outputs, audit?.entries, audit?.events, logger?.lines]);
      for (const password of Object.values(PASSWORDS)) expect(text).not.toContain(password);
      await catalog?.close();
      await fixture?.close();
      cleanup?.();
    });

    async function call(tool: string, args: Record<string, unknown>, user = "u1"): Promise<ToolCallOutcome> {
      const outcome = await runtime.executeTool(tool, args, { userId: user });
      outputs.push(outcome);
      return outcome;
    }
    const query = (source: string, sql: string, extra: Record<string, unknown> = {}, user = "u1") =>
      call("sql_query", { source, sql, ...extra }, user);
    const rows = (outcome: ToolCallOutcome) => {
      if (!outcome.ok) throw new Error(`call failed: ${JSON.stringify(outcome.error)}`);
      return outcome.result as { columns: { name: string }[]; rows: unknown[][]; rowCount: number; truncated: boolean };
    };

    it("lists the schema, and one table with its indexes and foreign keys", async () => {
      const all = await call("sql_schema", { source: "ro" });
      const listing = all.ok
        ? (all.result as { dialect: string; tables: { name: string; columns: unknown[] }[] })
        : null;
      expect(listing?.dialect).toBe(fixture.dialect);
      expect(listing?.tables.map((t) => t.name)).toEqual(expect.arrayContaining(["big", "items", "owners"]));
      const items = listing?.tables.find((t) => t.name === "items");
      expect(items?.columns).toContainEqual({
        name: "name",
        type: expect.stringMatching(/text|varchar/i),
        nullable: false,
      });
      expect(items?.columns).toContainEqual({ name: "owner", type: expect.stringMatching(/int/i), nullable: true });

      const one = await call("sql_schema", { source: "ro", table: "items" });
      const table = one.ok ? (one.result as { tables: Record<string, unknown>[] }).tables : [];
      expect(table).toHaveLength(1);
      expect(table[0]?.indexes).toContainEqual({ name: "items_name_idx", columns: ["name"], unique: false });
      expect(table[0]?.foreignKeys).toContainEqual(
        expect.objectContaining({ columns: ["owner"], referencedTable: "owners", referencedColumns: ["id"] }),
      );
      const missing = await call("sql_schema", { source: "ro", table: "nope" });
      expect(missing.ok ? null : missing.error.code).toBe("validation_failed");
    });

    it("counts, binds parameters and returns JSON-safe values", async () => {
      const count = rows(await query("ro", "SELECT count(*) AS n FROM big"));
      expect(String(count.rows[0]?.[0])).toBe(String(ROWS));

      const p = fixture.placeholder;
      const one = rows(
        await query(
          "ro",
          `SELECT id, name, price, big, created, day, data FROM items WHERE name = ${p(1)} AND id > ${p(2)}`,
          {
            params: ["apple", 0],
          },
        ),
      );
      expect(one.columns.map((c) => c.name)).toEqual(["id", "name", "price", "big", "created", "day", "data"]);
      // Server databases name each column's type; SQLite names the declared type.
      expect(one.columns[3]).toMatchObject({ name: "big", type: expect.stringMatching(/bigint|longlong|integer/i) });
      expect(one.rowCount).toBe(1);
      const [id, itemName, price, big, created, day, data] = one.rows[0] ?? [];
      expect([id, itemName]).toEqual([1, "apple"]);
      expect(String(price)).toMatch(/^1\.50?$/);
      expect(big).toBe("9007199254740993"); // beyond 2^53: a string, exact
      expect(String(created)).toMatch(/^2024-05-01T10:20:30/);
      expect(String(day)).toMatch(/^2024-05-01/);
      expect(data).toBe(Buffer.from([0, 255, 16]).toString("base64"));
      // A value that looks like SQL is data, not code.
      const injected = rows(
        await query("ro", `SELECT count(*) FROM items WHERE name = ${p(1)}`, { params: ["x' OR '1'='1"] }),
      );
      expect(String(injected.rows[0]?.[0])).toBe("0");
      // A parameter with no placeholder is refused, not ignored (mysql2 fills placeholders itself and dropped it).
      for (const params of [[1, 2], []]) {
        const mismatch = await query("ro", `SELECT ${p(1)} AS one`, { params });
        expect(mismatch.ok ? "ran" : mismatch.error.code, JSON.stringify(params)).toBe("validation_failed");
      }
      // A ? inside a string or a comment is no placeholder.
      if (name === "MariaDB") {
        const quoted = rows(await query("ro", "SELECT 'why?' AS q, ? AS v -- and?", { params: [7] }));
        expect(quoted.rows).toEqual([["why?", 7]]);
      }
    });

    it("binds an object or array parameter as its JSON text, on every driver", async () => {
      const p = fixture.placeholder;
      const source = (await catalog.list()).find((s) => s.name === "ro");
      if (!source) throw new Error("no source ro");
      const driver = await catalog.driver(source);
      const bound = await driver.query({
        sql: `SELECT ${p(1)} AS doc, ${p(2)} AS list, ${p(3)} AS empty`,
        params: [{ a: 1, b: [true, null] }, [1, "two"], []],
        maxRows: 10,
        timeoutMs: 10_000,
        signal: new AbortController().signal,
      });
      expect(bound.rows).toEqual([['{"a":1,"b":[true,null]}', '[1,"two"]', "[]"]]);
      if (fixture.dialect === "postgres") {
        // pg would send a JavaScript array as a PostgreSQL array literal; it arrives as JSON text instead.
        const doc = await driver.query({
          sql: "SELECT $1::jsonb AS doc, jsonb_typeof($1::jsonb) AS kind",
          params: [[{ a: 1 }]],
          maxRows: 10,
          timeoutMs: 10_000,
          signal: new AbortController().signal,
        });
        expect(doc.rows).toEqual([[[{ a: 1 }], "array"]]);
      }
    });

    it.skipIf(name !== "PostgreSQL")(
      "returns a JSON value nested too deep, or with numbers a double would round, as its text; timestamps to the microsecond",
      async () => {
        const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
        const result = rows(
          await query(
            "ro",
            `SELECT '${deep}'::json AS deep, '{"id": 9007199254740993, "n": 1e400}'::jsonb AS exact, '{"a": [1, 2]}'::jsonb AS plain`,
          ),
        );
        // Timestamps keep their microseconds, in UTC.
        const times = rows(
          await query(
            "ro",
            "SELECT '2024-01-01 10:00:00.123456+05:30'::timestamptz AS a, '2024-01-01 10:00:00.5+00'::timestamptz AS b, '2024-01-01 10:00:00.000001'::timestamp AS c",
          ),
        );
        expect(times.rows).toEqual([
          ["2024-01-01T04:30:00.123456Z", "2024-01-01T10:00:00.500Z", "2024-01-01T10:00:00.000001"],
        ]);
        // jsonb writes 1e400 out in full: 1 and 400 zeros.
        expect(result.rows).toEqual([[deep, `{"n": 1${"0".repeat(400)}, "id": 9007199254740993}`, { a: [1, 2] }]]);
      },
    );

    it.skipIf(name !== "MariaDB")("returns the first result set of a statement that returns several", async () => {
      // A compound statement (or a procedure) returns one result set per SELECT; their rows do not share columns.
      const several = rows(await query("ro", "BEGIN NOT ATOMIC SELECT 1 AS a; SELECT 2 AS b, 3 AS c; END"));
      expect(several).toMatchObject({ columns: [{ name: "a" }], rows: [[1]], rowCount: 1, truncated: true });
      const one = rows(await query("ro", "BEGIN NOT ATOMIC DO 1; SELECT 7 AS z; END"));
      expect(one).toMatchObject({ columns: [{ name: "z" }], rows: [[7]], truncated: false });
    });

    it("refuses every write shape as read-only and changes nothing", async () => {
      const before = await fixture.counts();
      const hash = fixture.fingerprint?.();
      // The writer's account may write; the read-only session is what stops it. The reader lacks the privileges too.
      for (const source of ["rw", "ro"]) {
        for (const sql of [...COMMON_WRITES, ...fixture.writes]) {
          const outcome = await query(source, sql);
          expect(outcome.ok, `${source}: ${sql}`).toBe(false);
          if (!outcome.ok) {
            expect(outcome.error.code, `${source}: ${sql}: ${outcome.error.message}`).toBe("access_denied");
            expect(outcome.error.message).toMatch(/read-only/);
          }
        }
      }
      // A compound statement that swallows its errors ends without one, and still writes nothing.
      if (name === "MariaDB") {
        await query(
          "rw",
          "BEGIN NOT ATOMIC DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END; COMMIT; SET SESSION TRANSACTION READ WRITE; START TRANSACTION; INSERT INTO log (note) VALUES ('x'); COMMIT; END",
        );
      }
      expect(await fixture.counts()).toEqual(before);
      expect(fixture.fingerprint?.()).toBe(hash);
      expect(existsSync("/tmp/toolhost-outfile-test")).toBe(false);
    });

    it("runs one statement per call: a second one is refused before anything runs", async () => {
      const before = await fixture.counts();
      for (const sql of ["SELECT 1; DELETE FROM items", "COMMIT; DELETE FROM items", "SELECT 1; SELECT 2"]) {
        const outcome = await query("rw", sql);
        expect(outcome.ok ? "ran" : outcome.error.code, sql).toBe("validation_failed");
        if (!outcome.ok) expect(outcome.error.message, sql).toMatch(/one SQL statement per call/);
      }
      // A statement's own error is the server's to explain, not "a second statement": a syntax error, and a
      // data-modifying WITH (refused as a write where the dialect has it, a syntax error on MariaDB).
      for (const sql of ["SELEC 1", "SELECT 1 FROM items WHERE;", "WITH x AS (SELECT 1) DELETE FROM items"]) {
        const outcome = await query("rw", sql);
        expect(outcome.ok ? "ran" : outcome.error.code, sql).toMatch(/^(validation_failed|access_denied)$/);
        if (!outcome.ok) expect(outcome.error.message, sql).not.toMatch(/one SQL statement per call/);
      }
      if (name === "PostgreSQL") {
        // An error the statement raises itself is the SQL's, for the model to read.
        const raised = await query("rw", "DO $$ BEGIN RAISE 'no such customer'; END $$");
        expect(raised.ok ? null : raised.error).toMatchObject({
          code: "validation_failed",
          message: expect.stringContaining("no such customer"),
        });
      }
      expect(await fixture.counts()).toEqual(before);
      // The connection is still good afterwards.
      expect(rows(await query("rw", "SELECT 1 AS one")).rows).toEqual([[1]]);
    });

    it.skipIf(name === "SQLite")("leaves nothing of a call's session to the next call on its connection", async () => {
      const lock = fixture.sessionLock;
      if (!lock) throw new Error("no session lock statement");
      // A session-level lock (never released by the rollback) would stay held by the pooled connection, blocking
      // everyone else who asks for it.
      expect((await query("ro", lock.sql)).ok).toBe(true);
      expect(await lock.held()).toBe(false);
      // Session variables and settings of one call (another user's, maybe) do not reach the next: every pooled
      // connection is asked, one call at a time.
      const set =
        fixture.dialect === "postgres"
          ? "SELECT set_config('toolhost.leak', 'secret', false) AS v"
          : "SELECT @leak := 'secret' AS v";
      const read =
        fixture.dialect === "postgres" ? "SELECT current_setting('toolhost.leak', true) AS v" : "SELECT @leak AS v";
      expect((await query("ro", set)).ok).toBe(true);
      for (let i = 0; i < 3; i++) expect(rows(await query("ro", read)).rows[0]?.[0] ?? null).not.toBe("secret");
    });

    it("cuts a 100,000-row result at maxRows, and a 10-billion-row one without reading it", async () => {
      const cut = rows(await query("ro", "SELECT id FROM big ORDER BY id", { maxRows: 10 }));
      expect(cut).toMatchObject({ rowCount: 10, truncated: true });
      expect(cut.rows.map((r) => r[0])).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      const setting = rows(await query("ro", "SELECT id FROM big"));
      expect(setting).toMatchObject({ rowCount: 500, truncated: true }); // the maxRows setting's default
      // 10^10 rows cannot be read within the 30 s budget: the call ends truncated only because it stops early.
      const huge = rows(await query("ro", "SELECT a.id FROM big a CROSS JOIN big b", { maxRows: 5 }));
      expect(huge).toMatchObject({ rowCount: 5, truncated: true });
      const exact = rows(await query("ro", "SELECT id FROM big WHERE id <= 3 ORDER BY id", { maxRows: 3 }));
      expect(exact).toMatchObject({ rowCount: 3, truncated: false });
      expect(rows(await query("ro", "SELECT 1 AS one")).rows).toEqual([[1]]);
    });

    it("cuts a value past 65,536 characters, and stops reading rows past the result's 4 MiB of values", async () => {
      const sql = {
        postgres: {
          text: "SELECT repeat('x', 200000) AS t",
          blob: "SELECT decode(repeat('ab', 100000), 'hex') AS b",
          many: "SELECT repeat('y', 60000) AS t FROM generate_series(1, 100)",
        },
        mysql: {
          text: "SELECT REPEAT('x', 200000) AS t",
          blob: "SELECT UNHEX(REPEAT('ab', 100000)) AS b",
          many: "SELECT REPEAT('y', 60000) AS t FROM big LIMIT 100",
        },
        sqlite: {
          text: "SELECT replace(hex(zeroblob(100000)), '0', 'x') AS t",
          blob: "SELECT unhex(replace(hex(zeroblob(100000)), '00', 'AB')) AS b",
          many: "SELECT replace(hex(zeroblob(30000)), '0', 'y') AS t FROM big LIMIT 100",
        },
      }[fixture.dialect];
      // The driver's own result: the tool's result cap (at most 1 MiB, the rest spilled) would hide what it read.
      const source = (await catalog.list()).find((s) => s.name === "ro");
      if (!source) throw new Error("no source ro");
      const driver = await catalog.driver(source);
      const read = (statement: string) =>
        driver.query({
          sql: statement,
          params: [],
          maxRows: 1000,
          timeoutMs: 20_000,
          signal: new AbortController().signal,
        });
      const text = (await read(sql.text)).rows[0]?.[0] as string;
      expect(text).toBe(`${"x".repeat(65_536)}…[cut: 200000 characters in all]`);
      const blob = (await read(sql.blob)).rows[0]?.[0] as string;
      expect(blob).toBe(`${Buffer.alloc(49_152, 0xab).toString("base64")}…[cut: 100000 bytes in all]`);
      const many = await read(sql.many);
      expect(many.truncated).toBe(true);
      // 4,194,304 characters of 60,000 each: the row that passes them is the last one read.
      expect(many.rowCount).toBe(70);
      expect(many.rows.every(([t]) => t === "y".repeat(60_000))).toBe(true);
    });

    it.skipIf(name !== "PostgreSQL")(
      "fails a call whose row is past ROW_MAX_BYTES before reading it, and keeps serving",
      async () => {
        // Refused at the row's header, so it is never buffered (pg would buffer it whole; past V8's longest string
        // it would throw outside any call and end the process). MariaDB's max_allowed_packet (16 MiB by default)
        // bounds a row there.
        const outcome = await query("big", `SELECT repeat('x', ${ROW_MAX_BYTES + 1}) AS t`);
        expect(outcome.ok ? null : outcome.error).toMatchObject({
          code: "validation_failed",
          message: expect.stringMatching(/too large to read.*substr/),
        });
        expect(rows(await query("big", "SELECT 5 AS five")).rows).toEqual([[5]]);
      },
    );

    it("stops a statement that runs past timeoutSeconds on the server", async () => {
      const outcome = await query("ro", fixture.sleep, {}, "short");
      expect(outcome.ok ? "ran" : outcome.error.code).toBe("timeout");
      if (fixture.running) {
        // Gone at once, or within the second the server-side statement limit allows (a busy machine).
        const running = fixture.running;
        const left = await until(() => running("marker_sleep"), "no marker_sleep statement left on the server", {
          accept: (count) => count === 0,
          timeoutMs: 2_000,
          intervalMs: 25,
        });
        expect(left).toBe(0);
      }
      // The source still answers afterwards (SQLite: from a new worker process, the old one was killed).
      expect(rows(await query("ro", "SELECT 2 AS two")).rows).toEqual([[2]]);
    });

    it("stops the statement on the server when the caller cancels", async () => {
      const controller = new AbortController();
      const sql = fixture.sleep.replace("marker_sleep", "marker_cancel");
      const pending = runtime.executeTool(
        "sql_query",
        { source: "ro", sql },
        { userId: "u1", signal: controller.signal },
      );
      if (fixture.running) await waitFor(async () => (await fixture.running?.("marker_cancel")) === 1);
      controller.abort();
      const outcome = await pending;
      outputs.push(outcome);
      expect(outcome.ok ? "ran" : outcome.error.code).toBe("aborted");
      if (fixture.running) await waitFor(async () => (await fixture.running?.("marker_cancel")) === 0);
      expect(rows(await query("ro", "SELECT 3 AS three")).rows).toEqual([[3]]);
    });

    it.skipIf(name === "SQLite")(
      "fails a call at once when the server ends its connection mid-statement, and keeps serving",
      async () => {
        // An unhandled 'error' on the connection would end this process (the whole server); a lost connection
        // nothing notices would leave the call waiting out its budget.
        const sql = fixture.sleep.replace("marker_sleep", "marker_terminated");
        const pending = query("ro", sql);
        await waitFor(async () => (await fixture.running?.("marker_terminated")) === 1);
        await fixture.terminate?.("marker_terminated");
        const outcome = await pending;
        expect(outcome.ok ? "ran" : outcome.error.code).toBe("execution_failed");
        if (!outcome.ok) expect(outcome.error.message).toMatch(/connection/i);
        expect(rows(await query("ro", "SELECT 4 AS four")).rows).toEqual([[4]]);
      },
    );

    it("names the source, never its URL or password, when it is unreachable", async () => {
      const outcome = await query("down", "SELECT 1");
      expect(outcome.ok ? "ran" : outcome.error.code).toBe("execution_failed");
      if (!outcome.ok) {
        expect(outcome.error.message).toContain('Data source "down"');
        expect(outcome.error.message).not.toContain("someone");
      }
    });

    it.skipIf(name === "SQLite")(
      "refuses a source whose account can bypass read-only, or switch to a role that can",
      async () => {
        expect(fixture.privileged.length).toBeGreaterThan(0);
        for (const source of fixture.privileged) {
          const outcome = await query(source, "SELECT 1");
          expect(outcome.ok ? "ran" : outcome.error.code, source).toBe("access_denied");
          if (!outcome.ok) expect(outcome.error.message, source).toMatch(/read-only/);
        }
      },
    );

    it("refuses an unknown source, and a source the user's allowedSources leaves out, naming the allowed ones", async () => {
      const unknown = await query("nope", "SELECT 1");
      expect(unknown.ok ? null : unknown.error).toMatchObject({ code: "validation_failed" });
      expect(unknown.ok ? "" : unknown.error.message).toContain('"ro"');
      const limited = await query("ro", "SELECT 1", {}, "limited");
      expect(limited.ok ? null : limited.error).toMatchObject({ code: "validation_failed" });
      expect(limited.ok ? "" : limited.error.message).toMatch(/Available: "rw"\./);
      expect(rows(await query("rw", "SELECT 1 AS one", {}, "limited")).rows).toEqual([[1]]);
      // The model sees the sources it may use, with their descriptions (as this catalog last listed them).
      await catalog.load();
      const definitions = (await runtime.getEnabledToolRuntime("u1")).definitions;
      const description = definitions.find((d) => d.name === "sql_query")?.description ?? "";
      expect(description).toContain('"ro"');
      expect(description).toContain("Shop items and owners");
      const limitedDescription =
        (await runtime.getEnabledToolRuntime("limited")).definitions.find((d) => d.name === "sql_query")?.description ??
        "";
      expect(limitedDescription).toContain('"rw"');
      expect(limitedDescription).not.toContain('"ro"');
    });
  });
}
