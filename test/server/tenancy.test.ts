import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

const installRoot = fileURLToPath(new URL("../../", import.meta.url));

let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function execute(s: TestServer, token: string, tool: string, body: Record<string, unknown>) {
  const res = await s.api(`/api/tools/${tool}/execute`, { method: "POST", token, json: body });
  return {
    status: res.status,
    body: (await res.json()) as { ok: boolean; result?: any; error?: { code: string; message: string } },
  };
}

describe("a shared server keeps users inside what an admin granted", () => {
  it("a non-admin cannot bind an arbitrary working directory for a tool call or a chat", async () => {
    server = await startTestServer();
    const mallory = await server.ctx.tokens.create("mallory");
    const read = await execute(server, mallory.token, "read_file", {
      arguments: { path: "/etc/passwd" },
      workingDirectory: "/",
    });
    expect(read.status).toBe(403);
    expect(JSON.stringify(read.body)).not.toContain("root:");
    const write = await execute(server, mallory.token, "write_file", {
      arguments: { path: "escape.txt", content: "x" },
      workingDirectory: tempDir(),
    });
    expect(write.status).toBe(403);
    const chat = await server.api("/api/chats", {
      method: "POST",
      token: mallory.token,
      json: { provider: "openai", model: "m", workingDirectory: "/" },
    });
    expect(chat.status).toBe(403);
  });

  it("with no working directory bound, a non-admin's file tools reach nothing (no fallback to the server's directory)", async () => {
    server = await startTestServer();
    const mallory = await server.ctx.tokens.create("mallory");
    for (const [tool, args] of [
      ["read_file", { path: "README.md" }],
      ["list_directory", { path: "." }],
      ["write_file", { path: "planted.txt", content: "x" }],
      ["read_file", { path: `${process.cwd()}/README.md` }],
    ] as const) {
      const r = await execute(server, mallory.token, tool, { arguments: args });
      expect(r.body, `${tool} ${JSON.stringify(args)}`).toMatchObject({ ok: false, error: { code: "access_denied" } });
      expect(r.body.error?.message).toMatch(/no working directory is bound/);
    }
  });

  it("nobody's tools touch Toolhost's data directory or installed code, admins included", async () => {
    const root = tempDir("toolhost-tenancy-");
    const dataDir = join(root, "data");
    mkdirSync(dataDir);
    writeFileSync(join(root, "notes.txt"), "hello\n");
    server = await startTestServer({ dataDir });
    const ok = await execute(server, server.token, "read_file", {
      arguments: { path: "notes.txt" },
      workingDirectory: root,
    });
    expect(ok.body.ok).toBe(true);
    const db = await execute(server, server.token, "read_file", {
      arguments: { path: "data/toolhost.db", view: "base64" },
      workingDirectory: root,
    });
    expect(db.body).toMatchObject({ ok: false, error: { code: "access_denied" } });
    expect(db.body.error?.message).toMatch(
      /covered by the deniedPaths setting or is one of the paths tools never touch/,
    );
    const listed = await execute(server, server.token, "list_directory", {
      arguments: { path: "data" },
      workingDirectory: root,
    });
    expect(listed.body).toMatchObject({ ok: false, error: { code: "access_denied" } });
    const code = await execute(server, server.token, "read_file", {
      arguments: { path: "dist/cli/main.js" },
      workingDirectory: installRoot,
    });
    expect(code.body).toMatchObject({ ok: false, error: { code: "access_denied" } });
    const overwrite = await execute(server, server.token, "write_file", {
      arguments: { path: "package.json", content: "{}" },
      workingDirectory: installRoot,
    });
    expect(overwrite.body).toMatchObject({ ok: false, error: { code: "access_denied" } });
  });

  it("bounds request bodies and refuses empty ones", async () => {
    server = await startTestServer();
    const empty = await server.api("/api/settings/tools/read_file", {
      method: "PUT",
      body: "",
      headers: { "content-type": "application/json" },
    });
    expect(empty.status).toBe(400);
    const deep = `{"parameters":{"deniedPaths":${"[".repeat(100_000)}${"]".repeat(100_000)}}}`;
    const nested = await server.api("/api/settings/tools/read_file", {
      method: "PUT",
      body: deep,
      headers: { "content-type": "application/json" },
    });
    // Beyond the settings route's limits (64 KiB, depth 8): refused before parsing.
    expect(nested.status).toBe(413);
    const user = await server.ctx.tokens.create("mallory");
    expect((await server.api("/metrics", { token: user.token })).status).toBe(403);
    const badProvider = await server.api("/api/chats", { method: "POST", json: { provider: "bogus", model: "m" } });
    expect(((await badProvider.json()) as { error: { message: string } }).error.message).toMatch(/one of "openai"/);
  });
});

