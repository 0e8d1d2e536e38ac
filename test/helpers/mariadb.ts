/**
 * Throwaway MariaDB for tests. The suite starts ONE server for the whole run (test/global-setup.ts calls
 * {@link launchMariadb} in the background and hands its admin URL to the workers); a test file takes a database of
 * its own with {@link freshMariadbDatabase}. The server's data directory, socket and pid file live in a temporary
 * directory; it listens on a free loopback port; grants are on (the read-only role tests need real accounts).
 * The machine's own MariaDB service is never used.
 *
 * Without the binaries the MariaDB tests skip, unless TOOLHOST_REQUIRE_MARIADB=1 (CI installs the package), where a
 * missing server fails them: {@link mariadbSkipReason}.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./postgres.js";

declare module "vitest" {
  interface ProvidedContext {
    /** Admin URL (`mysql://…@127.0.0.1:PORT/`) of the suite's shared MariaDB server, or "" when it is not installed. */
    mariadbUrl: string;
  }
}

const SERVER_CANDIDATES = ["/usr/sbin/mariadbd", "/usr/sbin/mysqld", "/usr/bin/mariadbd"];
const INSTALL_CANDIDATES = ["/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db"];

/** Paths of the server and its install script, or undefined when MariaDB is not installed. */
export function findMariadb(): { server: string; install: string } | undefined {
  const server = SERVER_CANDIDATES.find((p) => existsSync(p));
  const install = INSTALL_CANDIDATES.find((p) => existsSync(p));
  return server && install ? { server, install } : undefined;
}

/**
 * Why the MariaDB tests skip here, or undefined when they run. Throws when TOOLHOST_REQUIRE_MARIADB=1 and the server
 * is not installed: there the tests must fail, not skip.
 */
export function mariadbSkipReason(): string | undefined {
  if (findMariadb()) return undefined;
  if (process.env.TOOLHOST_REQUIRE_MARIADB === "1") {
    throw new Error("TOOLHOST_REQUIRE_MARIADB=1 but mariadbd is not installed (apt-get install mariadb-server).");
  }
  return "MariaDB is not installed (apt-get install mariadb-server)";
}

/** A MariaDB server being started: its URL is known at once, `started` settles when the admin account works. */
export interface LaunchedMariadb {
  url: string;
  started: Promise<void>;
  /** Milliseconds from launch to ready (install + start + account), once started. */
  startMs?: number;
  stop(): void;
}

/**
 * Starts a server without waiting for it: mariadb-install-db, then mariadbd (as a child process), then an admin
 * account `toolhost` on 127.0.0.1 with a random password, made over the socket as root. `started` rejects when
 * something fails (with the server's error log). `stop()` kills it and removes its directory.
 */
export async function launchMariadb(): Promise<LaunchedMariadb> {
  const bins = findMariadb();
  if (!bins) throw new Error("MariaDB binaries not found");
  const dir = mkdtempSync(join(tmpdir(), "toolhost-mariadb-"));
  const data = join(dir, "data");
  const socket = join(dir, "mysqld.sock");
  const port = await freePort();
  const password = `adm-${Math.random().toString(36).slice(2, 12)}`;
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? ["--user=root"] : [];
  let child: import("node:child_process").ChildProcess | undefined;
  const began = Date.now();
  const result: LaunchedMariadb = {
    url: `mysql://toolhost:${password}@127.0.0.1:${port}/`,
    started: Promise.resolve(),
    stop() {
      child?.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  result.started = (async () => {
    await new Promise<void>((resolve, reject) =>
      execFile(
        bins.install,
        [
          "--no-defaults",
          `--datadir=${data}`,
          ...user,
          "--auth-root-authentication-method=normal",
          "--skip-test-db",
          "--skip-name-resolve",
        ],
        (error, _stdout, stderr) =>
          error ? reject(new Error(`mariadb-install-db failed: ${error.message}\n${stderr}`)) : resolve(),
      ),
    );
    const errorLog = join(dir, "error.log");
    child = execFile(
      bins.server,
      [
        "--no-defaults",
        `--datadir=${data}`,
        ...user,
        `--port=${port}`,
        "--bind-address=127.0.0.1",
        `--socket=${socket}`,
        `--pid-file=${join(dir, "mysqld.pid")}`,
        `--log-error=${errorLog}`,
        "--skip-name-resolve",
        "--skip-log-bin",
        "--performance-schema=OFF",
        "--innodb-buffer-pool-size=32M",
        "--innodb-log-file-size=8M",
        "--innodb-flush-log-at-trx-commit=0",
        "--max-connections=300",
      ],
      () => {},
    );
    const exited = new Promise<never>((_resolve, reject) =>
      child?.once("exit", (code) =>
        reject(new Error(`mariadbd exited (${code}):\n${existsSync(errorLog) ? readFileSync(errorLog, "utf8") : ""}`)),
      ),
    );
    exited.catch(() => {});
    const mysql = await import("mysql2/promise");
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const connection = await Promise.race([mysql.createConnection({ socketPath: socket, user: "root" }), exited]);
        try {
          // One statement makes the account with its privileges: a test never sees it half made.
          await connection.query(
            `GRANT ALL PRIVILEGES ON *.* TO 'toolhost'@'127.0.0.1' IDENTIFIED BY '${password}' WITH GRANT OPTION`,
          );
        } finally {
          await connection.end();
        }
        break;
      } catch (error) {
        const code = (error as { code?: string }).code;
        if ((code !== "ENOENT" && code !== "ECONNREFUSED") || Date.now() > deadline) throw error;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    child.removeAllListeners("exit");
    result.startMs = Date.now() - began;
  })();
  result.started.catch(() => {});
  return result;
}

let counter = 0;

/**
 * A new, empty database on the suite's shared server; resolves with the admin URL pointing at it. Waits (up to
 * 60 s) for the server, which global setup starts in the background. Throws when no shared server is running.
 */
export async function freshMariadbDatabase(): Promise<string> {
  const { inject } = await import("vitest");
  const url = inject("mariadbUrl");
  if (!url) throw new Error("No shared MariaDB server: MariaDB is not installed, or global setup did not run.");
  const name = `t_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
  const mysql = await import("mysql2/promise");
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const connection = await mysql.createConnection(url);
      try {
        await connection.query(`CREATE DATABASE ${name}`);
      } finally {
        await connection.end();
      }
      return `${url}${name}`;
    } catch (error) {
      const code = (error as { code?: string }).code;
      // Still starting (global setup launched it in the background): refused, or the account is not made yet.
      const starting =
        code === "ECONNREFUSED" || code === "ER_ACCESS_DENIED_ERROR" || code === "ER_DBACCESS_DENIED_ERROR";
      if (!starting || Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
