/**
 * Settings writes under concurrency, through the real HTTP server, on one dialect (settings-concurrency-sqlite and
 * settings-concurrency-postgres.test.ts run it, in parallel workers): no acknowledged write is lost (one server, and
 * two server processes on one database), an admin's narrowing survives a user's PUT storm, and If-Match/ETag
 * behave as documented.
 */
import { Agent, request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { type ChildServer, freshStore, HAVE_POSTGRES, startChildServer, type TestStore } from "../helpers/stores.js";

/**
 * Declares the settings-writes tests for `dialect` (call it at a test file's top level). Everything a run holds
 * (the HTTP client pool, the servers to stop) is made per call: with vitest's isolate: false this module is shared
 * by the files a worker runs.
 */
export function describeSettingsWrites(dialect: "sqlite" | "postgres"): void {
  const cleanups: (() => Promise<unknown>)[] = [];

  async function serverOn(store: TestStore): Promise<TestServer> {
    const s = await startTestServer({
      dataDir: store.dataDir,
      ...(store.databaseUrl ? { databaseUrl: store.databaseUrl } : {}),
    });
    cleanups.push(() => s.stop());
    return s;
  }

  async function childOn(store: TestStore): Promise<ChildServer> {
    const c = await startChildServer(store);
    cleanups.push(() => c.stop());
    return c;
  }

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

  // All requests are sent at once; they share at most 64 connections per server (more only overflow the listen
  // backlog of a loaded machine with connection resets, which says nothing about the server).
  let dispatcher: Agent;

  /**
   * One PUT of one key; resolves with the status once the answer's body has been read. undici's `request` rather
   * than `fetch`: the same HTTP/1.1 on the wire, without the WHATWG stream layer that was a third of this file's CPU.
   */
  async function put(base: string, token: string, w: Write): Promise<number> {
    const body = w.key === "enabled" ? { enabled: w.value } : { parameters: { [w.key]: w.value } };
    const res = await request(`${base}/api/settings/tools/grep`, {
      dispatcher,
      method: "PUT",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    await res.body.dump();
    return res.statusCode;
  }

  async function storm(store: TestStore, bases: string[], s: TestServer, other?: ChildServer) {
    const users = Array.from({ length: 143 }, (_, i) => `user${i}`);
    const tokens = new Map<string, string>();
    for (const u of users) tokens.set(u, (await s.ctx.tokens.create(u)).token);
    const writes = users.flatMap((u, i) => writesFor(u, i));
    expect(writes.length).toBeGreaterThanOrEqual(1000);
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
          const e = error as { code?: string; message?: string; cause?: { code?: string; message?: string } };
          const why = e.cause?.code ?? e.cause?.message ?? e.code ?? e.message ?? String(error);
          return `${base === other?.url ? "child" : "in-process"} server: ${why}`;
        }
      }),
    );
    const acknowledged = writes.filter((_, i) => statuses[i] === 200);
    const failed = statuses.filter((code) => code !== 200);
    const child = other
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
    beforeAll(() => {
      dispatcher = new Agent({ connections: 64, pipelining: 1 });
    });
    afterEach(async () => {
      await Promise.all(cleanups.splice(0).map((c) => c()));
    });
    afterAll(() => dispatcher.close());

    it("1000 concurrent PUTs across users and keys through one server: no acknowledged write lost", async () => {
      const store = await freshStore(dialect);
      const s = await serverOn(store);
      await storm(store, [s.server.url], s);
    }, 180_000);

    it("the same across two server processes on one database: no acknowledged write lost", async () => {
      const store = await freshStore(dialect);
      const s = await serverOn(store);
      const other = await childOn(store);
      await storm(store, [s.server.url, other.url], s, other);
    }, 180_000);

    it("a user's PUT storm during 8 admin narrowings loses no narrowing", async () => {
      const store = await freshStore(dialect);
      const s = await serverOn(store);
      const other = await childOn(store);
      // The admin writes through a context of its own (its own connection), as the CLI does.
      const admin = await createAppContext({
        dataDir: store.dataDir,
        ...(store.databaseUrl ? { databaseUrl: store.databaseUrl } : {}),
      });
      cleanups.push(() => admin.close());
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
    }, 180_000);

    it("ETag is the stored version; If-Match applies only to that version (412 otherwise)", async () => {
      const store = await freshStore(dialect);
      const s = await serverOn(store);
      const first = await s.api("/api/settings/tools/grep");
      expect(first.headers.get("etag")).toBe('"0"');
      const a = await s.api("/api/settings/tools/grep", {
        method: "PUT",
        headers: { "if-match": '"0"' },
        json: { parameters: { maxResults: 10 } },
      });
      expect(a.status).toBe(200);
      expect(a.headers.get("etag")).toBe('"1"');
      expect(((await a.json()) as { version: number }).version).toBe(1);
      // A PUT that changes nothing writes nothing: same ETag, no audit line (with If-Match or without).
      const changes = async () => (await s.ctx.audit.list({ kind: "settings_change" })).length;
      const audited = await changes();
      for (const headers of [{ "if-match": '"1"' }, {}] as Record<string, string>[]) {
        const same = await s.api("/api/settings/tools/grep", {
          method: "PUT",
          headers,
          json: { parameters: { maxResults: 10 } },
        });
        expect(same.status).toBe(200);
        expect(same.headers.get("etag")).toBe('"1"');
      }
      expect(await changes()).toBe(audited);
      const stale = await s.api("/api/settings/tools/grep", {
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
      const bad = await s.api("/api/settings/tools/grep", {
        method: "PUT",
        headers: { "if-match": "W/1" },
        json: { parameters: { maxResults: 20 } },
      });
      expect(bad.status).toBe(400);
      // Concurrent conditional writes on one version: exactly one wins.
      const racers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          s.api("/api/settings/tools/grep", {
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
