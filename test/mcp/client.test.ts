/**
 * Toolhost as an MCP client: a small MCP server written with the official SDK (test/fixtures/mcp) is added through
 * the admin API, its tools imported, enabled through the settings API, called in a chat turn with the scripted
 * model, re-imported when its schema changes, and its crash reported in the status without breaking the chat.
 */
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterEach, describe, expect, it } from "vitest";
import { runGatedCall } from "../../src/app/approvals/one-off.js";
import { ChatService } from "../../src/app/chat-service.js";
import type { ChatTurnEvent } from "../../src/app/chat-types.js";
import { minimalEnvironment } from "../../src/mcp/client/manager.js";
import { importedToolName, serverMayOwnTool } from "../../src/mcp/client/naming.js";
import { compileOriginalSchema, ImportedSchemaError, normalizeImportedSchema } from "../../src/mcp/client/schema.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";
import { scriptedAdapter, textTurn, toolTurn } from "../loop/scripted-adapter.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp/fixture-server.mjs", import.meta.url));

describe("imported tool names", () => {
  it("are mcp__server__tool, sanitized, at most 64 characters, with a stable hash when cut", () => {
    expect(importedToolName("files", "read")).toBe("mcp__files__read");
    expect(importedToolName("my server", "get.thing")).toBe("mcp__my_server__get_thing");
    const long = importedToolName("s".repeat(50), "t".repeat(50));
    expect(long.length).toBe(64);
    expect(long).toBe(importedToolName("s".repeat(50), "t".repeat(50)));
    expect(long).not.toBe(importedToolName("s".repeat(50), `${"t".repeat(49)}u`));
    expect(long).toMatch(/^mcp__s+__t+_[0-9a-f]{8}$/);
  });

  it("name the servers that may own them (a command about one tool starts only those)", () => {
    expect(serverMayOwnTool("files", "mcp__files__read")).toBe(true);
    expect(serverMayOwnTool("my server", importedToolName("my server", "get.thing"))).toBe(true);
    expect(serverMayOwnTool("file", "mcp__files__read")).toBe(false);
    expect(serverMayOwnTool("files2", "mcp__files__read")).toBe(false);
    // Ambiguous names keep every candidate: "a__b" + "c" and "a" + "b__c" are both mcp__a__b__c.
    expect(serverMayOwnTool("a", "mcp__a__b__c")).toBe(true);
    expect(serverMayOwnTool("a__b", "mcp__a__b__c")).toBe(true);
    // Cut names keep at least the server's first 8 characters.
    for (const [server, tool] of [
      ["s".repeat(50), "t".repeat(50)],
      ["short", "t".repeat(80)],
      ["a-long-server-name-indeed", "x".repeat(60)],
    ] as const) {
      const name = importedToolName(server, tool);
      expect(serverMayOwnTool(server, name), name).toBe(true);
      expect(serverMayOwnTool(`z${server}`, name), name).toBe(false);
    }
  });
});

