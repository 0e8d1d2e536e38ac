/**
 * A throwaway PostgreSQL cluster on a loopback port for tests: initdb into a temp directory, start postgres, and
 * stop it afterwards. Uses the PostgreSQL binaries on the machine (PG_BIN or /usr/lib/postgresql/<v>/bin); as
 * root it runs them as the `postgres` user, since postgres refuses to run as root.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

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

/** Starts a cluster (~1–3 s). Throws when the binaries are missing or the server does not start. */
export async function startPostgres(): Promise<PgCluster> {
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
  const run = (cmd: string, args: string[]) =>
    user
      ? execFileSync("runuser", ["-u", user, "--", join(bin, cmd), ...args], { stdio: "pipe" })
      : execFileSync(join(bin, cmd), args, { stdio: "pipe" });
  const data = join(dir, "data");
  run("initdb", ["-D", data, "-A", "trust", "-U", "toolhost", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  run("pg_ctl", [
    "-D",
    data,
    "-l",
    join(dir, "log"),
    "-w",
    "-t",
    "30",
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
    "start",
  ]);
  return {
    url: `postgres://toolhost@127.0.0.1:${port}/postgres`,
    stop() {
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
      } catch {
        // already stopped
      }
    },
  };
}
