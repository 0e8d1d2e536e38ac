import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { defaultRegistry, ToolRegistryStore } from "../../src/core/registry.js";
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../src/core/settings-policy.js";
import type { RegisteredTool } from "../../src/core/types.js";
import { registerBuiltinTools } from "../../src/tools/index.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

registerBuiltinTools();

/** The built-ins plus a tool with a ranged setting and one that cannot be disabled. */
function registryWithTestTools(): ToolRegistryStore {
  const registry = new ToolRegistryStore();
  for (const tool of defaultRegistry.list()) registry.register(tool);
  const base = (name: string, canDisable: boolean): RegisteredTool => ({
    definition: { name, description: name, parameters: { type: "object", properties: {} } },
    settings: {
      title: name,
      description: name,
      category: "interaction",
      enabledByDefault: true,
      canDisable,
      defaultParameters: { timeoutSeconds: 30 },
      parameterDescriptors: [TIMEOUT_SECONDS_DESCRIPTOR],
    },
    execute: async () => ({ ok: true }),
  });
  registry.register(base("slow_job", true));
  registry.register(base("pinned", false));
  return registry;
}

let servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  servers = [];
});
async function start(dataDir?: string) {
  const s = await startTestServer({ registry: registryWithTestTools(), ...(dataDir ? { dataDir } : {}) });
  servers.push(s);
  return s;
}

