/**
 * The per-process settings cache (storage/tool-settings-repository.ts) across instances on one PostgreSQL. Each
 * context has a registry of its own, as two processes would, so nothing reaches another context in process: only
 * the signal bus, or the cache's age.
 *
 * Date.now is frozen while a case runs, so a cached row never ages out by itself: a change seen on another instance
 * was seen through its signal (case 1), and the bound of the cache is proven by moving the clock past it (case 2),
 * never by measuring time.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { type CoreWiring, openCoreContext } from "../../src/app/core-context.js";
import { defaultRegistry, ToolRegistryStore } from "../../src/core/registry.js";
import { SETTINGS_CACHE_MS } from "../../src/storage/tool-settings-repository.js";
import "../../src/tools/index.js";
import { freshStore, HAVE_POSTGRES, type TestStore } from "../helpers/stores.js";
import { until } from "../helpers/until.js";

/** A registry of its own holding the built-in tools (what another process would have). */
function ownRegistry(): ToolRegistryStore {
  const registry = new ToolRegistryStore();
  for (const tool of defaultRegistry.list()) registry.register(tool);
  return registry;
}

/** Polls `check` every 10 ms for at most 10 s of real time (performance.now: Date.now is frozen here). */
describe.skipIf(!HAVE_POSTGRES)("settings cache across instances on one PostgreSQL", () => {
  let store: TestStore;
  let a: AppContext;
  let b: AppContext;
  // A writer with no signal bus (as the CLI's own context): its writes reach B only through B's cache aging out.
  let quiet: CoreWiring;
  let work: string;
  let secret: string;
  beforeAll(async () => {
    store = await freshStore("postgres");
    const open = (name: string) =>
      createAppContext({
        dataDir: join(store.dataDir, name),
        databaseUrl: store.databaseUrl!,
        registry: ownRegistry(),
      });
    [a, b] = await Promise.all([open("a"), open("b")]);
    quiet = await openCoreContext({
      dataDir: join(store.dataDir, "quiet"),
      databaseUrl: store.databaseUrl!,
      registry: ownRegistry(),
    });
    work = await mkdtemp(join(tmpdir(), "toolhost-settings-cache-"));
    await mkdir(join(work, "secret"));
    secret = join(work, "secret", "key.txt");
    await writeFile(secret, "the key\n");
  }, 60_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await Promise.all([a?.close(), b?.close(), quiet?.context.close()]);
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** Freezes Date.now at the current time; returns a function that moves the frozen clock forward by `ms`. */
  function freezeClock(): (ms: number) => void {
    let now = Date.now();
    vi.spyOn(Date, "now").mockImplementation(() => now);
    return (ms) => {
      now += ms;
    };
  }

  /** What B answers when `user` reads the secret file: "ok" or the error code. */
  async function readOnB(user: string): Promise<string> {
    const outcome = await b.runtime.executeTool(
      "read_file",
      { path: secret },
      { userId: user, workingDirectory: work },
    );
    return outcome.ok ? "ok" : outcome.error.code;
  }

  it("an admin's narrowing on A is obeyed by B's next calls through the signal, while B's cached row would not age out", async () => {
    const user = "cache-signal-user";
    freezeClock();
    try {
      // B reads (and caches) the user's read_file row: no row, the file is allowed.
      expect(await readOnB(user)).toBe("ok");
      await a.settings.update(
        user,
        "read_file",
        { parameters: { deniedPaths: [join(work, "secret")] } },
        { admin: true },
      );
      await until(async () => (await readOnB(user)) === "access_denied", "B to obey A's narrowing");
      // From then on, every call of B obeys it.
      expect(await Promise.all([readOnB(user), readOnB(user), readOnB(user)])).toEqual([
        "access_denied",
        "access_denied",
        "access_denied",
      ]);
    } finally {
      vi.restoreAllMocks();
    }
  }, 30_000);

  it("a narrowing B hears no signal of is obeyed once B's cache ages out, and B's stale row never loosens the lock", async () => {
    const user = "cache-quiet-user";
    freezeClock();
    try {
      expect(await readOnB(user)).toBe("ok");
      // An admin narrows and locks through a context without a signal bus.
      await quiet.context.settings.update(
        user,
        "read_file",
        { parameters: { deniedPaths: [join(work, "secret")] } },
        { admin: true },
      );
      // The premise: B still serves its cached row (no signal reached it and the clock did not move).
      expect(await readOnB(user)).toBe("ok");
      // The user, on B, tries to loosen the locked key: refused, decided on the stored row, not on B's cached one.
      await expect(b.settings.update(user, "read_file", { parameters: { deniedPaths: [] } })).rejects.toMatchObject({
        code: "access_denied",
      });
      // A write of another key on B keeps the admin's value and lock (and B's own write refreshes B at once).
      await b.settings.update(user, "read_file", { enabled: true });
      const stored = await quiet.context.settings.get(user, "read_file");
      expect(stored).toMatchObject({ enabled: true, parameters: { deniedPaths: [join(work, "secret")] } });
      expect(stored.lockedKeys).toContain("deniedPaths");
      expect(await readOnB(user)).toBe("access_denied");
    } finally {
      vi.restoreAllMocks();
    }
  }, 30_000);

  it("a stale row is served no longer than SETTINGS_CACHE_MS after B asked for it", async () => {
    const user = "cache-age-user";
    const advance = freezeClock();
    try {
      expect(await readOnB(user)).toBe("ok");
      await quiet.context.settings.update(
        user,
        "read_file",
        { parameters: { deniedPaths: [join(work, "secret")] } },
        { admin: true },
      );
      advance(SETTINGS_CACHE_MS - 1);
      expect(await readOnB(user)).toBe("ok");
      advance(1);
      expect(await readOnB(user)).toBe("access_denied");
    } finally {
      vi.restoreAllMocks();
    }
  }, 30_000);
});
