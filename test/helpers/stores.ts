/**
 * Test helpers for storage tests that must run on both dialects: a fresh SQLite data directory, or a fresh database
 * on the suite's shared throwaway PostgreSQL cluster, and a second server as a real child process.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { BIN } from "./cli.js";
import { findPgBin, freshPostgresDatabase } from "./postgres.js";
import { tempDir } from "./temp.js";

/** Where a test's state lives: a SQLite data directory, or a PostgreSQL URL (the data dir is still used for files). */
export interface TestStore {
  dialect: "sqlite" | "postgres";
  dataDir: string;
  /** `postgres://…` for PostgreSQL, undefined for SQLite in `dataDir`. */
  databaseUrl?: string;
  /** Environment that points a child `toolhost` process at the same state. */
  env: Record<string, string>;
}

/** Whether PostgreSQL binaries exist on this machine (the PostgreSQL variants are skipped otherwise). */
export const HAVE_POSTGRES = findPgBin() !== undefined;

/** A fresh store of the dialect: a new temp data dir, and for PostgreSQL a new database on the shared cluster. */
export async function freshStore(dialect: "sqlite" | "postgres"): Promise<TestStore> {
  const dataDir = tempDir("toolhost-state-");
  if (dialect === "sqlite") return { dialect, dataDir, env: { TOOLHOST_DATA_DIR: dataDir, TOOLHOST_DATABASE_URL: "" } };
  const databaseUrl = await freshPostgresDatabase();
  return { dialect, dataDir, databaseUrl, env: { TOOLHOST_DATA_DIR: dataDir, TOOLHOST_DATABASE_URL: databaseUrl } };
}

/**
 * Environment for a child process that makes no TLS connections: without the extra CA certificates a machine may
 * name in NODE_EXTRA_CA_CERTS, which Node parses at every start (a 220 KB bundle costs ~50 ms of CPU per process).
 */
export const NO_EXTRA_CA: Record<string, string> = { NODE_EXTRA_CA_CERTS: "" };

/** A `toolhost serve --port 0` child process and the URL it printed. */
export interface ChildServer {
  url: string;
  child: ChildProcess;
  output(): string;
  /** SIGTERM, then resolves with the exit code (SIGKILL after 10 s). */
  stop(): Promise<number | null>;
}

/** Starts `toolhost serve --port 0` on the store; resolves once it printed its URL. */
export function startChildServer(store: TestStore, env: Record<string, string> = {}): Promise<ChildServer> {
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0"], {
    env: { ...process.env, TOOLHOST_LOG_LEVEL: "error", ...NO_EXTRA_CA, ...store.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /Toolhost (http:\/\/\S+)/.exec(out);
      if (m)
        resolve({
          url: m[1]!,
          child,
          output: () => out,
          async stop() {
            if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
            child.kill("SIGTERM");
            const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
            const code = await exited;
            clearTimeout(timer);
            return code;
          },
        });
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    child.once("exit", (code) => reject(new Error(`toolhost serve exited with ${code}: ${out}`)));
  });
}