describe("settings API over real HTTP and SQLite", () => {
  it("prints a token on first start only", async () => {
    const s = await start();
    expect(s.token).toMatch(/^th_[A-Za-z0-9_-]{40,}$/);
    await s.stop();
    servers = [];
    const again = await start(s.dataDir);
    expect(again.token).toBe("");
  });

  it("refuses requests without a valid token with 401 and no tool data", async () => {
    const s = await start();
    for (const token of [null, "th_wrong", ""]) {
      const res = await s.api("/api/settings/tools", { token });
      expect(res.status).toBe(401);
      const text = await res.text();
      expect(text).not.toContain("get_current_datetime");
    }
    expect(
      (await s.api("/api/tools/get_current_datetime/execute", { method: "POST", token: null, json: {} })).status,
    ).toBe(401);
    expect((await s.api("/metrics", { token: null })).status).toBe(401);
  });

  it("lists built-ins with metadata and effective settings", async () => {
    const s = await start();
    const res = await s.api("/api/settings/tools");
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      tools: { name: string; category: string; enabled: boolean; parameters: object }[];
    };
    const names = body.tools.map((t) => t.name);
    expect(names).toContain("get_current_datetime");
    expect(names).toContain("list_directory");
    expect(body.tools.find((t) => t.name === "get_current_datetime")).toMatchObject({
      category: "system",
      enabled: true,
      canDisable: true,
      parameters: { defaultTimezone: "UTC" },
    });
  });

  it("422 names the parameter of an out-of-range PUT; nothing is written", async () => {
    const s = await start();
    const res = await s.api("/api/settings/tools/slow_job", {
      method: "PUT",
      json: { parameters: { timeoutSeconds: 9999 } },
    });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("invalid_settings");
    expect(body.error.message).toMatch(/timeoutSeconds.*at most 600/);
    const after = (await (await s.api("/api/settings/tools/slow_job")).json()) as {
      parameters: { timeoutSeconds: number };
    };
    expect(after.parameters.timeoutSeconds).toBe(30);
  });

  it("422 for disabling a tool that cannot be disabled, 404 for an unknown tool, 400 for a malformed body", async () => {
    const s = await start();
    expect((await s.api("/api/settings/tools/pinned", { method: "PUT", json: { enabled: false } })).status).toBe(422);
    expect((await s.api("/api/settings/tools/nope", { method: "PUT", json: { enabled: false } })).status).toBe(404);
    const malformed = await s.api("/api/settings/tools/slow_job", {
      method: "PUT",
      body: "{oops",
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
    expect((await s.api("/api/settings/tools/slow_job", { method: "PUT", json: { enabled: "yes" } })).status).toBe(400);
    expect((await s.api("/api/settings/tools/slow_job", { method: "PUT", json: { colour: "red" } })).status).toBe(400);
    // The on/off state sent among the parameters: the 422 says where it goes.
    const misplaced = await s.api("/api/settings/tools/slow_job", {
      method: "PUT",
      json: { parameters: { enabled: false } },
    });
    expect(misplaced.status).toBe(422);
    expect(((await misplaced.json()) as { error: { message: string } }).error.message).toContain(
      'send {"enabled": false} beside "parameters" (CLI: --enable or --disable)',
    );
  });

  it("a valid PUT persists across a restart, per user", async () => {
    const s = await start();
    const put = await s.api("/api/settings/tools/slow_job", {
      method: "PUT",
      json: { enabled: false, parameters: { timeoutSeconds: 120 } },
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({ enabled: false, parameters: { timeoutSeconds: 120 } });
    const other = await s.ctx.tokens.create("someone-else");
    const theirs = (await (await s.api("/api/settings/tools/slow_job", { token: other.token })).json()) as {
      enabled: boolean;
    };
    expect(theirs.enabled).toBe(true);
    await s.stop();
    servers = [];

    const restarted = await start(s.dataDir);
    const res = await restarted.api("/api/settings/tools/slow_job", { token: s.token });
    expect(await res.json()).toMatchObject({ enabled: false, parameters: { timeoutSeconds: 120 } });
    // null resets one parameter to its default.
    const reset = await restarted.api("/api/settings/tools/slow_job", {
      method: "PUT",
      token: s.token,
      json: { parameters: { timeoutSeconds: null } },
    });
    expect(await reset.json()).toMatchObject({ enabled: false, parameters: { timeoutSeconds: 30 } });
  });

  it("only admins may enable shell tools or widen what a tool can reach", async () => {
    const s = await start();
    const user = await s.ctx.tokens.create("mallory");
    const asUser = (path: string, json: unknown) => s.api(path, { method: "PUT", token: user.token, json });
    for (const [tool, body] of [
      ["bash", { enabled: true }],
      ["shell_exec", { enabled: true }],
      ["read_file", { parameters: { restrictPaths: false } }],
      ["read_file", { parameters: { allowedPaths: ["/"] } }],
      ["web_fetch", { parameters: { allowedHosts: ["169.254.169.254"] } }],
    ] as const) {
      const res = await asUser(`/api/settings/tools/${tool}`, body);
      expect(res.status, `${tool} ${JSON.stringify(body)}`).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("access_denied");
    }
    // Narrowing stays open to everyone; the default admin ("local") may widen.
    expect(
      (await asUser("/api/settings/tools/read_file", { parameters: { deniedPaths: ["/tmp/secret"] } })).status,
    ).toBe(200);
    expect((await asUser("/api/settings/tools/bash", { enabled: false })).status).toBe(200);
    // Once an admin enabled bash for mallory (and so locked it), her asking for the state it has changes nothing:
    // not a refusal. Turning it off is what the lock refuses.
    const granted = await s.api("/api/admin/users/mallory/settings/tools/bash", {
      method: "PUT",
      json: { enabled: true },
    });
    expect(granted.status).toBe(200);
    expect((await asUser("/api/settings/tools/bash", { enabled: true })).status).toBe(200);
    const off = await asUser("/api/settings/tools/bash", { enabled: false });
    expect(off.status).toBe(403);
    expect(((await off.json()) as { error: { details: { rule: string } } }).error.details.rule).toBe("admin_locked");
    const admin = await s.api("/api/settings/tools/read_file", {
      method: "PUT",
      json: { parameters: { allowedPaths: ["/srv"] } },
    });
    expect(admin.status).toBe(200);
    const list = (await (await s.api("/api/settings/tools")).json()) as {
      tools: { name: string; enablingRequiresAdmin: boolean }[];
    };
    expect(list.tools.find((t) => t.name === "bash")?.enablingRequiresAdmin).toBe(true);
  });

  it("a non-admin may PUT back the parameters it read: admin-only and locked values it does not change are no refusal", async () => {
    const s = await start();
    const user = await s.ctx.tokens.create("mallory");
    const asUser = (path: string, json: unknown) => s.api(path, { method: "PUT", token: user.token, json });
    type Descriptor = { parameters: Record<string, unknown>; lockedKeys: string[]; version: number };
    await s.api("/api/admin/users/mallory/settings/tools/web_fetch", {
      method: "PUT",
      json: { parameters: { timeoutSeconds: 10, approvalRules: [{ decision: "deny", match: "evil.example" }] } },
    });
    for (const tool of ["read_file", "web_fetch"]) {
      const read = (await (await s.api(`/api/settings/tools/${tool}`, { token: user.token })).json()) as Descriptor;
      const res = await asUser(`/api/settings/tools/${tool}`, {
        parameters: { ...read.parameters, maxResultLines: 100 },
      });
      expect(res.status, tool).toBe(200);
      const after = (await res.json()) as Descriptor;
      expect(after.parameters).toEqual({ ...read.parameters, maxResultLines: 100 });
      expect(after.lockedKeys).toEqual(read.lockedKeys);
    }
    // The unchanged admin-only values were not stored as the user's own.
    const row = await s.ctx.database.db
      .selectFrom("user_tool_settings")
      .select("parameters")
      .where("user_id", "=", "mallory")
      .where("tool_name", "=", "read_file")
      .executeTakeFirstOrThrow();
    expect(Object.keys(JSON.parse(row.parameters))).not.toContain("restrictPaths");
    expect(Object.keys(JSON.parse(row.parameters))).not.toContain("allowedPaths");
    // A locked rule sent without its optional fields is the same rule; resetting an admin-only value nobody set is
    // no change either.
    const same = await asUser("/api/settings/tools/web_fetch", {
      parameters: { approvalRules: [{ decision: "deny", match: "evil.example" }], timeoutSeconds: 10 },
    });
    expect(same.status).toBe(200);
    expect((await asUser("/api/settings/tools/read_file", { parameters: { restrictPaths: null } })).status).toBe(200);
    // A change of either is still refused.
    for (const [tool, parameters, rule] of [
      ["web_fetch", { timeoutSeconds: 11 }, "admin_locked"],
      ["web_fetch", { approvalRules: [] }, "admin_locked"],
      ["read_file", { restrictPaths: false }, "admin_only"],
      ["read_file", { allowedPaths: ["/"] }, "admin_only"],
    ] as const) {
      const res = await asUser(`/api/settings/tools/${tool}`, { parameters });
      expect(res.status, JSON.stringify(parameters)).toBe(403);
      expect(((await res.json()) as { error: { details: { rule: string } } }).error.details.rule).toBe(rule);
    }
  });

  it("refuses path rules whose matching would stall the server (422 naming the limit), before trying their examples", async () => {
    const s = await start();
    const user = await s.ctx.tokens.create("mallory");
    const rules = (rule: Record<string, unknown>) =>
      s.api("/api/settings/tools/read_file", {
        method: "PUT",
        token: user.token,
        json: { parameters: { approvalRules: [{ decision: "deny", ...rule }] } },
      });
    // Matched as a regular expression, twelve `*` in one name backtrack for years on a long name: the example alone
    // takes a noticeable fraction of a second, one a few characters longer would take minutes.
    for (const [rule, message] of [
      [{ match: `/x/${"*a".repeat(12)}b`, mustNotMatch: [`/x/${"a".repeat(24)}`] }, /at most 3 wildcards/],
      [{ match: "/x/*a*a*b" }, /at most 3 wildcards|at most 2 "\*"/],
      [{ match: "/x/**/a/**/a/**" }, /at most 3 wildcards|at most 2 "\*\*"/],
      [{ match: "/x/+(a|aa)b" }, /extglobs/],
      [{ match: "/x/**", mustMatch: [`/x/${"a".repeat(5000)}`] }, /longer than any path/],
    ] as const) {
      const res = await rules(rule);
      expect(res.status, rule.match).toBe(422);
      const body = (await res.json()) as { error: { message: string; details: { parameter: string } } };
      expect(body.error.message).toMatch(message);
      expect(body.error.details.parameter).toBe("approvalRules");
    }
    // Ordinary globs stay welcome.
    for (const match of ["**/node_modules/**/*.js", "~/notes/*.md", "src/**", "/srv/*/secret-*.txt", "\\*\\*\\*"]) {
      expect((await rules({ match })).status, match).toBe(200);
    }
  });

  it("executes a tool, honouring the user's settings", async () => {
    const s = await start();
    const ok = await s.api("/api/tools/get_current_datetime/execute", {
      method: "POST",
      json: { arguments: { timezone: "Asia/Kathmandu" } },
    });
    expect(await ok.json()).toMatchObject({ ok: true, result: { offset: "+05:45" } });
    const bad = await s.api("/api/tools/get_current_datetime/execute", {
      method: "POST",
      json: { arguments: { timezone: 42 } },
    });
    expect(await bad.json()).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    await s.api("/api/settings/tools/get_current_datetime", { method: "PUT", json: { enabled: false } });
    const off = await s.api("/api/tools/get_current_datetime/execute", { method: "POST", json: { arguments: {} } });
    expect(await off.json()).toMatchObject({ ok: false, error: { code: "access_denied" } });
    // A tool's not_found (a file that is not there) is an outcome like any other: 200. Only an unknown tool is 404.
    const dir = mkdtempSync(join(tmpdir(), "toolhost-execute-"));
    const missing = await s.api("/api/tools/read_file/execute", {
      method: "POST",
      json: { arguments: { path: "nothere.txt" }, workingDirectory: dir },
    });
    expect(missing.status).toBe(200);
    expect(await missing.json()).toMatchObject({ ok: false, error: { code: "not_found" } });
    const unknown = await s.api("/api/tools/no_such_tool/execute", { method: "POST", json: { arguments: {} } });
    expect(unknown.status).toBe(404);
    const unknownBody = (await unknown.json()) as { error: { message: string } };
    expect(unknownBody).toMatchObject({ ok: false, error: { code: "not_found" } });
    // Said to an API client, not to a model: where to find the tools.
    expect(unknownBody.error.message).toContain("GET /api/tools");
  });

  it("serves the settings page without a token, and it reveals no tools", async () => {
    const s = await start();
    const res = await s.api("/", { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    const html = await res.text();
    expect(html).toContain("/api/settings/tools");
    expect(html).not.toContain("get_current_datetime");
  });

  it("serves the OpenAPI document and metrics", async () => {
    const s = await start();
    const doc = (await (await s.api("/api/openapi.json", { token: null })).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/api/settings/tools", "/api/settings/tools/{toolName}"]),
    );
    await s.api("/api/tools/get_current_datetime/execute", { method: "POST", json: { arguments: {} } });
    const metrics = await (await s.api("/metrics")).text();
    expect(metrics).toMatch(/tool_execution_total\{tool="get_current_datetime",status="success"\} \d+/);
    expect(metrics).toContain("function_call_duration_ms_bucket");
  });
});
