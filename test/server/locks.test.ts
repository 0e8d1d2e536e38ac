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
});
