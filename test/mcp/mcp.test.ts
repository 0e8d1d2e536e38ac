import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { BIN, runCli } from "../helpers/cli.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

describe("MCP over stdio (toolhost mcp)", () => {
  it("lists the user's enabled tools and runs them in the bound working directory", async () => {
    const dataDir = tempDir();
    const work = tempDir("toolhost-mcp-work-");
    mkdirSync(join(work, "sub"));
    writeFileSync(join(work, "hello.txt"), "hi\n");
    const env = { TOOLHOST_DATA_DIR: dataDir, TOOLHOST_LOG_LEVEL: "error" };
    expect((await runCli(["settings", "set", "get_current_datetime", "--disable"], env)).code).toBe(0);

    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, "mcp", "--cwd", work],
      env: { ...(process.env as Record<string, string>), ...env },
      stderr: "pipe",
    });
    const client = new Client({ name: "toolhost-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      expect(names).toContain("list_directory");
      expect(names).not.toContain("get_current_datetime");
      expect(tools.find((t) => t.name === "list_directory")?.inputSchema.type).toBe("object");

      const listed = await client.callTool({ name: "list_directory", arguments: { path: "." } });
      expect(listed.isError).toBeFalsy();
      expect(listed.structuredContent).toMatchObject({
        entries: expect.arrayContaining([
          { name: "hello.txt", type: "file" },
          { name: "sub", type: "directory" },
        ]),
      });

      const refused = await client.callTool({ name: "get_current_datetime", arguments: {} });
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toContain("access_denied");

      const invalid = await client.callTool({ name: "list_directory", arguments: { path: 42 } });
      expect(invalid.isError).toBe(true);
      expect(JSON.stringify(invalid.content)).toContain("validation_failed");
    } finally {
      await client.close();
    }
  });
});

describe("MCP over Streamable HTTP (/mcp)", () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it("requires the bearer token and honours the user's settings", async () => {
    server = await startTestServer();
    const unauth = await fetch(`${server.server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(unauth.status).toBe(401);

    await server.api("/api/settings/tools/list_directory", { method: "PUT", json: { enabled: false } });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.server.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
    });
    const client = new Client({ name: "toolhost-http-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toContain("get_current_datetime");
      expect(names).not.toContain("list_directory");
      const result = await client.callTool({ name: "get_current_datetime", arguments: { timezone: "Asia/Kathmandu" } });
      expect(result.structuredContent).toMatchObject({ offset: "+05:45" });
    } finally {
      await client.close();
    }
  });
});
