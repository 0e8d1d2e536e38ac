/**
 * Embedding Toolhost from the built package, the way a user's own server does: the context from "toolhost", the
 * HTTP app from "toolhost/server" mounted in a host app and behind a plain node:http listener, and the MCP
 * endpoint from "toolhost/mcp" on a route of the host's own, each answering real requests on loopback. The
 * entries are resolved by the package's name through its exports map, with their types, and export exactly the
 * names of test/api/public-api.txt (which test/api/exports.test.ts holds equal to the source entries').
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";
import { ENTRIES, type Entry } from "./entries.js";

const require = createRequire(new URL("../../package.json", import.meta.url));
// Loaded by Node itself (require of an ES module), as a consumer's process loads the package — not through the test
// runner's transform, which would first rewrite every built file.
const load = async (entry: string) => require(entry) as Record<string, any>;

let lib: Record<string, any>;
let server: Record<string, any>;
let mcp: Record<string, any>;
let others: Record<string, Record<string, any>>;
let ctx: any;
let token: string;
const closers: (() => Promise<void> | void)[] = [];

function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const s = createServer(handler);
  closers.push(() => new Promise<void>((resolve) => s.close(() => resolve())));
  return new Promise((resolve) =>
    s.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)),
  );
}

beforeAll(async () => {
  [lib, server, mcp] = await Promise.all([load("toolhost"), load("toolhost/server"), load("toolhost/mcp")]);
  const rest = (Object.keys(ENTRIES) as Entry[]).filter(
    (e) => !["toolhost", "toolhost/server", "toolhost/mcp"].includes(e),
  );
  others = Object.fromEntries(await Promise.all(rest.map(async (e) => [e, await load(e)] as const)));
  ctx = await lib.createAppContext({ dataDir: tempDir("toolhost-embed-"), logger: recordingLogger(), adminUsers: [] });
  token = (await ctx.tokens.create("alice")).token;
});

afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await ctx?.close();
});

describe("the built package's entries", () => {
  it("resolve through the exports map, with types, to the names of the public API list", () => {
    // Resolved by the package's own name (a package may import itself through its "exports"), from dist/.
    const root = fileURLToPath(new URL("../../", import.meta.url));
    const manifest = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as {
      exports: Record<string, { types: string; default: string }>;
    };
    const listed: Record<string, string[]> = {};
    let current: string[] = [];
    for (const line of readFileSync(new URL("./public-api.txt", import.meta.url), "utf8").split("\n")) {
      const header = /^\[(.+)\]$/.exec(line);
      if (header) listed[header[1]!] = current = [];
      else if (line.trim()) current.push(line.trim());
    }
    const loaded: Record<string, Record<string, unknown>> = {
      toolhost: lib,
      "toolhost/server": server,
      "toolhost/mcp": mcp,
      ...others,
    };
    expect(Object.keys(loaded).sort()).toEqual(Object.keys(ENTRIES).sort());
    for (const [entry, module] of Object.entries(loaded)) {
      const subpath = entry === "toolhost" ? "." : `./${entry.slice("toolhost/".length)}`;
      expect(require.resolve(entry)).toBe(`${root}${manifest.exports[subpath]!.default.slice(2)}`);
      expect(readFileSync(`${root}${manifest.exports[subpath]!.types.slice(2)}`, "utf8")).toMatch(/export/);
      expect(listed[entry], entry).toBeDefined();
      expect(Object.keys(module).sort(), entry).toEqual(listed[entry]);
    }
    expect(() => require.resolve("toolhost/dist/core/registry.js")).toThrow(/not defined by "exports"/);
  });
});

describe("embedding the built package", () => {
  it("toolhost/server: the Hono app mounted in a host app serves its routes beside the host's own", async () => {
    const host = new Hono();
    host.get("/hello", (c) => c.text("host route"));
    host.route("/", server.createServerApp(ctx));
    const s = serve({ fetch: host.fetch, port: 0, hostname: "127.0.0.1" });
    closers.push(() => new Promise<void>((resolve) => s.close(() => resolve())));
    await new Promise((resolve) => s.once("listening", resolve));
    const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;

    expect(await (await fetch(`${url}/hello`)).text()).toBe("host route");
    expect(await (await fetch(`${url}/api/health`)).json()).toMatchObject({ ok: true });
    expect((await fetch(`${url}/api/me`)).status).toBe(401);
    const me = await fetch(`${url}/api/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(await me.json()).toEqual({ userId: "alice", admin: false });
  });

  it("toolhost/server: createRequestListener answers behind a plain node:http server", async () => {
    const url = await listen(server.createRequestListener(ctx));
    const res = await fetch(`${url}/api/settings/tools/get_current_datetime`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ name: "get_current_datetime" });
  });

  it("toolhost/mcp: the Streamable HTTP endpoint on a host route serves the user's tools to the official client", async () => {
    const endpoint = new mcp.McpHttpEndpoint(ctx.runtime, ctx.logger, ctx.approvals);
    closers.push(() => endpoint.close());
    const host = new Hono();
    host.all("/agent-tools", (c) =>
      endpoint.handle(c.req.raw, { userId: "alice", token: "host-session", workingDirectory: null }),
    );
    const url = await listen(async (req, res) => {
      const { getRequestListener } = await import("@hono/node-server");
      await getRequestListener(host.fetch)(req, res);
    });
    const client = new Client({ name: "embed-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/agent-tools`)));
    closers.push(() => client.close());
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("get_current_datetime");
    const result = await client.callTool({ name: "get_current_datetime", arguments: { timezone: "Asia/Kathmandu" } });
    expect(result.isError).toBeFalsy();
    expect(JSON.stringify(result.structuredContent ?? result.content)).toContain("+05:45");
  });

  it("toolhost/ai-sdk and toolhost/openai-agents: the built adapters give the user's enabled tools in each framework's shape", async () => {
    const work = tempDir("toolhost-embed-work-");
    const set = await others["toolhost/ai-sdk"]!.toolhostTools(ctx, { userId: "alice", workingDirectory: work });
    expect(typeof set.list_directory.execute).toBe("function");
    expect(set.list_directory.inputSchema.jsonSchema).toMatchObject({ type: "object" });
    const tools = await others["toolhost/openai-agents"]!.toolhostTools(ctx, {
      userId: "alice",
      workingDirectory: work,
    });
    const listing = tools.find((t: { name: string }) => t.name === "list_directory");
    expect(listing).toMatchObject({ type: "function", strict: true });
  });
});
