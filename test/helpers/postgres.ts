/**
 * Throwaway PostgreSQL for tests. The suite starts ONE cluster for the whole run (test/global-setup.ts calls
 * {@link launchPostgres} and hands its URL to the workers); a test file takes a database of its own on it with
 * {@link freshPostgresDatabase}, so files never see each other's tables. {@link startPostgres} still starts a
 * private cluster for a test that must own one (e.g. to stop it). Uses the PostgreSQL binaries on the machine
 * (PG_BIN or /usr/lib/postgresql/<v>/bin); as root it runs them as the `postgres` user, since postgres refuses to
 * run as root.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { until } from "./until.js";

declare module "vitest" {
  interface ProvidedContext {
    /** URL of the suite's shared cluster (its `postgres` database), or "" when PostgreSQL is not installed. */
    postgresUrl: string;
    /**
     * A pristine data directory (initdb's output, copied before the shared cluster first started), or "": a private
     * cluster of a test file starts from a copy of it instead of running initdb again (see {@link launchPostgres}).
     * It exists once the file named by `${template}.ready` does.
     */
    postgresTemplate: string;
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

/** A TCP port on 127.0.0.1 free at the moment of asking (for a database server a test starts). */
export async function freePort(): Promise<number> {
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
  /**
   * Restarts the server (`pg_ctl restart -m fast`: every connection is ended, the same port and options) and resolves
   * once it accepts connections again.
   */
  restart(): Promise<void>;
}

/**
 * Starts a cluster without waiting for it (initdb and pg_ctl run as child processes; ~1–3 s). `started` rejects
 * when the binaries are missing or the server does not start. `stop()` stops it and removes its directory.
 *
 * `saveTemplate`: after initdb, also copy the fresh data directory to `<cluster dir>/template` (then create
 * `template.ready`), and return its path as `template` (global setup hands it to the workers). `template`: start from
 * a copy of such a directory (waiting up to 60 s for its `.ready` file) instead of running initdb: initdb costs
 * ~1 s of CPU and 2–3 s on a busy 2-core machine, the copy a tenth of that. Without either, initdb runs.
 */
export async function launchPostgres(
  options: { maxConnections?: number; saveTemplate?: boolean; template?: string } = {},
): Promise<LaunchedCluster & { template?: string }> {
  const bin = findPgBin();
  if (!bin) throw new Error("PostgreSQL binaries not found (set PG_BIN)");
  const asRoot = process.getuid?.() === 0;
  // As root the cluster runs as another user, who must reach its directory: a test worker's TMPDIR lies inside the
  // run's private (0700) scratch directory, so such a cluster goes to /tmp (stop() removes it).
  const dir = mkdtempSync(join(asRoot ? "/tmp" : tmpdir(), "toolhost-pg-"));
  chmodSync(dir, 0o755);
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
  const copy = (from: string, to: string) =>
    new Promise<void>((resolve, reject) =>
      execFile("cp", ["-a", from, to], (error, _stdout, stderr) =>
        error ? reject(new Error(`copying ${from} failed: ${error.message}\n${stderr}`)) : resolve(),
      ),
    );
  const template = options.saveTemplate ? join(dir, "template") : undefined;
  const started = (async () => {
    if (options.template) {
      await until(() => existsSync(`${options.template}.ready`), `the PostgreSQL template at ${options.template}`, {
        timeoutMs: 60_000,
        intervalMs: 50,
      });
      // -a keeps the owner (the postgres user, as root) and initdb's 0700 modes; a real copy, never links: the
      // server writes into its files.
      await copy(options.template, data);
    } else {
      await run("initdb", ["-D", data, "-A", "trust", "-U", "toolhost", "--no-sync", "-E", "UTF8"]);
      if (template) {
        await copy(data, template);
        writeFileSync(`${template}.ready`, "");
      }
    }
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
    template,
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

/**
 * Starts a private cluster for a test file that must own one (to restart or stop it), from the suite's template when
 * there is one (`inject("postgresTemplate")`), else with initdb. Does not wait: see `started`.
 */
export async function launchPrivatePostgres(): Promise<LaunchedCluster> {
  const { inject } = await import("vitest");
  return launchPostgres({ template: inject("postgresTemplate") || undefined });
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
