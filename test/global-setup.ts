/**
 * Global setup of the suite (runs once, in vitest's main process, before any test file):
 *
 * - Starts ONE throwaway PostgreSQL cluster for the whole run, in the background (initdb and pg_ctl take a few
 *   seconds, which overlap the first test files), and hands its URL to the workers (`inject("postgresUrl")`;
 *   "" without PostgreSQL). Test files take a database of their own on it with `freshPostgresDatabase()`
 *   (test/helpers/postgres.ts). Stopped and removed at the end of the run.
 * - Likewise ONE throwaway MariaDB server (test/helpers/mariadb.ts; `inject("mariadbUrl")`, "" without MariaDB),
 *   for the SQL data tools' tests.
 * - Guards the real per-user data directory: the suite must not create `~/.local/share/toolhost` (or
 *   `$XDG_DATA_HOME/toolhost` of the invoking shell). Fails the run when it appeared during the tests.
 */
import { existsSync } from "node:fs";
import type { TestProject } from "vitest/node";
import { chooseDataDir } from "../src/core/data-dir.js";
import { findMariadb, type LaunchedMariadb, launchMariadb } from "./helpers/mariadb.js";
import { findPgBin, type LaunchedCluster, launchPostgres } from "./helpers/postgres.js";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const real = chooseDataDir(undefined, { ...process.env, TOOLHOST_DATA_DIR: "" }).path;
  const existed = existsSync(real);
  let cluster: (LaunchedCluster & { template?: string }) | undefined;
  // The cluster keeps a copy of initdb's output, from which private clusters start (launchPrivatePostgres).
  if (findPgBin()) cluster = await launchPostgres({ maxConnections: 400, saveTemplate: true });
  let mariadb: LaunchedMariadb | undefined;
  if (findMariadb()) mariadb = await launchMariadb();
  // A run that ends without its teardown (vitest exits on a second Ctrl-C) still stops the cluster; stop() is
  // synchronous and may run twice.
  const stopOnExit = () => {
    cluster?.stop();
    mariadb?.stop();
  };
  process.once("exit", stopOnExit);
  project.provide("postgresUrl", cluster?.url ?? "");
  project.provide("postgresTemplate", cluster?.template ?? "");
  project.provide("mariadbUrl", mariadb?.url ?? "");
  return async () => {
    if (cluster) {
      await cluster.started.catch(() => {});
      cluster.stop();
    }
    if (mariadb) {
      await mariadb.started.catch(() => {});
      mariadb.stop();
    }
    process.off("exit", stopOnExit);
    if (!existed && existsSync(real)) {
      throw new Error(`The test suite created the real data directory ${real}; tests must use temp directories.`);
    }
  };
}
