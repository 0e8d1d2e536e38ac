/**
 * MCP details beyond the main flows: progress notifications from a tool's progress events, importing a Streamable
 * HTTP server (written in the test with the SDK's createMcpHandler), and imported schemas through the mappers.
 */
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createMcpHandler, Server } from "@modelcontextprotocol/server";
import { afterEach, describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { normalizeImportedSchema } from "../../src/mcp/client/schema.js";
import { toolDefsToResponsesAPI } from "../../src/providers/tool-mapper.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let server: TestServer | undefined;
let http: HttpServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
  await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
  http = undefined;
});

describe("progress over MCP", () => {
  it("sends notifications/progress for each progress event a tool emits", async () => {
    const registry = new ToolRegistryStore();
    registry.register({
      definition: { name: "steps", description: "Does three steps.", parameters: { type: "object", properties: {} } },
      settings: { title: "Steps", annotations: { readOnlyHint: true } },
      async execute(_args, context) {
        for (const n of [1, 2, 3]) context.emitProgress({ kind: "step", message: `step ${n}` });
        return { steps: 3 };
      },
    });
    server = await startTestServer({ registry });
    const client = new Client({ name: "progress", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
      }),
    );
    try {
      const seen: { progress: number; message?: string }[] = [];
      const result = await client.callTool(
        { name: "steps", arguments: {} },
        { onprogress: (p) => seen.push({ progress: p.progress, message: p.message }) },
      );
      expect(result.structuredContent).toEqual({ steps: 3 });
      expect(seen).toEqual([
        { progress: 1, message: "step 1" },
        { progress: 2, message: "step 2" },
        { progress: 3, message: "step 3" },
      ]);
    } finally {
      await client.close();
    }
  });
});

/** A Streamable HTTP MCP server on loopback built with the SDK: one `lookup` tool. */
async function startRemoteServer(): Promise<string> {
  const handler = createMcpHandler(() => {
    const s = new Server({ name: "remote", version: "0.1.0" }, { capabilities: { tools: {} } });
    s.setRequestHandler("tools/list", async () => ({
      tools: [
        {
          name: "lookup",
          description: "Looks a word up.",
          inputSchema: {
            type: "object",
            properties: { word: { type: "string" } },
            required: ["word"],
            additionalProperties: false,
          },
        },
      ],
    }));
    s.setRequestHandler("tools/call", async (request) => ({
      content: [{ type: "text", text: `definition of ${String(request.params.arguments?.word)}` }],
    }));
    return s;
  });
  http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const response = await handler.fetch(
      new Request(`http://127.0.0.1${req.url}`, {
        method: req.method,
        headers,
        ...(req.method === "GET" || req.method === "HEAD" ? {} : { body: Buffer.concat(chunks) }),
      }),
    );
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) for await (const chunk of response.body) res.write(chunk);
    res.end();
  });
  await new Promise<void>((resolve) => http?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
}

describe("importing a Streamable HTTP server", () => {
  it("connects by URL, imports and calls its tool", async () => {
    const url = await startRemoteServer();
    server = await startTestServer();
    const s = server;
    const added = await s.api("/api/admin/mcp-servers", { method: "POST", json: { name: "remote", url } });
    expect(added.status).toBe(201);
    const status = await until(
      async () => (await (await s.api("/api/admin/mcp-servers/remote")).json()) as { state?: string },
      "the remote server to leave the connecting state",
      { accept: (value: { state?: string }) => value.state !== "connecting", timeoutMs: 15_000, intervalMs: 50 },
    );
    expect(status).toMatchObject({ state: "connected", transport: "http", serverInfo: { name: "remote" } });
    const outcome = await s.ctx.runtime.executeTool(
      "mcp__remote__lookup",
      { word: "tool" },
      { userId: "local", allowDefaultDisabled: true },
    );
    expect(outcome).toMatchObject({ ok: true, result: { source: "mcp:remote", text: "definition of tool" } });
  });
});

describe("imported schemas in the provider mappers", () => {
  it("are sent strict when the derived schema allows it, non-strict otherwise", () => {
    const closed = normalizeImportedSchema({
      type: "object",
      properties: { word: { type: "string" } },
      required: ["word"],
      additionalProperties: false,
    });
    const open = normalizeImportedSchema({ properties: { extra: { type: "object", additionalProperties: true } } });
    const [a, b] = toolDefsToResponsesAPI([
      { name: "mcp__x__closed", description: "closed", parameters: closed },
      { name: "mcp__x__open", description: "open", parameters: open },
    ]);
    expect(a).toMatchObject({ name: "mcp__x__closed", strict: true });
    expect(b).toMatchObject({ name: "mcp__x__open", strict: false });
  });
});
