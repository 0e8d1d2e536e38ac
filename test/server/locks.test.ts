/**
 * Admin locks: what an admin sets for another (non-admin) user is a lock; an admin's change for themself is not;
 * admins see and remove locks (API and `toolhost settings unlock`), including a lock on `enabled`.
 */
import { afterEach, describe, expect, it } from "vitest";
// The commands run through main(argv) in this process (the bin as a process is covered in test/cli/).
import { runCliInProcess as runCli } from "../helpers/cli.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

type Descriptor = { enabled: boolean; lockedKeys: string[]; parameters: Record<string, unknown> };

describe("admin locks", () => {
  it("an admin's own change (API as local) is not a lock: the page can switch the tool back on", async () => {
    server = await startTestServer();
    const off = await server.api("/api/settings/tools/web_fetch", { method: "PUT", json: { enabled: false } });
    expect(((await off.json()) as Descriptor).lockedKeys).toEqual([]);
    const on = await server.api("/api/settings/tools/web_fetch", { method: "PUT", json: { enabled: true } });
    expect(on.status).toBe(200);
    expect(((await on.json()) as Descriptor).enabled).toBe(true);
  });

  it("an admin sees and removes another user's locks over the API, the lock on enabled included", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    await server.ctx.settings.update("eve", "web_fetch", { enabled: false }, { admin: true });
    await server.ctx.settings.update(
      "eve",
      "grep",
      { parameters: { deniedPaths: ["/s"], maxResults: 9 } },
      { admin: true },
    );
    const seen = (await (await server.api("/api/admin/users/eve/settings/tools")).json()) as {
      tools: (Descriptor & { name: string })[];
    };
    expect(seen.tools.find((t) => t.name === "web_fetch")?.lockedKeys).toEqual(["enabled"]);
    // Not for non-admins.
    expect((await server.api("/api/admin/users/eve/settings/tools", { token: eve.token })).status).toBe(403);
    expect(
      (await server.api("/api/admin/users/eve/settings/tools/web_fetch/locks", { method: "DELETE", token: eve.token }))
        .status,
    ).toBe(403);
    const one = await server.api("/api/admin/users/eve/settings/tools/grep/locks?key=maxResults", { method: "DELETE" });
    expect(one.status).toBe(200);
    expect(await one.json()).toMatchObject({ unlocked: ["maxResults"], tool: { lockedKeys: ["deniedPaths"] } });
    const all = await server.api("/api/admin/users/eve/settings/tools/web_fetch/locks", { method: "DELETE" });
    expect(await all.json()).toMatchObject({ unlocked: ["enabled"], tool: { lockedKeys: [], enabled: false } });
    // The value stayed; eve may now change it herself.
    const put = await server.api("/api/settings/tools/web_fetch", {
      method: "PUT",
      token: eve.token,
      json: { enabled: true },
    });
    expect(put.status).toBe(200);
    expect((await server.api("/api/admin/users/eve/settings/tools/nope/locks", { method: "DELETE" })).status).toBe(404);
  });

  it("an admin sets and locks another user's settings over PUT /api/admin/users/:user/settings/tools/:tool", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    const path = "/api/admin/users/eve/settings/tools/grep";
    // Eve may not widen grep herself (allowedPaths is admin only); the admin may, for her, and it is locked.
    const hers = await server.api("/api/settings/tools/grep", {
      method: "PUT",
      token: eve.token,
      json: { parameters: { allowedPaths: ["/srv/shared"] } },
    });
    expect(hers.status).toBe(403);
    const set = await server.api(path, { method: "PUT", json: { parameters: { allowedPaths: ["/srv/shared"] } } });
    expect(set.status).toBe(200);
    expect(set.headers.get("etag")).toMatch(/^"\d+"$/);
    expect(await set.json()).toMatchObject({
      parameters: { allowedPaths: ["/srv/shared"] },
      lockedKeys: ["allowedPaths"],
    });
    // lock: false sets without locking; the same validation as the user's own PUT (422 for a value out of range).
    const unlocked = await server.api(path, { method: "PUT", json: { parameters: { maxResults: 7 }, lock: false } });
    expect(await unlocked.json()).toMatchObject({ parameters: { maxResults: 7 }, lockedKeys: ["allowedPaths"] });
    const bad = await server.api(path, { method: "PUT", json: { parameters: { maxResults: -1 } } });
    expect(bad.status).toBe(422);
    const extra = await server.api(path, { method: "PUT", json: { enabled: true, lokc: true } });
    expect(extra.status).toBe(400);
    // If-Match as on the user's own route: a stale version is 412.
    const stale = await server.api(path, { method: "PUT", headers: { "If-Match": '"0"' }, json: { enabled: true } });
    expect(stale.status).toBe(412);
    // Eve sees the admin's values, cannot lift the lock, and cannot call the admin route.
    const mine = await server.api("/api/settings/tools/grep", {
      method: "PUT",
      token: eve.token,
      json: { parameters: { allowedPaths: [] } },
    });
    expect(mine.status).toBe(403);
    expect((await server.api(path, { method: "PUT", token: eve.token, json: { enabled: false } })).status).toBe(403);
    expect((await server.api("/api/admin/users/eve/settings/tools/nope", { method: "PUT", json: {} })).status).toBe(
      404,
    );
    // Audited with the admin as the changer.
    const audit = (await (await server.api("/api/admin/audit?user=eve&kind=settings_change")).json()) as {
      entries: { actor: string }[];
    };
    expect(audit.entries[0]?.actor).toBe("local");
  });

  it("an admin's reset (null) lifts the key's lock whether or not the change locks (lock: false, the page unticked)", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    const path = "/api/admin/users/eve/settings/tools/grep";
    await server.api(path, { method: "PUT", json: { parameters: { maxResults: 9, deniedPaths: ["/s"] } } });
    const reset = await server.api(path, { method: "PUT", json: { parameters: { maxResults: null }, lock: false } });
    expect(reset.status).toBe(200);
    expect(((await reset.json()) as Descriptor).lockedKeys).toEqual(["deniedPaths"]);
    // Eve may set it again herself.
    const hers = await server.api("/api/settings/tools/grep", {
      method: "PUT",
      token: eve.token,
      json: { parameters: { maxResults: 5 } },
    });
    expect(hers.status).toBe(200);
  });

  it("under a locked ask, allow rules saved before the lock may be sent back; a new one is refused", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    const mine = (parameters: Record<string, unknown>) =>
      server!.api("/api/settings/tools/read_file", { method: "PUT", token: eve.token, json: { parameters } });
    expect((await mine({ approvalRules: [{ decision: "allow", match: "/srv/notes/**" }] })).status).toBe(200);
    await server.api("/api/admin/users/eve/settings/tools/read_file", {
      method: "PUT",
      json: { parameters: { approval: "ask" } },
    });
    const read = (await (await server.api("/api/settings/tools/read_file", { token: eve.token })).json()) as Descriptor;
    const roundTrip = await mine({ ...read.parameters, maxResultLines: 100 });
    expect(roundTrip.status).toBe(200);
    const rules = read.parameters.approvalRules as unknown[];
    const added = await mine({ approvalRules: [...rules, { decision: "allow", match: "/srv/more/**" }] });
    expect(added.status).toBe(422);
    expect(((await added.json()) as { error: { message: string } }).error.message).toContain('"/srv/more/**"');
  });

  it("locks and unlocks are audited, with the admin as the changer", async () => {
    server = await startTestServer();
    await server.ctx.tokens.create("eve");
    const path = "/api/admin/users/eve/settings/tools/grep";
    await server.api(path, { method: "PUT", json: { parameters: { maxResults: 9 }, lock: false } });
    // Locking the value eve has changes no value, only the lock.
    await server.api(path, { method: "PUT", json: { parameters: { maxResults: 9 } } });
    await server.api(`${path}/locks`, { method: "DELETE" });
    type Entry = { actor: string; details: { old: { locked?: string[] }; new: { locked?: string[] } } };
    const { entries } = (await (await server.api("/api/admin/audit?user=eve&kind=settings_change")).json()) as {
      entries: Entry[];
    };
    // (Entries of one millisecond have no order: compare them as a set.)
    const seen = entries.map((e) => JSON.stringify([e.actor, e.details.old.locked, e.details.new.locked])).sort();
    expect(seen).toEqual(
      [
        ["local", ["maxResults"], []],
        ["local", [], ["maxResults"]],
        ["local", [], []],
      ]
        .map((e) => JSON.stringify(e))
        .sort(),
    );
  });

  it("the admin route, like the CLI, locks nothing for an admin unless asked; its GET carries the ETag its PUT checks", async () => {
    server = await startTestServer({ env: { ...process.env, TOOLHOST_ADMIN_USERS: "local,root" } });
    // For itself and for another admin, an admin's change is no lock (docs/state.md: never a lock for oneself).
    for (const user of ["local", "root"]) {
      const res = await server.api(`/api/admin/users/${user}/settings/tools/web_fetch`, {
        method: "PUT",
        json: { enabled: false },
      });
      expect(res.status, user).toBe(200);
      expect(((await res.json()) as Descriptor).lockedKeys, user).toEqual([]);
    }
    // Asked for, it locks.
    const asked = await server.api("/api/admin/users/root/settings/tools/grep", {
      method: "PUT",
      json: { parameters: { maxResults: 9 }, lock: true },
    });
    expect(((await asked.json()) as Descriptor).lockedKeys).toEqual(["maxResults"]);
    const read = await server.api("/api/admin/users/root/settings/tools/grep");
    const etag = read.headers.get("etag");
    expect(etag).toBe(`"${((await read.json()) as { version: number }).version}"`);
    const put = await server.api("/api/admin/users/root/settings/tools/grep", {
      method: "PUT",
      headers: { "If-Match": etag ?? "" },
      json: { parameters: { maxResults: 10 } },
    });
    expect(put.status).toBe(200);
  });

  it("the CLI locks what it sets for a non-admin, not for an admin, and `settings unlock` removes locks", async () => {
    server = await startTestServer();
    const env = { TOOLHOST_DATA_DIR: server.dataDir };
    const forEve = await runCli(["settings", "set", "web_fetch", "--disable", "--user", "eve"], env);
    expect(forEve.code).toBe(0);
    expect(JSON.parse(forEve.stdout).lockedKeys).toEqual(["enabled"]);
    const forLocal = await runCli(["settings", "set", "web_fetch", "--disable"], env);
    expect(JSON.parse(forLocal.stdout).lockedKeys).toEqual([]);
    expect((await runCli(["settings", "unlock", "web_fetch"], env)).code).toBe(2);
    const unlocked = await runCli(["settings", "unlock", "web_fetch", "enabled", "--user", "eve"], env);
    expect(unlocked.code).toBe(0);
    expect(JSON.parse(unlocked.stdout)).toEqual({ name: "web_fetch", unlocked: ["enabled"], lockedKeys: [] });
    expect((await server.ctx.settings.get("eve", "web_fetch")).enabled).toBe(false);
  }, 60_000);

  it("unlocking a key the tool does not have is refused, naming the keys it has (CLI exit 1, API 422)", async () => {
    server = await startTestServer();
    const env = { TOOLHOST_DATA_DIR: server.dataDir };
    await server.ctx.settings.update("eve", "grep", { parameters: { maxResults: 9 } }, { admin: true });
    const before = await server.ctx.settings.get("eve", "grep");
    const typo = await runCli(["settings", "unlock", "grep", "maxResult", "--user", "eve"], env);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toMatch(/invalid_settings: Unknown key "maxResult" of "grep".*maxResults/);
    expect(typo.stdout).toBe("");
    const api = await server.api("/api/admin/users/eve/settings/tools/grep/locks?key=enabled&key=nope", {
      method: "DELETE",
    });
    expect(api.status).toBe(422);
    // Nothing was unlocked, and a refused or empty unlock writes nothing (the version, the API's ETag, stays).
    expect(await runCli(["settings", "unlock", "grep", "enabled", "--user", "eve"], env)).toMatchObject({ code: 0 });
    const after = await server.ctx.settings.get("eve", "grep");
    expect(after.lockedKeys).toEqual(["maxResults"]);
    expect(after.version).toBe(before.version);
  }, 60_000);
});
