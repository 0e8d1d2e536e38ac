/**
 * The SQL tools and their data sources through every surface, on one real server (in this process, over a SQLite
 * data directory): the admin API (add with a password, list redacted, test, remove; a non-admin refused; the
 * OpenAPI document), a tool call over HTTP, a chat whose model (the fake OpenAI provider) calls sql_query, MCP
 * (tools/list and tools/call), and the CLI (data-sources list|add|test|remove, call, doctor). A server source (the
 * suite's MariaDB or PostgreSQL) carries a password, which must appear in no answer, audit record or log line.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SseReader } from "../approvals/helpers.js";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
import { runCliInProcess } from "../helpers/cli.js";
import { freshMariadbDatabase, mariadbSkipReason } from "../helpers/mariadb.js";
import { findPgBin, freshPostgresDatabase } from "../helpers/postgres.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

const PASSWORD = `Sv-${Math.random().toString(36).slice(2, 10)}-pw`;

/**
 * A read-only account with PASSWORD, with a table `t` of one row, on the suite's MariaDB and PostgreSQL (those
 * installed): their URLs by source name.
 */
async function serverSources(): Promise<Record<string, string>> {
  const user = `surf_${Math.random().toString(36).slice(2, 8)}`;
  const out: Record<string, string> = {};
  if (!mariadbSkipReason()) {
    const admin = await freshMariadbDatabase();
    const connection = await mysql.createConnection(admin);
    const database = new URL(admin).pathname.slice(1);
    await connection.query("CREATE TABLE t (id int)");
    await connection.query("INSERT INTO t VALUES (1)");
    await connection.query(`CREATE USER '${user}'@'127.0.0.1' IDENTIFIED BY '${PASSWORD}'`);
    await connection.query(`GRANT SELECT ON \`${database}\`.* TO '${user}'@'127.0.0.1'`);
    await connection.end();
    out.maria = admin.replace(/\/\/[^@]+@/, `//${user}:${PASSWORD}@`);
  }
  if (findPgBin()) {
    const admin = await freshPostgresDatabase();
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    await client.query(`CREATE ROLE ${user} LOGIN PASSWORD '${PASSWORD}'`);
    await client.query("CREATE TABLE t (id int); INSERT INTO t VALUES (1)");
    await client.query(`GRANT SELECT ON t TO ${user}`);
    await client.end();
    out.pg = admin.replace("toolhost@", `${user}:${PASSWORD}@`);
  }
  return out;
}

