/**
 * Throwaway PostgreSQL for tests. The suite starts ONE cluster for the whole run (test/global-setup.ts calls
 * {@link launchPostgres} and hands its URL to the workers); a test file takes a database of its own on it with
 * {@link freshPostgresDatabase}, so files never see each other's tables. {@link startPostgres} still starts a
 * private cluster for a test that must own one (e.g. to stop it). Uses the PostgreSQL binaries on the machine
 * (PG_BIN or /usr/lib/postgresql/<v>/bin); as root it runs them as the `postgres` user, since postgres refuses to
 * run as root.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

declare module "vitest" {
  interface ProvidedContext {
    /** URL of the suite's shared cluster (its `postgres` database), or "" when PostgreSQL is not installed. */
    postgresUrl: string;
  }
}

/** Directory holding initdb/pg_ctl, or undefined when PostgreSQL is not installed. */
export function findPgBin(): string | undefined {
  if (process.env.PG_BIN && existsSync(join(process.env.PG_BIN, "initdb"))) return process.env.PG_BIN;
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  return versions.map((v) => join(root, v, "bin")).find((dir) => existsSync(join(dir, "initdb")));
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

/** A running cluster. */
export interface PgCluster {
  url: string;
  stop(): void;
}

/** A cluster being started: its URL is known at once, `started` settles when it accepts connections. */
export interface LaunchedCluster extends PgCluster {
  started: Promise<void>;
  /** Restarts the server (`pg_ctl restart -m fast`: open connections are cut), resolving once it accepts again. */
  restart(): Promise<void>;
}

/**
 * Starts a cluster without waiting for it (initdb and pg_ctl run as child processes; ~1–3 s). `started` rejects
 * when the binaries are missing or the server does not start. `stop()` stops it and removes its directory.
 */
export async function launchPostgres(options: { maxConnections?: number } = {}): Promise<LaunchedCluster> {
  const bin = findPgBin();
  if (!bin) throw new Error("PostgreSQL binaries not found (set PG_BIN)");
  const dir = mkdtempSync(join(tmpdir(), "toolhost-pg-"));
  chmodSync(dir, 0o755);
  const asRoot = process.getuid?.() === 0;
  let user: string | undefined;
  if (asRoot) {
    user = spawnSync("id", ["postgres"]).status === 0 ? "postgres" : "nobody";
    const uid = Number(execFileSync("id", ["-u", user]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", user]).toString().trim());
    chownSync(dir, uid, gid);
  }
  const command = (cmd: string, args: string[]): [string, string[]] =>
    user ? ["runuser", ["-u", user, "--", join(bin, cmd), ...args]] : [join(bin, cmd), args];
  const run = (cmd: string, args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const [file, argv] = command(cmd, args);
      execFile(file, argv, (error, _stdout, stderr) =>
        error ? reject(new Error(`${cmd} failed: ${error.message}\n${stderr}`)) : resolve(),
      );
    });
  const data = join(dir, "data");
  const port = await freePort();
  const started = (async () => {
    await run("initdb", ["-D", data, "-A", "trust", "-U", "toolhost", "--no-sync", "-E", "UTF8"]);
    await run("pg_ctl", [
      "-D",
      data,
      "-l",
      join(dir, "log"),
      "-w",
      "-t",
      "60",
      "-o",
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=${options.maxConnections ?? 100}`,
      "start",
    ]);
  })();
  started.catch(() => {});
  return {
    url: `postgres://toolhost@127.0.0.1:${port}/postgres`,
    started,
    restart: () => run("pg_ctl", ["-D", data, "-l", join(dir, "log"), "-m", "fast", "-w", "-t", "60", "restart"]),
    stop() {
      try {
        const [file, argv] = command("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
        execFileSync(file, argv, { stdio: "pipe" });
      } catch {
        // already stopped, or never started
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts a private cluster and waits until it accepts connections. Prefer {@link freshPostgresDatabase}. */
export async function startPostgres(): Promise<PgCluster> {
  const cluster = await launchPostgres();
  await cluster.started;
  return cluster;
}

let counter = 0;

/**
 * A new, empty database on the suite's shared cluster; resolves with its URL. Waits (up to 60 s) for the cluster,
 * which global setup starts in the background. Throws when PostgreSQL is not installed (guard with
 * `findPgBin()`), or when the suite was not started through vitest.config.ts (no shared cluster).
 */
export async function freshPostgresDatabase(): Promise<string> {
  // Imported here: global setup (vitest's main process) imports this module for launchPostgres.
  const { inject } = await import("vitest");
  const url = inject("postgresUrl");
  if (!url) throw new Error("No shared PostgreSQL cluster: PostgreSQL is not installed, or global setup did not run.");
  const name = `t_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.query(`CREATE DATABASE ${name}`);
      return url.replace(/\/[^/]*$/, `/${name}`);
    } catch (error) {
      // Not up yet (connection refused, "the database system is starting up"): global setup is still starting it.
      const code = (error as { code?: string }).code;
      const starting = code === "ECONNREFUSED" || code === "57P03";
      if (!starting || Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      await client.end().catch(() => {});
    }
  }
}
