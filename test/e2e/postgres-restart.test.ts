/**
 * A PostgreSQL restart under load: two real `toolhost serve` processes on one database (a private cluster, since this
 * test restarts it) take a storm of settings PUTs while the server restarts. Neither process crashes or hangs, a
 * request the outage hits is refused with 503 `database_unavailable`, both answer writes again on their own
 * afterwards, and every write that was acknowledged is there: each row ends at the
 * last acknowledged value or at a later attempt (one that failed on the client's side may still have committed).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openDatabase } from "../../src/storage/database.js";
import { TokenRepository } from "../../src/storage/token-repository.js";
import { findPgBin, type LaunchedCluster, launchPrivatePostgres } from "../helpers/postgres.js";
import { until } from "../helpers/until.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "./chat-process.js";

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

/** A request that has not answered within this long counts as hung. */
const HUNG_MS = 20_000;

let work: string;
let cluster: LaunchedCluster | undefined;
let token: string;
const servers: { process: CliProcess; url: string }[] = [];

describe.skipIf(!findPgBin())("a PostgreSQL restart under a settings PUT storm", () => {
  beforeAll(async () => {
    assertBuilt();
    work = mkdtempSync(join(tmpdir(), "toolhost-pg-restart-"));
    cluster = await launchPrivatePostgres();
    await cluster.started;
    const database = await openDatabase({ url: cluster.url });
    try {
      token = (await new TokenRepository(database.db).create("alice")).token;
    } finally {
      await database.close();
    }
    // Both instances start at once (the database is migrated already).
    const started = ["one", "two"].map((name) =>
      startCli(
        ["serve", "--port", "0"],
        cleanEnv({ TOOLHOST_DATA_DIR: join(work, name), TOOLHOST_DATABASE_URL: cluster!.url }),
      ),
    );
    for (const process of started) servers.push({ process, url: "" });
    await Promise.all(started.map((process) => process.waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out))));
    for (const server of servers) server.url = /http:\/\/[\d.]+:\d+/.exec(server.process.stdout())![0];
  });

  afterAll(async () => {
    for (const server of servers) server.process.child.kill("SIGTERM");
    await Promise.all(servers.map((s) => s.process.exited));
    cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("no crash, no hang, both instances write again on their own, and every acknowledged write is kept", async () => {
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    // Two writers per instance, each owning one row (a tool's settings), writing increasing values one at a time.
    const writers = ["grep", "glob", "read_file", "list_directory"].map((tool, i) => ({
      tool,
      server: servers[i % 2]!,
      attempts: [] as number[],
      acked: [] as number[],
      ackedAfterRestart: 0,
      failures: new Map<string, number>(),
    }));
    let restarted = false;
    let stop = false;
    const storm = writers.map(async (w) => {
      for (let value = 100; !stop; value++) {
        w.attempts.push(value);
        let outcome: string;
        try {
          const response = await fetch(`${w.server.url}/api/settings/tools/${w.tool}`, {
            method: "PUT",
            headers,
            body: JSON.stringify({ parameters: { maxResultLines: value } }),
            signal: AbortSignal.timeout(HUNG_MS),
          });
          const body = (await response.json()) as { error?: { code: string } };
          outcome = response.status === 200 ? "200" : `${response.status} ${body.error?.code}`;
        } catch (error) {
          outcome = (error as Error).name === "TimeoutError" ? "hung" : `network ${(error as Error).message}`;
        }
        if (outcome === "200") {
          w.acked.push(value);
          if (restarted) w.ackedAfterRestart++;
        } else {
          w.failures.set(outcome, (w.failures.get(outcome) ?? 0) + 1);
          // The database is away: try again soon, without spinning.
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    });
    // The shared polling helper; a timeout also tells what each writer and server saw.
    const waitFor = (what: string, condition: () => boolean) =>
      until(condition, what, { timeoutMs: 60_000, intervalMs: 20 }).catch((error: Error) => {
        const seen = writers.map(
          (w) => `${w.tool}: ${w.acked.length} acked, failures ${JSON.stringify([...w.failures])}`,
        );
        const logs = servers.map((s) => s.process.stderr().slice(-2000));
        throw new Error(`${error.message}\n${seen.join("\n")}\n${logs.join("\n---\n")}`);
      });
    try {
      await waitFor("writes before the restart", () => writers.every((w) => w.acked.length >= 5));
      await cluster!.restart();
      restarted = true;
      await waitFor("writes after the restart on both instances", () => writers.every((w) => w.ackedAfterRestart >= 5));
    } finally {
      stop = true;
      await Promise.all(storm);
    }

    for (const server of servers) expect(server.process.child.exitCode).toBeNull();
    for (const w of writers) {
      expect(w.failures.get("hung") ?? 0, `${w.tool}: hung requests`).toBe(0);
      // While the database was away, requests were refused with a clear code (never a 500, never a lost socket).
      for (const outcome of w.failures.keys()) expect(outcome, w.tool).toBe("503 database_unavailable");
      const last = w.acked.at(-1)!;
      for (const server of servers) {
        const response = await fetch(`${server.url}/api/settings/tools/${w.tool}`, { headers });
        expect(response.status).toBe(200);
        const stored = ((await response.json()) as { parameters: { maxResultLines: number } }).parameters
          .maxResultLines;
        // The last acknowledged value, or a later attempt whose answer was lost: never an earlier one.
        expect(stored, w.tool).toBeGreaterThanOrEqual(last);
        expect(w.attempts).toContain(stored);
      }
    }
  });
});