describe("SQL tools through the API, a chat, MCP and the CLI", () => {
  let server: TestServer;
  let fake: FakeProvider;
  const script: FakeTurn[] = [];
  let dir: string;
  let dbFile: string;
  let configFile: string;
  let servers: Record<string, string> = {};
  let serverUrl: string | undefined;
  /** Every source of the config file, each with a one-row table `t` (SQLite's is `items`, 100 rows). */
  let every: string[];
  const seen: string[] = [];

  beforeAll(async () => {
    dir = tempDir();
    dbFile = join(dir, "shop.db");
    const db = new Database(dbFile);
    db.exec(
      "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT); WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100) INSERT INTO items SELECT n, 'item ' || n FROM s;",
    );
    db.close();
    servers = await serverSources();
    serverUrl = servers.maria ?? servers.pg;
    every = ["shop", ...Object.keys(servers)];
    configFile = join(dir, "config.json");
    const dataSources: Record<string, { url: string; description?: string }> = {
      shop: { url: `sqlite:${dbFile}`, description: "The shop" },
    };
    for (const [name, url] of Object.entries(servers)) dataSources[name] = { url };
    writeFileSync(configFile, JSON.stringify({ dataSources }));
    fake = await startFakeProvider("openai", script);
    // The context reads the config file and provider credentials from the environment (restored after the file).
    Object.assign(process.env, {
      TOOLHOST_CONFIG: configFile,
      OPENAI_API_KEY: "test-key",
      OPENAI_BASE_URL: fake.baseURL,
    });
    server = await startTestServer({ dataDir: join(dir, "data") });
    for (const tool of ["sql_query", "sql_schema"]) {
      const enabled = await server.api(`/api/settings/tools/${tool}`, { method: "PUT", json: { enabled: true } });
      expect(enabled.status).toBe(200);
    }
  });

  afterAll(async () => {
    await server?.stop();
    await fake?.close();
  });

  async function text(response: Response): Promise<string> {
    const body = await response.text();
    seen.push(body);
    return body;
  }

  it("admins add, list, test and remove a source over HTTP; the password never comes back", async () => {
    const bob = (await server.ctx.tokens.create("bob")).token;
    expect((await server.api("/api/admin/data-sources", { token: bob })).status).toBe(403);

    const url = serverUrl ?? `sqlite:${dbFile}`;
    const added = await server.api("/api/admin/data-sources", {
      method: "POST",
      json: { name: "remote", url, description: "A server" },
    });
    const addedBody = await text(added);
    expect(added.status, addedBody).toBe(201);
    expect(JSON.parse(addedBody)).toMatchObject({ name: "remote", origin: "database" });
    const duplicate = await server.api("/api/admin/data-sources", { method: "POST", json: { name: "remote", url } });
    expect(duplicate.status).toBe(400);
    const bad = await server.api("/api/admin/data-sources", {
      method: "POST",
      json: { name: "bad", url: `ftp://u:${PASSWORD}@h/x` },
    });
    expect(bad.status).toBe(400);
    await text(bad);

    const list = JSON.parse(await text(await server.api("/api/admin/data-sources"))) as {
      sources: { name: string; origin: string; url: string }[];
    };
    expect(list.sources.map((s) => [s.name, s.origin])).toEqual([
      ...every.map((name) => [name, "config-file"]),
      ["remote", "database"],
    ]);
    expect(list.sources.find((s) => s.name === "remote")?.url).toContain(serverUrl ? ":***@" : "sqlite:");
    const tested = await server.api("/api/admin/data-sources/remote/test", { method: "POST" });
    const result = JSON.parse(await text(tested));
    expect(result).toMatchObject({ name: "remote", reachable: true, version: expect.any(String) });

    for (const source of [...every, "remote"]) {
      const viaTool = await server.api("/api/tools/sql_query/execute", {
        method: "POST",
        json: { arguments: { source, sql: "SELECT 1 AS one" } },
      });
      expect(JSON.parse(await text(viaTool)), source).toMatchObject({ result: { rows: [[1]], truncated: false } });
      const schema = await server.api("/api/tools/sql_schema/execute", {
        method: "POST",
        json: { arguments: { source } },
      });
      expect(JSON.parse(await text(schema)), source).toMatchObject({ result: { source, tables: expect.any(Array) } });
    }
    const write = await server.api("/api/tools/sql_query/execute", {
      method: "POST",
      json: { arguments: { source: "remote", sql: serverUrl ? "DROP TABLE t" : "DROP TABLE items" } },
    });
    expect(await text(write)).toContain("access_denied");

    expect((await server.api("/api/admin/data-sources/shop", { method: "DELETE" })).status).toBe(403);
    expect((await server.api("/api/admin/data-sources/remote", { method: "DELETE" })).status).toBe(204);
    expect((await server.api("/api/admin/data-sources/remote", { method: "DELETE" })).status).toBe(404);

    const openapi = await text(await server.api("/api/openapi.json", { token: null }));
    expect(openapi).toContain("/api/admin/data-sources/{name}/test");
    await text(await server.api("/api/settings/tools"));
    const audit = await text(await server.api("/api/admin/audit?limit=200"));
    for (const body of [...seen, audit, JSON.stringify((server.ctx.logger as { lines?: unknown }).lines ?? [])]) {
      expect(body).not.toContain(PASSWORD);
    }
  });

  it("a chat's model queries a source with sql_query and sees the sources in the tool description", async () => {
    const table = (source: string) => (source === "shop" ? "items" : "t");
    script.push(
      {
        kind: "tools",
        calls: every.map((source) => ({
          name: "sql_query",
          arguments: { source, sql: `SELECT count(*) AS n FROM ${table(source)}` },
        })),
      },
      (request) => ({ kind: "text", text: `Results: ${request.lastToolResults.map((r) => r.content).join(" | ")}` }),
    );
    const created = await server.api("/api/chats", {
      method: "POST",
      json: { provider: "openai", model: "fake-model" },
    });
    expect(created.status).toBe(201);
    const chatId = ((await created.json()) as { id: string }).id;
    const response = await server.api(`/api/chats/${chatId}/messages`, {
      method: "POST",
      json: { content: "How many items are there?" },
    });
    const stream = new SseReader(response);
    await stream.until((e) => e.event === "done" || e.event === "error");
    expect(fake.failures).toEqual([]);
    const results = fake.requests.at(-1)?.lastToolResults.map((r) => r.content) ?? [];
    expect(results).toHaveLength(every.length);
    expect(results[0]).toContain('"rows":[[100]]');
    // MariaDB and PostgreSQL count as bigint: a string.
    for (const result of results.slice(1)) expect(result).toContain('"rows":[["1"]]');
    const offered = fake.requests.at(-1)?.tools.find((t) => t.name === "sql_query");
    expect(offered?.description).toContain('"shop" (SQLite: The shop)');
  });

  it("MCP clients list and call the tools", async () => {
    const client = new Client({ name: "toolhost-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${server.token}` } },
    });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      const query = tools.find((t) => t.name === "sql_query");
      expect(query?.annotations?.readOnlyHint).toBe(true);
      const schema = await client.callTool({ name: "sql_schema", arguments: { source: "shop" } });
      const listing = JSON.parse((schema.content as { text: string }[])[0]?.text ?? "{}") as {
        tables: { name: string }[];
      };
      expect(listing.tables.map((t) => t.name)).toEqual(["items"]);
      const cut = await client.callTool({
        name: "sql_query",
        arguments: { source: "shop", sql: "SELECT id FROM items ORDER BY id", maxRows: 3 },
      });
      expect(cut.isError).toBeFalsy();
      expect(cut.structuredContent ?? JSON.parse((cut.content as { text: string }[])[0]?.text ?? "{}")).toMatchObject({
        rows: [[1], [2], [3]],
        truncated: true,
      });
      for (const source of every) {
        const one = await client.callTool({ name: "sql_query", arguments: { source, sql: "SELECT 1 AS one" } });
        expect(one.isError, source).toBeFalsy();
        const refused = await client.callTool({
          name: "sql_query",
          arguments: { source, sql: `DELETE FROM ${source === "shop" ? "items" : "t"}` },
        });
        expect(refused.isError, source).toBe(true);
        expect(JSON.stringify(refused.content), source).toContain("read-only");
      }
    } finally {
      await client.close();
    }
  });

  it("the CLI adds, lists, tests, calls and removes sources, and doctor reports them", async () => {
    const env = { TOOLHOST_DATA_DIR: join(dir, "cli-data"), TOOLHOST_CONFIG: configFile, SOURCE_URL: serverUrl ?? "" };
    const outputs: string[] = [];
    const run = async (args: string[]) => {
      const r = await runCliInProcess(args, env);
      outputs.push(r.stdout, r.stderr);
      return r;
    };
    const added = await run(
      serverUrl
        ? ["data-sources", "add", "remote", "--url-env", "SOURCE_URL"]
        : ["data-sources", "add", "remote", `sqlite:${dbFile}`],
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain("Added remote");
    expect(added.stdout).toContain("reachable");
    const list = JSON.parse((await run(["data-sources", "list", "--json"])).stdout) as { sources: { name: string }[] };
    expect(list.sources.map((s) => s.name)).toEqual([...every, "remote"]);
    const tested = await run(["data-sources", "test"]);
    expect(tested.code).toBe(0);
    expect(tested.stdout).toMatch(/shop \(sqlite, .*shop\.db\): reachable, 3\./);

    expect((await run(["settings", "set", "sql_query", "--enable"])).code).toBe(0);
    const called = await run([
      "call",
      "sql_query",
      JSON.stringify({ source: "shop", sql: "SELECT max(id) AS m FROM items" }),
    ]);
    expect(called.code, called.stderr).toBe(0);
    expect(JSON.parse(called.stdout)).toMatchObject({ rows: [[100]] });
    const refused = await run(["call", "sql_query", JSON.stringify({ source: "nowhere", sql: "SELECT 1" })]);
    expect(refused.code).toBe(1);
    const available = [...every, "remote"].map((n) => `"${n}"`).join(", ");
    expect(refused.stdout + refused.stderr).toContain(`Available: ${available}.`);
    for (const source of every) {
      const one = await run(["call", "sql_query", JSON.stringify({ source, sql: "SELECT 1 AS one" })]);
      expect(JSON.parse(one.stdout), source).toMatchObject({ rows: [[1]] });
    }

    const doctor = await run(["doctor", "--json", "--no-mcp"]);
    const checks = (JSON.parse(doctor.stdout) as { checks: { id: string; status: string; detail: string }[] }).checks;
    for (const source of every) expect(checks.find((c) => c.id === `data.${source}`)).toMatchObject({ status: "ok" });
    expect(checks.find((c) => c.id === "data.remote")?.detail).toMatch(/^reachable at /);

    expect((await run(["data-sources", "remove", "remote"])).code).toBe(0);
    expect((await run(["data-sources", "remove", "shop"])).code).not.toBe(0);
    for (const output of outputs) expect(output).not.toContain(PASSWORD);
  });
});
