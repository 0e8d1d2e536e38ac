/**
 * DNS-rebinding protection of `/mcp`: a server bound to loopback answers only requests addressed to a loopback
 * name, and browser requests only from a loopback origin; the environment widens or turns off either check.
 */
import { request } from "node:http";
import { localhostAllowedHostnames, localhostAllowedOrigins } from "@modelcontextprotocol/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isLoopbackHost, LOOPBACK_HOSTNAMES, mcpHostPolicy } from "../../src/mcp/server/host-check.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

/** POSTs an MCP initialize to /mcp with exactly these Host/Origin headers (node:http sends Host as given). */
function post(headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const url = new URL(`${server.server.url}/mcp`);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: "/mcp",
        method: "POST",
        headers: {
          authorization: `Bearer ${server.token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
      }),
    );
  });
}

describe("/mcp Host and Origin check", () => {
  it("accepts loopback names and refuses a rebound name or a foreign origin with 403 saying how to allow it", async () => {
    const port = new URL(server.server.url).port;
    expect((await post({ host: `127.0.0.1:${port}` })).status).toBe(200);
    expect((await post({ host: `localhost:${port}`, origin: `http://localhost:${port}` })).status).toBe(200);
    const rebound = await post({ host: `attacker.example:${port}` });
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body)).toMatchObject({
      jsonrpc: "2.0",
      error: { code: -32000, message: expect.stringMatching(/attacker\.example.*TOOLHOST_MCP_ALLOWED_HOSTS/) },
    });
    const foreign = await post({ host: `127.0.0.1:${port}`, origin: "https://attacker.example" });
    expect(foreign.status).toBe(403);
    expect(foreign.body).toMatch(/TOOLHOST_MCP_ALLOWED_ORIGINS/);
  });

  it("defaults follow the binding; the environment replaces them, * turns a check off", () => {
    expect(isLoopbackHost("127.0.0.1") && isLoopbackHost("::1") && isLoopbackHost("localhost")).toBe(true);
    expect(isLoopbackHost("0.0.0.0")).toBe(false);
    expect(mcpHostPolicy("127.0.0.2", {}).allowedHosts).toEqual(["localhost", "127.0.0.1", "[::1]", "127.0.0.2"]);
    expect(mcpHostPolicy("::1", {}).allowedOrigins).toContain("[::1]");
    expect(mcpHostPolicy("0.0.0.0", {})).toEqual({ allowedHosts: null, allowedOrigins: null });
    // The default loopback names are the SDK's own lists (kept as a constant so the service starts without the SDK).
    expect(LOOPBACK_HOSTNAMES).toEqual(localhostAllowedHostnames());
    expect(LOOPBACK_HOSTNAMES).toEqual(localhostAllowedOrigins());
    expect(
      mcpHostPolicy("0.0.0.0", {
        TOOLHOST_MCP_ALLOWED_HOSTS: "tools.example, LOCALHOST",
        TOOLHOST_MCP_ALLOWED_ORIGINS: "*",
      }),
    ).toEqual({ allowedHosts: ["tools.example", "localhost"], allowedOrigins: null });
  });
});
