/**
 * DNS-rebinding protection of `/mcp`: a server bound to loopback answers only requests addressed to a loopback
 * name, and browser requests only from a loopback origin; the environment widens or turns off either check.
 */
import { request } from "node:http";
import { localhostAllowedHostnames, localhostAllowedOrigins } from "@modelcontextprotocol/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePublicUrl } from "../../src/core/config.js";
import { isLoopbackHost, LOOPBACK_HOSTNAMES, mcpHostPolicy } from "../../src/mcp/server/host-check.js";
import { createServerApp } from "../../src/server/app.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

/** POSTs an MCP initialize to /mcp with exactly these Host/Origin headers (node:http sends Host as given). */
function post(
  headers: Record<string, string>,
  method = "POST",
  path = "/mcp",
): Promise<{ status: number; body: string }> {
  const url = new URL(`${server.server.url}/mcp`);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method,
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
      method !== "POST"
        ? undefined
        : JSON.stringify({
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

describe("URLs the server hands out never come from an unchecked Host header", () => {
  it("the protected-resource metadata names an accepted Host's origin; a forged Host gets the /mcp check's 403", async () => {
    const port = new URL(server.server.url).port;
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
      const own = await post({ host: `localhost:${port}` }, "GET", path);
      expect(own.status).toBe(200);
      expect(JSON.parse(own.body).resource).toBe(`http://localhost:${port}/mcp`);
      const forged = await post({ host: `attacker.example:${port}` }, "GET", path);
      expect(forged.status).toBe(403);
      expect(forged.body).toMatch(/TOOLHOST_MCP_ALLOWED_HOSTS/);
      expect(forged.body).not.toMatch(/"resource"/);
    }
    // The 401 challenge of /mcp points at metadata on an accepted name only (the Host check runs first).
    const unauthenticated = await post({ host: `attacker.example:${port}`, authorization: "Bearer nope" });
    expect(unauthenticated.status).toBe(403);
  });

  it("with a configured public URL, the metadata and the 401 challenge name it whatever the Host", async () => {
    const app = createServerApp(server.ctx, { publicUrl: "https://tools.example.com/" });
    const metadata = await app.request("http://attacker.example/.well-known/oauth-protected-resource/mcp");
    expect(metadata.status).toBe(200);
    expect(((await metadata.json()) as { resource: string }).resource).toBe("https://tools.example.com/mcp");
    const challenge = await app.request("http://localhost/mcp", { method: "POST", headers: { host: "localhost" } });
    expect(challenge.status).toBe(401);
    expect(challenge.headers.get("www-authenticate")).toContain(
      'resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp"',
    );
    expect(parsePublicUrl("https://example.com/prefix/")).toBe("https://example.com/prefix");
    for (const bad of ["tools.example.com", "ftp://x", "https://x/?q=1", "https://u:p@x"])
      expect(() => parsePublicUrl(bad), bad).toThrow(/TOOLHOST_PUBLIC_URL/);
  });
});
