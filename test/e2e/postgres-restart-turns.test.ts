/**
 * A PostgreSQL restart under load, with two real `serve` processes on one private cluster: a settings PUT storm runs
 * through both while the database restarts (its connections cut). Every instance reconnects by itself (its pool and
 * its LISTEN connection), no acknowledged write is lost, no instance crashes or hangs, and chat turns and
 * cross-instance signals work again afterwards.
 */
import { join } from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { type FakeProvider, type FakeTurnAction, startFakeProvider } from "../fakes/provider-server.js";
import { findPgBin, type LaunchedCluster, launchPrivatePostgres } from "../helpers/postgres.js";
import { tempDir } from "../helpers/temp.js";
import { until } from "../helpers/until.js";
import { assertBuilt, type CliProcess, cleanEnv, startCli } from "./chat-process.js";

vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

let cluster: LaunchedCluster;
let fake: FakeProvider;
let work: string;
const users = Array.from({ length: 12 }, (_, i) => `storm${i}`);
const tokens = new Map<string, string>();
const servers: { p: CliProcess; url: string }[] = [];

beforeAll(async () => {
  assertBuilt();
  if (!findPgBin()) throw new Error("PostgreSQL binaries are needed");
  work = tempDir();
  // The cluster runs as the postgres user, which cannot enter the run's private scratch directory: its directory goes
  // in /tmp (stop() removes it).
  const scratch = process.env.TMPDIR;
  process.env.TMPDIR = "/tmp";
  try {
    cluster = await launchPrivatePostgres();
  } finally {
    process.env.TMPDIR = scratch;
  }
  await cluster.started;
  fake = await startFakeProvider(
    "openai",
    Array.from({ length: 50 }, (): (() => FakeTurnAction) => () => ({ kind: "text", text: "still here" })),
  );
  const ctx = await createAppContext({ dataDir: join(work, "setup"), databaseUrl: cluster.url });
  try {
    for (const user of users) tokens.set(user, (await ctx.tokens.create(user, "storm")).token);
  } finally {
    await ctx.close();
  }
  // Both instances start at once (the database is migrated already).
  for (const name of ["a", "b"]) {
    const p = startCli(
      ["serve", "--port", "0"],
      cleanEnv({
        TOOLHOST_DATA_DIR: join(work, name),
        TOOLHOST_DATABASE_URL: cluster.url,
        TOOLHOST_ADMIN_USERS: users.join(","),
        OPENAI_API_KEY: "test-key",
        OPENAI_BASE_URL: fake.baseURL,
      }),
    );
    servers.push({ p, url: "" });
  }
  await Promise.all(servers.map((s) => s.p.waitFor((out) => /http:\/\/[\d.]+:\d+/.test(out))));
  for (const s of servers) s.url = /http:\/\/[\d.]+:\d+/.exec(s.p.stdout())![0];
});

afterAll(async () => {
  for (const s of servers) s.p.child.kill("SIGTERM");
  await Promise.all(servers.map((s) => s.p.exited));
  await fake?.close();
  cluster?.stop();
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
  await cluster.restart();
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
  for (const s of servers) expect(s.p.child.exitCode).toBeNull();
  const user = users[0]!;
  const created = await call(servers[0]!.url, user, "/api/chats", { json: { provider: "openai", model: "m" } });
  const chatId = ((await created.json()) as { id: string }).id;
  const turn = await call(servers[1]!.url, user, `/api/chats/${chatId}/messages`, { json: { content: "hello" } });
  expect(turn.status).toBe(200);
  expect(await turn.text()).toMatch(/event: done\ndata: \{"type":"done","reason":"text"/);
  const replay = await (await call(servers[0]!.url, user, `/api/chats/${chatId}/events`)).text();
  expect(replay).toMatch(/event: done/);
});