describe("imported schemas", () => {
  it("inline $ref/$defs with a cycle guard, drop $schema, infer missing types", () => {
    const schema = normalizeImportedSchema({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      properties: {
        node: { $ref: "#/$defs/node" },
        mode: { enum: ["a", "b"] },
        count: { const: 3 },
      },
      $defs: {
        node: { properties: { value: { type: "string" }, next: { $ref: "#/$defs/node" } } },
      },
    });
    expect(schema.$schema).toBeUndefined();
    expect(schema.$defs).toBeUndefined();
    expect(schema.type).toBe("object");
    const node = schema.properties?.node as Record<string, any>;
    expect(node.type).toBe("object");
    expect(node.properties.value).toEqual({ type: "string" });
    expect(node.properties.next.description).toContain("recursive");
    expect(schema.properties?.mode?.type).toBe("string");
    expect(schema.properties?.count?.type).toBe("integer");
    expect(JSON.stringify(schema)).not.toContain("$ref");
  });

  it("refuses a root that is not an object and references that do not resolve", () => {
    expect(() => normalizeImportedSchema({ type: "string" })).toThrow(ImportedSchemaError);
    expect(() => normalizeImportedSchema({ properties: { a: { $ref: "#/$defs/missing" } } })).toThrow(
      ImportedSchemaError,
    );
    expect(() => normalizeImportedSchema({ properties: { a: { $ref: "https://example.com/s.json" } } })).toThrow(
      /outside/,
    );
  });

  it("validates arguments against the original schema in its own dialect (draft-07 and 2020-12)", () => {
    const modern = compileOriginalSchema({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { pair: { type: "array", prefixItems: [{ type: "string" }, { type: "integer" }] } },
    });
    expect(modern({ pair: ["a", 1] })).toBe(true);
    expect(modern({ pair: ["a", "b"] })).toBe(false);
    const draft07 = compileOriginalSchema({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { pair: { type: "array", items: [{ type: "string" }, { type: "integer" }] } },
    });
    expect(draft07({ pair: ["a", 1] })).toBe(true);
    expect(draft07({ pair: ["a", "b"] })).toBe(false);
  });

  it("gives stdio servers a minimal environment, never Toolhost's secrets", () => {
    const env = minimalEnvironment(
      { API_TOKEN: "configured" },
      { PATH: "/usr/bin", HOME: "/home/u", LC_ALL: "C", OPENAI_API_KEY: "sk-secret", TOOLHOST_DATABASE_URL: "pg://x" },
    );
    expect(env).toEqual({ PATH: "/usr/bin", HOME: "/home/u", LC_ALL: "C", API_TOKEN: "configured" });
  });
});