describe("chat roots hold against symlink swaps", () => {
  const savedRoots = process.env.TOOLHOST_CHAT_ROOTS;
  afterEach(() => {
    if (savedRoots === undefined) delete process.env.TOOLHOST_CHAT_ROOTS;
    else process.env.TOOLHOST_CHAT_ROOTS = savedRoots;
  });

  it("binds the real path, and a directory replaced by a link after binding is refused", async () => {
    const { renameSync, symlinkSync, realpathSync } = await import("node:fs");
    const root = realpathSync(tempDir("toolhost-roots-"));
    mkdirSync(join(root, "eve"));
    writeFileSync(join(root, "eve", "mine.txt"), "mine\n");
    symlinkSync(join(root, "eve"), join(root, "sw"));
    process.env.TOOLHOST_CHAT_ROOTS = root;
    process.env.OPENAI_API_KEY = "sk-test-unused"; // chats are created, never run
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");

    const created = await server.api("/api/chats", {
      method: "POST",
      token: eve.token,
      json: { provider: "openai", model: "m", workingDirectory: join(root, "sw") },
    });
    expect(created.status).toBe(201);
    const chat = (await created.json()) as { id: string; workingDirectory: string };
    expect(chat.workingDirectory).toBe(join(root, "eve"));

    // Repointing the link it was bound through changes nothing.
    const { rmSync } = await import("node:fs");
    rmSync(join(root, "sw"));
    symlinkSync("/", join(root, "sw"));
    const mine = await execute(server, eve.token, "read_file", { arguments: { path: "mine.txt" }, chatId: chat.id });
    expect(mine.body.ok).toBe(true);

    // Replacing the bound directory itself by a link to / is refused, for tool calls and for turns.
    renameSync(join(root, "eve"), join(root, "eve-old"));
    symlinkSync("/", join(root, "eve"));
    const escaped = await execute(server, eve.token, "read_file", {
      arguments: { path: "etc/passwd" },
      chatId: chat.id,
    });
    expect(escaped.status).toBe(403);
    expect(JSON.stringify(escaped.body)).not.toContain("root:");
    const turn = await server.api(`/api/chats/${chat.id}/messages`, {
      method: "POST",
      token: eve.token,
      json: { content: "hi" },
    });
    expect(turn.status).toBe(403);
  });

  it("a {user} placeholder gives every user a root of their own", async () => {
    const { realpathSync } = await import("node:fs");
    const root = realpathSync(tempDir("toolhost-user-roots-"));
    for (const user of ["eve", "bob"]) mkdirSync(join(root, user));
    process.env.TOOLHOST_CHAT_ROOTS = join(root, "{user}");
    process.env.OPENAI_API_KEY = "sk-test-unused"; // chats are created, never run
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    const bind = (workingDirectory: string) =>
      server!.api("/api/chats", {
        method: "POST",
        token: eve.token,
        json: { provider: "openai", model: "m", workingDirectory },
      });
    expect((await bind(join(root, "eve"))).status).toBe(201);
    expect((await bind(join(root, "bob"))).status).toBe(403);
    expect((await bind(root)).status).toBe(403);
    const viaExecute = await execute(server, eve.token, "list_directory", {
      arguments: { path: "." },
      workingDirectory: join(root, "bob"),
    });
    expect(viaExecute.status).toBe(403);
  });

  it("a working directory that is itself a link is refused by the path policy (mid-turn swaps)", async () => {
    const { symlinkSync } = await import("node:fs");
    const { memoryRuntime } = await import("../helpers/runtime.js");
    const dir = tempDir("toolhost-link-wd-");
    symlinkSync("/etc", join(dir, "link"));
    const outcome = await memoryRuntime().runtime.executeTool(
      "read_file",
      { path: "passwd" },
      {
        userId: "u",
        workingDirectory: join(dir, "link"),
      },
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: "access_denied" } });
    expect(JSON.stringify(outcome)).toMatch(/symbolic link/);
  });
});

describe("restrictions an admin sets for a user stay set", () => {
  it("a non-admin cannot lift a denied path or re-enable a tool an admin configured for them", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    // The operator (CLI, admin) restricts eve.
    await server.ctx.settings.update(
      "eve",
      "read_file",
      { parameters: { deniedPaths: ["/srv/secret"] } },
      { admin: true },
    );
    await server.ctx.settings.update("eve", "web_fetch", { enabled: false }, { admin: true });
    const put = (tool: string, json: unknown) =>
      server!.api(`/api/settings/tools/${tool}`, { method: "PUT", token: eve.token, json });
    for (const [tool, body] of [
      ["read_file", { parameters: { deniedPaths: null } }],
      ["read_file", { parameters: { deniedPaths: [] } }],
      ["web_fetch", { enabled: true }],
    ] as const) {
      const res = await put(tool, body);
      expect(res.status, `${tool} ${JSON.stringify(body)}`).toBe(403);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/set for you by an admin/);
    }
    // Keys the admin did not set stay hers to change.
    expect((await put("grep", { parameters: { maxResults: 50 } })).status).toBe(200);
    const descriptor = (await (await server.api("/api/settings/tools/read_file", { token: eve.token })).json()) as {
      lockedKeys: string[];
      parameters: { deniedPaths: string[] };
    };
    expect(descriptor.lockedKeys).toEqual(["deniedPaths"]);
    expect(descriptor.parameters.deniedPaths).toEqual(["/srv/secret"]);
    // An admin's reset unlocks.
    await server.ctx.settings.update("eve", "read_file", { parameters: { deniedPaths: null } }, { admin: true });
    expect((await put("read_file", { parameters: { deniedPaths: ["/x"] } })).status).toBe(200);
  });
});
