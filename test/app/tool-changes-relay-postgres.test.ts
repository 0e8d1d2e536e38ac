/**
 * Tool-list changes between instances on one PostgreSQL: a settings write on one context reaches the others as a
 * "remote" change, and a relayed change is never relayed again (two contexts in one process share the registry,
 * which is where an echo would start: each would hear the other's signal as a change to pass on).
 */
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { freshStore, HAVE_POSTGRES, type TestStore } from "../helpers/stores.js";
import { until } from "../helpers/until.js";

/** How many tools_changed signals (for `target`, or all) the shared database holds. */
async function toolsChangedSignals(ctx: AppContext, target?: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`select count(*) as n from signals where kind = 'tools_changed'${
    target === undefined ? sql`` : sql` and target = ${target}`
  }`.execute(ctx.database.db);
  return Number(rows[0]!.n);
}

describe.skipIf(!HAVE_POSTGRES)("tool-list changes relayed between instances", () => {
  let store: TestStore;
  let a: AppContext;
  let b: AppContext;
  beforeAll(async () => {
    store = await freshStore("postgres");
    a = await createAppContext({ dataDir: `${store.dataDir}/a`, databaseUrl: store.databaseUrl! });
    b = await createAppContext({ dataDir: `${store.dataDir}/b`, databaseUrl: store.databaseUrl! });
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it("a settings write is heard as a remote change once per relaying context, and no signal echoes", async () => {
    const heard: string[] = [];
    const off = a.runtime.registry.changes.subscribe((user, origin) => {
      if (origin === "remote" && (user === "relay-user" || user === "relay-marker")) heard.push(user);
    });
    try {
      const before = await toolsChangedSignals(a, "relay-user");
      await a.settings.update("relay-user", "grep", { parameters: { maxResults: 7 } });
      await until(() => heard.includes("relay-user"), "the change relayed by the other context", { timeoutMs: 5_000 });
      // A marker through the same channel instead of a wait: a local change made now goes through each relay's
      // 50 ms coalescing after any echo of the remote change just heard (a relay that passed it on would hold it
      // first in the same batch, or have published it already), so once the other context has heard the
      // marker, an echo would be among the signals counted below.
      await a.settings.update("relay-marker", "grep", { parameters: { maxResults: 8 } });
      await until(() => heard.includes("relay-marker"), "the marker relayed by the other context", {
        timeoutMs: 5_000,
      });
      const published = (await toolsChangedSignals(a, "relay-user")) - before;
      // One signal per context that saw the local change (both share the registry), none more.
      expect(published).toBeGreaterThanOrEqual(1);
      expect(published).toBeLessThanOrEqual(2);
    } finally {
      off();
    }
  }, 30_000);
});
