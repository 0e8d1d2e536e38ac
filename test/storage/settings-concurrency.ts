/**
 * Settings writes under concurrency, through the real HTTP server, on one dialect (settings-concurrency-sqlite and
 * settings-concurrency-postgres.test.ts run it, in parallel workers): no acknowledged write is lost (one server, and
 * two server processes on one database), an admin's narrowing survives a user's PUT storm, and If-Match/ETag
 * behave as documented.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { RawHttpError, RawHttpPool } from "../helpers/raw-http.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { type ChildServer, freshStore, HAVE_POSTGRES, startChildServer, type TestStore } from "../helpers/stores.js";

/**
 * Declares the settings-writes tests for `dialect` (call it at a test file's top level). Everything a run holds
 * (the servers, the client pools) is made per call: with vitest's isolate: false this module is shared by the files
 * a worker runs.
 */
export function describeSettingsWrites(dialect: "sqlite" | "postgres"): void {
  /** One write of one key of grep for one user, with the value expected back. */
  interface Write {
    user: string;
    key: string;
    value: unknown;
  }

  /** 7 keys of grep per user, each with a value unique to the user. */
  function writesFor(user: string, i: number): Write[] {
    return [
      { user, key: "enabled", value: i % 2 === 0 },
      { user, key: "maxResults", value: 1 + (i % 500) },
      { user, key: "maxMatchesPerFile", value: 1 + ((i * 7) % 100) },
      { user, key: "maxFileSizeBytes", value: 1024 + i },
      { user, key: "includeDotfiles", value: true },
      { user, key: "respectGitignore", value: false },
      { user, key: "deniedPaths", value: [`/secret/${user}`] },
    ];
  }

  // One database for the whole file, with two servers on it started once: this process's (`s`) and a
  // `toolhost serve` child process (`other`). Each test writes as users of its own, so the tests do not see each
  // other's rows.
  let store: TestStore;
  let s: TestServer;
  let other: ChildServer;
  // The storms' HTTP client: plain keep-alive HTTP/1.1 connections, at most 64 per server, one request in flight on
  // each (more connections only overflow the listen backlog of a loaded machine with connection resets, which says
  // nothing about the server). A general client (undici, fetch) spent as much CPU per request as the server.
  const pools = new Map<string, RawHttpPool>();
  const poolOf = (base: string) => {
    let pool = pools.get(base);
    if (!pool) {
      pool = new RawHttpPool(base, 64);
      pools.set(base, pool);
    }
    return pool;
  };

  /** One PUT of one key; resolves with the status once the whole answer has been read. */
  async function put(base: string, token: string, w: Write): Promise<number> {
    const body = w.key === "enabled" ? { enabled: w.value } : { parameters: { [w.key]: w.value } };
    const res = await poolOf(base).request(
      "PUT",
      "/api/settings/tools/grep",
      { authorization: `Bearer ${token}`, "content-type": "application/json" },
      JSON.stringify(body),
    );
    return res.status;
  }

  /**
   * 50 users (prefixed `prefix`) × 7 keys, all PUT at once, spread over `bases`; checks that none was lost.
   *
   * Why 50 (350 writes) is enough: a lost update needs two writes of one user in flight at once. The pool keeps 64
   * requests in flight per server, so the writes race within a window of 64 of the shuffled order: about 340 pairs of
   * one user's writes overlap per storm (simulated), the same as with the 143 users (1001 writes) this storm had
   * before, whose extra writes added volume, not races (the overlapping pairs stay ~users × 21 × 128 / (7 × users)).
   */
  async function storm(prefix: string, bases: string[]) {
    const users = Array.from({ length: 50 }, (_, i) => `${prefix}${i}`);
    const tokens = new Map<string, string>();
    for (const u of users) tokens.set(u, (await s.ctx.tokens.create(u)).token);
    const writes = users.flatMap((u, i) => writesFor(u, i));
    expect(writes.length).toBe(350);
    // Shuffle so the keys of one user interleave with everyone else's.
    for (let i = writes.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [writes[i], writes[j]] = [writes[j]!, writes[i]!];
    }
    // A request that fails without an answer is recorded with its cause (not thrown at once), so that the failure
    // says which server it was and, for the child process, whether it was still running and what it printed.
    const statuses = await Promise.all(
      writes.map(async (w, i) => {
        const base = bases[i % bases.length]!;
        try {
          return await put(base, tokens.get(w.user)!, w);
        } catch (error) {
          const why = error instanceof RawHttpError ? error.code : String(error);
          return `${base === other.url ? "child" : "in-process"} server: ${why}`;
        }
      }),
    );
    const acknowledged = writes.filter((_, i) => statuses[i] === 200);
    const failed = statuses.filter((code) => code !== 200);
    const child = bases.includes(other.url)
      ? `; child server: exit ${other.child.exitCode ?? other.child.signalCode ?? "none (running)"}, output ${JSON.stringify(other.output().slice(-2000))}`
      : "";
    expect(failed, `${failed.length} of ${writes.length} not acknowledged${child}`).toEqual([]);
    const lost: Write[] = [];
    for (const u of users) {
      const d = await s.ctx.settings.get(u, "grep");
      for (const w of acknowledged.filter((x) => x.user === u)) {
        const actual = w.key === "enabled" ? d.enabled : d.parameters[w.key];
        if (JSON.stringify(actual) !== JSON.stringify(w.value)) lost.push(w);
      }
      expect(d.version).toBe(7);
    }
    expect({ dialect: store.dialect, lost: lost.length }).toEqual({ dialect: store.dialect, lost: 0 });
  }

  describe.skipIf(dialect === "postgres" && !HAVE_POSTGRES)(`settings writes on ${dialect}`, () => {
    beforeAll(async () => {
      store = await freshStore(dialect);
      // Both start at once on the fresh database (concurrent first starts are safe: see migrations.test.ts).
      [s, other] = await Promise.all([
        startTestServer({ dataDir: store.dataDir, ...(store.databaseUrl ? { databaseUrl: store.databaseUrl } : {}) }),
        startChildServer(store),
      ]);
    }, 120_000);
    afterAll(async () => {
      await Promise.all([...pools.values()].map((p) => p.close()));
      pools.clear();
      await Promise.all([s?.stop(), other?.stop()]);
    }, 60_000);

    it("350 concurrent PUTs across users and keys through one server: no acknowledged write lost", async () => {
      await storm("one-", [s.server.url]);
    }, 180_000);

    it("the same across two server processes on one database: no acknowledged write lost", async () => {
      await storm("two-", [s.server.url, other.url]);
    }, 180_000);

    it("a user's PUT storm during 8 admin narrowings loses no narrowing", async () => {
      // The admin writes through a context of its own (its own connection), as the CLI does.
      const admin = await createAppContext({
        dataDir: store.dataDir,
        ...(store.databaseUrl ? { databaseUrl: store.databaseUrl } : {}),
      });
      const alice = (await s.ctx.tokens.create("alice")).token;
      let stop = false;
      const statuses = new Map<number, number>();
      // Batches of 8 PUTs, one after another, until the admin is done; each narrowing waits for a batch to land
      // after the previous one, so the storm and the narrowings interleave (a machine where the first batch is
      // slow would otherwise see all eight narrowings during one batch).
      let landed = 0;
      let onLanded: () => void = () => {};
      const nextBatch = () => {
        const target = landed + 1;
        return new Promise<void>((resolve) => {
          onLanded = () => landed >= target && resolve();
        });
      };
      const userStorm = (async () => {
        for (let n = 0; !stop; n++) {
          const batch = await Promise.all(
            Array.from({ length: 8 }, (_, k) =>
              put([s.server.url, other.url][k % 2]!, alice, {
                user: "alice",
                key: "maxResults",
                value: 1 + ((n * 8 + k) % 900),
              }),
            ),
          );
          for (const status of batch) statuses.set(status, (statuses.get(status) ?? 0) + 1);
          landed++;
          onLanded();
        }
      })();
      try {
        const narrowings: string[][] = [];
        for (let k = 1; k <= 8; k++) {
          const deniedPaths = Array.from({ length: k }, (_, j) => `/secret${j}`);
          await admin.settings.update("alice", "grep", { parameters: { deniedPaths } }, { admin: true });
          narrowings.push(deniedPaths);
          await nextBatch();
          const seen = await s.ctx.settings.get("alice", "grep");
          expect(seen.parameters.deniedPaths).toEqual(deniedPaths);
          expect(seen.lockedKeys).toContain("deniedPaths");
        }
        stop = true;
        await userStorm;
        const final = await s.ctx.settings.get("alice", "grep");
        expect(final.parameters.deniedPaths).toEqual(narrowings.at(-1));
        expect(final.lockedKeys).toContain("deniedPaths");
        expect([...statuses.keys()]).toEqual([200]);
        expect(statuses.get(200)).toBeGreaterThanOrEqual(8 * 8);
        // And the user cannot lift it.
        expect(await put(s.server.url, alice, { user: "alice", key: "deniedPaths", value: [] })).toBe(403);
      } finally {
        stop = true;
        await userStorm.catch(() => {});
        await admin.close();
      }
    }, 180_000);

    it("ETag is the stored version; If-Match applies only to that version (412 otherwise)", async () => {
      // As user "local", whose grep settings no other test writes, with a token of its own: the first-start token
      // is printed by whichever of the two servers (started at once on the fresh database) made it first, so `s`
      // may have none.
      const local = (await s.ctx.tokens.create("local")).token;
      const api: typeof s.api = (path, init = {}) => s.api(path, { ...init, token: local });
      const first = await api("/api/settings/tools/grep");
      expect(first.headers.get("etag")).toBe('"0"');
      const a = await api("/api/settings/tools/grep", {
        method: "PUT",
        headers: { "if-match": '"0"' },
        json: { parameters: { maxResults: 10 } },
      });
      expect(a.status).toBe(200);
      expect(a.headers.get("etag")).toBe('"1"');
      expect(((await a.json()) as { version: number }).version).toBe(1);
      // A PUT that changes nothing writes nothing: same ETag, no audit line (with If-Match or without).
      const changes = async () => (await s.ctx.audit.list({ kind: "settings_change", userId: "local" })).length;
      const audited = await changes();
      for (const headers of [{ "if-match": '"1"' }, {}] as Record<string, string>[]) {
        const same = await api("/api/settings/tools/grep", {
          method: "PUT",
          headers,
          json: { parameters: { maxResults: 10 } },
        });
        expect(same.status).toBe(200);
        expect(same.headers.get("etag")).toBe('"1"');
      }
      expect(await changes()).toBe(audited);
      const stale = await api("/api/settings/tools/grep", {
        method: "PUT",
        headers: { "if-match": '"0"' },
        json: { parameters: { maxResults: 20 } },
      });
      expect(stale.status).toBe(412);
      expect(stale.headers.get("etag")).toBe('"1"');
      expect(((await stale.json()) as { error: unknown }).error).toMatchObject({
        code: "precondition_failed",
        details: { actual: 1 },
      });
      expect((await s.ctx.settings.get("local", "grep")).parameters.maxResults).toBe(10);
      const bad = await api("/api/settings/tools/grep", {
        method: "PUT",
        headers: { "if-match": "W/1" },
        json: { parameters: { maxResults: 20 } },
      });
      expect(bad.status).toBe(400);
      // Concurrent conditional writes on one version: exactly one wins.
      const racers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          api("/api/settings/tools/grep", {
            method: "PUT",
            headers: { "if-match": '"1"' },
            json: { parameters: { maxResults: 100 + i } },
          }),
        ),
      );
      expect(racers.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(412)]);
    }, 180_000);
  });
}
