/**
 * PostgreSQL restarts under load: two real `toolhost serve` processes on one database (a private cluster, since these
 * tests restart it), shared by both cases, each of which restarts the server under a storm of settings PUTs.
 *
 * Four writers, each bound to one instance: neither process crashes or hangs, a request the outage hits is refused
 * with 503 `database_unavailable`, both answer writes again on their own afterwards, and every write that was
 * acknowledged is there: each row ends at the last acknowledged value or at a later attempt (one that failed on the
 * client's side may still have committed).
 *
 * Twelve users alternating instances: every instance reconnects by itself (its pool and its LISTEN connection), no
 * acknowledged write is lost, no instance crashes or hangs, and chat turns work again afterwards through both
 * (a turn posted to one instance, replayed through the other).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { type FakeProvider, type FakeTurnAction, startFakeProvider } from "../fakes/provider-server.js";
import { findPgBin, type LaunchedCluster, launchPrivatePostgres } from "../helpers/postgres.js";
import { until } from "../helpers/until.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "./chat-process.js";

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

/** A request that has not answered within this long counts as hung. */
const HUNG_MS = 20_000;

let work: string;
let cluster: LaunchedCluster | undefined;
let fake: FakeProvider;
/** alice's token (the four writers), and the storm users' (the second case). */
let token: string;
const users = Array.from({ length: 12 }, (_, i) => `storm${i}`);
const tokens = new Map<string, string>();
const servers: { process: CliProcess; url: string }[] = [];

describe.skipIf(!findPgBin())("PostgreSQL restarts under a settings PUT storm", () => {
  beforeAll(async () => {
    assertBuilt();
    work = mkdtempSync(join(tmpdir(), "toolhost-pg-restart-"));
    cluster = await launchPrivatePostgres();
    await cluster.started;
    fake = await startFakeProvider(
      "openai",
      Array.from({ length: 50 }, (): (() => FakeTurnAction) => () => ({ kind: "text", text: "still here" })),
    );
    const ctx = await createAppContext({ dataDir: join(work, "setup"), databaseUrl: cluster.url });
    try {
      token = (await ctx.tokens.create("alice", "storm")).token;
      for (const user of users) tokens.set(user, (await ctx.tokens.create(user, "storm")).token);
    } finally {
      await ctx.close();
    }
    // Both instances start at once (the database is migrated already).
    const started = ["one", "two"].map((name) =>
      startCli(
        ["serve", "--port", "0"],
        cleanEnv({
          TOOLHOST_DATA_DIR: join(work, name),
          TOOLHOST_DATABASE_URL: cluster!.url,
          TOOLHOST_ADMIN_USERS: users.join(","),
          OPENAI_API_KEY: "test-key",
          OPENAI_BASE_URL: fake.baseURL,
        }),
      ),
    );
    for (const process of started) servers.push({ process, url: "" });
    await Promise.all(started.map((process) => process.waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out))));
    for (const server of servers) server.url = /http:\/\/[\d.]+:\d+/.exec(server.process.stdout())![0];
  });

  afterAll(async () => {
    for (const server of servers) server.process.child.kill("SIGTERM");
    await Promise.all(servers.map((s) => s.process.exited));
    await fake?.close();
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

  const call = (base: string, user: string, path: string, init: { method?: string; json?: unknown } = {}) =>
    fetch(`${base}${path}`, {
      method: init.method ?? (init.json === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${tokens.get(user)}`, "content-type": "application/json" },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
      signal: AbortSignal.timeout(30_000),
    });

  it("a PostgreSQL restart under a settings PUT storm through two instances: nothing acknowledged is lost, and both serve again", async () => {
    let restarted = false;
    let afterRestart = 0;
    const acknowledged = new Map<string, number>();
    const attempted = new Map<string, number[]>();
    const failures: string[] = [];
    // Each user writes one value after another (so "the last acknowledged" is well defined), alternating instances,
    // until the database has restarted and a few more writes went through.
    const storm = users.map(async (user, u) => {
      for (let n = 1; !restarted || afterRestart < 40; n++) {
        const base = servers[(u + n) % servers.length]!.url;
        attempted.set(user, [...(attempted.get(user) ?? []), n]);
        try {
          const res = await call(base, user, "/api/settings/tools/grep", {
            method: "PUT",
            json: { parameters: { maxResults: n } },
          });
          await res.text();
          if (res.status === 200) {
            acknowledged.set(user, n);
            if (restarted) afterRestart++;
          } else failures.push(String(res.status));
        } catch (error) {
          failures.push((error as Error).message);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    });
    // Let the storm run, then restart the database under it.
    await until(() => acknowledged.size >= users.length, "a first acknowledged turn of every user", {
      timeoutMs: 60_000,
      intervalMs: 20,
    });
    await cluster!.restart();
    restarted = true;
    await Promise.all(storm);
    // Every user's stored value is its last acknowledged write or a later attempt (a write whose answer was lost in
    // the restart may have landed): never an older one.
    for (const user of users) {
      const res = await call(servers[0]!.url, user, "/api/settings/tools/grep");
      const stored = ((await res.json()) as { parameters: { maxResults: number } }).parameters.maxResults;
      expect(stored).toBeGreaterThanOrEqual(acknowledged.get(user)!);
      expect(attempted.get(user)).toContain(stored);
    }
    // Both instances are alive and serve chat turns again; a cancel through one still reaches the other.
    for (const s of servers) expect(s.process.child.exitCode).toBeNull();
    const user = users[0]!;
    const created = await call(servers[0]!.url, user, "/api/chats", { json: { provider: "openai", model: "m" } });
    const chatId = ((await created.json()) as { id: string }).id;
    const turn = await call(servers[1]!.url, user, `/api/chats/${chatId}/messages`, { json: { content: "hello" } });
    expect(turn.status).toBe(200);
    expect(await turn.text()).toMatch(/event: done\ndata: \{"type":"done","reason":"text"/);
    const replay = await (await call(servers[0]!.url, user, `/api/chats/${chatId}/events`)).text();
    expect(replay).toMatch(/event: done/);
  });
});
