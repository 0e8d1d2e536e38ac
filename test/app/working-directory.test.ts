import { existsSync, mkdirSync, realpathSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { adminRule } from "../../src/app/admin.js";
import { WorkingDirectoryBinder } from "../../src/app/working-directory.js";
import { parseAdminUsers } from "../../src/core/config.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

const root = realpathSync(tempDir("toolhost-binder-"));
mkdirSync(join(root, "eve", "project"), { recursive: true });
writeFileSync(join(root, "eve", "notes.txt"), "x");
symlinkSync("/etc", join(root, "eve", "to-etc"));
const eve = { userId: "eve", admin: false };

function refusal(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (error) {
    return { code: (error as { code: string }).code, message: (error as Error).message };
  }
  throw new Error("expected a refusal");
}

describe("the working-directory binder", () => {
  const binder = new WorkingDirectoryBinder([join(root, "{user}")]);

  it("creates a new user's own root (mode 0700) on their first binding; never above an operator's missing directory", () => {
    const fresh = binder.bind(".", { userId: "newcomer", admin: false });
    expect(fresh).toBe(join(root, "newcomer"));
    expect(statSync(join(root, "newcomer")).mode & 0o777).toBe(0o700);
    const nested = new WorkingDirectoryBinder([join(root, "missing-base", "{user}")]);
    expect(refusal(() => nested.bind(".", { userId: "newcomer", admin: false })).message).toMatch(/does not exist/);
    expect(existsSync(join(root, "missing-base"))).toBe(false);
    // A user id that is only dots names no root of its own, and creates nothing.
    expect(() => binder.bind(".", { userId: "..", admin: false })).toThrow();
  });

  it("a missing directory under roots is refused saying how to bind the user's own root (a relative one)", () => {
    const missing = refusal(() => binder.bind(undefined, eve));
    expect(missing.code).toBe("access_denied");
    expect(missing.message).toContain(join(root, "eve"));
    expect(missing.message).toContain(`"." binds ${join(root, "eve")}`);
    // The CLI resolves relative values against its own directory, so the hint is not offered there.
    const cli = refusal(() => binder.bind(undefined, { ...eve, base: "/tmp", argument: "--cwd" }));
    expect(cli.message).not.toContain('"."');
  });

  it("gives one answer for everything outside the roots, whatever exists there", () => {
    const answers = ["/etc/ssh", "/etc/nonexistent", "/etc/passwd", join(root, "eve", "to-etc", "nope")].map((p) =>
      refusal(() => binder.bind(p, eve)),
    );
    for (const answer of answers) expect(answer.code).toBe("access_denied");
    const texts = answers.map((a, i) =>
      a.message.replace(
        JSON.stringify(["/etc/ssh", "/etc/nonexistent", "/etc/passwd", join(root, "eve", "to-etc", "nope")][i]),
        "<input>",
      ),
    );
    expect(new Set(texts).size).toBe(1);
    expect(texts[0]).not.toMatch(/exist|directory\b.*not/);
  });

  it("reports existence only inside the caller's roots", () => {
    expect(refusal(() => binder.bind(join(root, "eve", "missing"), eve)).message).toMatch(/does not exist/);
    expect(refusal(() => binder.bind(join(root, "eve", "notes.txt"), eve)).message).toMatch(/is not a directory/);
    expect(binder.bind(join(root, "eve", "project"), eve)).toBe(join(root, "eve", "project"));
  });

  it("resolves a relative value against the caller's root, never the server's directory", () => {
    expect(binder.bind("project", eve)).toBe(join(root, "eve", "project"));
    const upward = refusal(() => binder.bind("../..", eve));
    expect(upward.code).toBe("access_denied");
    const missing = refusal(() => binder.bind("nope", eve));
    expect(missing.message).not.toContain(process.cwd());
    expect(missing.message).not.toContain(root);
  });

  it("without roots: only admins bind, absolute paths only unless the caller has a base of its own", () => {
    const open = new WorkingDirectoryBinder(null);
    expect(refusal(() => open.bind("/tmp", eve)).code).toBe("access_denied");
    expect(open.bind(join(root, "eve"), { userId: "root", admin: true })).toBe(join(root, "eve"));
    const relative = refusal(() => open.bind("project", { userId: "root", admin: true }));
    expect(relative.code).toBe("validation_failed");
    expect(relative.message).not.toContain(process.cwd());
    expect(open.bind("project", { userId: "op", admin: true, base: join(root, "eve") })).toBe(
      join(root, "eve", "project"),
    );
    expect(open.bind(undefined, eve)).toBeNull();
  });

  it("a call in a chat uses the chat's directory; another one is refused", () => {
    const chat = { id: "c1", userId: "eve", workingDirectory: join(root, "eve", "project") };
    expect(binder.forChat(chat, undefined, eve)).toBe(chat.workingDirectory);
    expect(binder.forChat(chat, "project", eve)).toBe(chat.workingDirectory);
    expect(refusal(() => binder.forChat(chat, join(root, "eve"), eve)).message).toMatch(/is bound to/);
  });
});

describe("the admin rule is read once", () => {
  it("parses TOOLHOST_ADMIN_USERS (default local) and answers from what it read", () => {
    expect([...parseAdminUsers(undefined)]).toEqual(["local"]);
    expect([...parseAdminUsers(" a, ,b ")]).toEqual(["a", "b"]);
    const rule = adminRule(["ops"]);
    expect(rule.isAdmin("ops")).toBe(true);
    expect(rule.isAdmin("local")).toBe(false);
  });
});

describe("every HTTP surface binds through the context's binder", () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it("the tool route and chats give /etc/ssh, /etc/nonexistent and /etc/passwd the same 403 text", async () => {
    server = await startTestServer({ chatRoots: [join(root, "{user}")] });
    const token = (await server.ctx.tokens.create("eve")).token;
    const texts: string[] = [];
    for (const dir of ["/etc/ssh", "/etc/nonexistent", "/etc/passwd"]) {
      const viaTool = await server.api("/api/tools/list_directory/execute", {
        method: "POST",
        token,
        json: { arguments: { path: "." }, workingDirectory: dir },
      });
      const viaChat = await server.api("/api/chats", {
        method: "POST",
        token,
        json: { provider: "openai", model: "m", workingDirectory: dir },
      });
      for (const res of [viaTool, viaChat]) {
        expect(res.status).toBe(403);
        const body = (await res.json()) as { error: { message: string } };
        texts.push(body.error.message.replace(JSON.stringify(dir), "<input>"));
      }
    }
    expect(new Set(texts).size).toBe(1);
    const relative = await server.api("/api/tools/list_directory/execute", {
      method: "POST",
      token,
      json: { arguments: { path: "." }, workingDirectory: "project" },
    });
    expect(relative.status).toBe(200);
    expect(((await relative.json()) as { ok: boolean }).ok).toBe(true);
  });
});