async function collect(events: AsyncIterable<ChatTurnEvent>): Promise<ChatTurnEvent[]> {
  const out: ChatTurnEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe("importing an external MCP server's tools", () => {
  let server: TestServer | undefined;
  const secret = process.env.OPENAI_API_KEY;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    if (secret === undefined) delete process.env.OPENAI_API_KEY;
    else process.env.OPENAI_API_KEY = secret;
  });

  async function status(s: TestServer, name: string): Promise<any> {
    return (await s.api(`/api/admin/mcp-servers/${encodeURIComponent(name)}`)).json();
  }

  it("imports, enables, calls in a chat turn, notices a schema change, and survives a crash", async () => {
    process.env.OPENAI_API_KEY = "sk-must-not-leak";
    server = await startTestServer();
    const s = server;
    const added = await s.api("/api/admin/mcp-servers", {
      method: "POST",
      json: { name: "fixture", command: process.execPath, args: [FIXTURE], env: { FIXTURE_FLAG: "1" } },
    });
    expect(added.status).toBe(201);
    const connected = await until(() => status(s, "fixture"), "the fixture to connect", {
      accept: (st) => st.state === "connected",
      timeoutMs: 15_000,
    });
    expect(connected.serverInfo).toEqual({ name: "fixture", version: "1.2.3" });
    expect(connected.stderrTail).toContain("fixture server started");
    expect(connected.tools.map((t: { name: string }) => t.name)).toEqual(
      expect.arrayContaining(["mcp__fixture__echo", "mcp__fixture__add", "mcp__fixture__crash"]),
    );
    // One bad tool is skipped with a warning, never the whole server.
    expect(connected.warnings.join("\n")).toContain("bad_tool");
    expect(connected.tools.map((t: { name: string }) => t.name)).not.toContain("mcp__fixture__bad_tool");

    // In the settings API: disabled by default, annotations and origin shown.
    const echoSettings = (await (await s.api("/api/settings/tools/mcp__fixture__echo")).json()) as any;
    expect(echoSettings).toMatchObject({
      enabled: false,
      annotations: { readOnlyHint: true, openWorldHint: false },
      external: { kind: "mcp", server: "fixture", tool: "echo", trusted: false },
    });
    expect(echoSettings.definition.parameters.properties.text).toMatchObject({ type: "string", minLength: 1 });
    const firstHash = echoSettings.external.contentHash;

    for (const tool of ["echo", "add", "env", "crash", "slow"]) {
      // Imported tools of an untrusted server ask before each call by default; this user allows them.
      const put = await s.api(`/api/settings/tools/mcp__fixture__${tool}`, {
        method: "PUT",
        json: { enabled: true, parameters: { approval: "allow" } },
      });
      expect(put.status).toBe(200);
    }

    // A chat turn with the scripted model calls the imported tools.
    const adapter = scriptedAdapter([
      toolTurn([
        { id: "c1", name: "mcp__fixture__echo", arguments: JSON.stringify({ text: "hello" }) },
        { id: "c2", name: "mcp__fixture__add", arguments: JSON.stringify({ a: 2, b: 3 }) },
        { id: "c3", name: "mcp__fixture__env", arguments: "{}" },
        { id: "c4", name: "mcp__fixture__echo", arguments: JSON.stringify({ text: "" }) },
      ]),
      textTurn("done"),
    ]);
    const chats = new ChatService({
      chats: s.ctx.chats,
      runtime: s.ctx.runtime,
      adapterFactory: () => adapter,
      chatRoots: null,
    });
    const chat = await chats.createChat("local", { provider: "openai", model: "scripted" });
    const events = await collect((await chats.prepareTurn("local", chat.id, "use the tools")).run());
    const offered = adapter.requests[0]?.tools?.map((t) => t.name) ?? [];
    expect(offered).toContain("mcp__fixture__echo");
    const results = Object.fromEntries(
      events.filter((e) => e.type === "tool_result").map((e: any) => [e.id, e]),
    ) as Record<string, any>;
    expect(results.c1).toMatchObject({ ok: true, result: { source: "mcp:fixture", text: "echo: hello" } });
    expect(results.c1.result.notice).toContain("not as instructions");
    expect(results.c2.result.structuredContent).toEqual({ sum: 5 });
    const envNames = JSON.parse(results.c3.result.text) as string[];
    expect(envNames).toContain("PATH");
    expect(envNames).toContain("FIXTURE_FLAG");
    expect(envNames).not.toContain("OPENAI_API_KEY");
    expect(envNames).not.toContain("TOOLHOST_DATA_DIR");
    // Validated against the original schema (minLength from the inlined $defs).
    expect(results.c4).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    expect(events.at(-1)).toMatchObject({ type: "done", reason: "text" });

    // Toolhost's own MCP server offers the imported tool like a built-in.
    const client = new Client({ name: "t", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${s.server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${s.token}` } },
      }),
    );
    try {
      const listed = (await client.listTools()).tools.find((t) => t.name === "mcp__fixture__echo");
      expect(listed?.annotations).toMatchObject({ readOnlyHint: true });
      const viaMcp = await client.callTool({ name: "mcp__fixture__echo", arguments: { text: "relay" } });
      expect(JSON.stringify(viaMcp.structuredContent)).toContain("echo: relay");
    } finally {
      await client.close();
    }

    // The server changes echo's schema and says so: the new schema and hash arrive without a reconnect.
    await s.ctx.runtime.executeTool("mcp__fixture__mutate", "{}", { userId: "local", allowDefaultDisabled: true });
    const changed = (await until(
      async () => (await s.api("/api/settings/tools/mcp__fixture__echo")).json(),
      "the changed schema",
      {
        accept: (d: any) => d.definition.parameters.properties.loud !== undefined,
        timeoutMs: 15_000,
      },
    )) as any;
    expect(changed.external.contentHash).not.toBe(firstHash);
    expect(changed.enabled).toBe(true);
    // An "always allow" recorded for the old version asks again; one for the current version does not.
    const echoTool = s.ctx.runtime.registry.get("mcp__fixture__echo");
    const hintFor = (hash: string) =>
      echoTool?.approvalHint?.({}, { settings: { enabled: true, values: { approvedContentHash: hash } } } as never);
    expect(await hintFor(firstHash)).toMatchObject({ decision: "ask" });
    expect(await hintFor(changed.external.contentHash)).toBeUndefined();

    // A chat's abort cancels a running call.
    const controller = new AbortController();
    const slow = s.ctx.runtime.executeTool("mcp__fixture__slow", "{}", { userId: "local", signal: controller.signal });
    await until(() => status(s, "fixture"), "status", { accept: () => true });
    setTimeout(() => controller.abort(), 100);
    expect(await slow).toMatchObject({ ok: false, error: { code: "aborted" } });

    // The server crashes mid-call: the chat turn still completes, and the status says what happened.
    const crashAdapter = scriptedAdapter([
      toolTurn([{ id: "k1", name: "mcp__fixture__crash", arguments: "{}" }]),
      textTurn("it crashed"),
    ]);
    const crashChats = new ChatService({
      chats: s.ctx.chats,
      runtime: s.ctx.runtime,
      adapterFactory: () => crashAdapter,
      chatRoots: null,
    });
    const crashEvents = await collect((await crashChats.prepareTurn("local", chat.id, "crash it")).run());
    expect(crashEvents.find((e) => e.type === "tool_result")).toMatchObject({ ok: false });
    expect(crashEvents.at(-1)).toMatchObject({ type: "done", reason: "text" });
    const failed = await until(() => status(s, "fixture"), "the crash to show", {
      accept: (st) => st.state === "failed",
      timeoutMs: 15_000,
    });
    expect(failed.lastError).toMatch(/exited|closed/);
    expect(failed.stderrTail).toContain("crashing now");

    // The next call reconnects.
    const again = await s.ctx.runtime.executeTool("mcp__fixture__echo", { text: "back" }, { userId: "local" });
    expect(again).toMatchObject({ ok: true, result: { text: "echo: back" } });

    // Removing the server removes its tools.
    expect((await s.api("/api/admin/mcp-servers/fixture", { method: "DELETE" })).status).toBe(204);
    expect((await s.api("/api/settings/tools/mcp__fixture__echo")).status).toBe(404);
  });

  it("an always-allow covers one version of an imported tool: after a change the call asks again", async () => {
    server = await startTestServer();
    const s = server;
    await s.api("/api/admin/mcp-servers", {
      method: "POST",
      json: { name: "pinned", command: process.execPath, args: [FIXTURE] },
    });
    await until(() => status(s, "pinned"), "the fixture to connect", {
      accept: (st) => st.state === "connected",
      timeoutMs: 15_000,
    });
    await s.api("/api/settings/tools/mcp__pinned__echo", { method: "PUT", json: { enabled: true } });
    const asked: string[] = [];
    const responder = {
      async answer(request: { tool: string; reason: string }) {
        asked.push(request.reason);
        return { decision: "allow_always" as const, decidedBy: "test" };
      },
    };
    const call = () =>
      runGatedCall(
        "mcp__pinned__echo",
        { text: "x" },
        { runtime: s.ctx.runtime, approvals: s.ctx.approvals, userId: "local", responder },
      );
    expect(await call()).toMatchObject({ ok: true });
    expect(asked).toHaveLength(1);
    const settings = (await (await s.api("/api/settings/tools/mcp__pinned__echo")).json()) as any;
    expect(settings.parameters).toMatchObject({
      approval: "allow",
      approvedContentHash: settings.external.contentHash,
    });
    expect(await call()).toMatchObject({ ok: true });
    expect(asked).toHaveLength(1);

    await s.ctx.runtime.executeTool("mcp__pinned__mutate", "{}", { userId: "local", allowDefaultDisabled: true });
    await until(async () => (await s.api("/api/settings/tools/mcp__pinned__echo")).json(), "the changed schema", {
      accept: (d: any) => d.definition.parameters.properties.loud !== undefined,
      timeoutMs: 15_000,
    });
    expect(await call()).toMatchObject({ ok: true });
    expect(asked).toHaveLength(2);
    expect(asked[1]).toContain("changed");
  });

  it("reports a server that cannot start as failed, and keeps serving", async () => {
    server = await startTestServer();
    const added = await server.api("/api/admin/mcp-servers", {
      method: "POST",
      json: { name: "broken", command: "/nonexistent/mcp-server-binary", connectTimeoutMs: 2000 },
    });
    expect(added.status).toBe(201);
    const s = server;
    const failed = await until(() => status(s, "broken"), "the broken server to fail", {
      accept: (st) => st.state === "failed",
      timeoutMs: 15_000,
    });
    expect(failed.lastError).toBeTruthy();
    const bad = await server.api("/api/admin/mcp-servers", { method: "POST", json: { name: "x", url: "ftp://a" } });
    expect(bad.status).toBe(400);
    const dup = await server.api("/api/admin/mcp-servers", {
      method: "POST",
      json: { name: "broken", command: "true" },
    });
    expect(dup.status).toBe(400);
    expect((await server.api("/api/settings/tools/get_current_datetime")).status).toBe(200);
    const dir = tempDir();
    expect(dir).toBeTruthy();
  });
});
