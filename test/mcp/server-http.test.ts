/**
 * Toolhost's MCP server over Streamable HTTP, driven by the official SDK clients of both lines (v2 in both protocol
 * eras, v1) and by raw JSON-RPC where a test needs a precise wire exchange (cancellation on a second request).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { Client as V1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as V1HttpTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

type Mode = "legacy" | { pin: "2026-07-28" };

function v2Client(s: TestServer, mode: Mode, headers: Record<string, string> = {}) {
  const client = new Client({ name: "toolhost-test", version: "1.0.0" }, { versionNegotiation: { mode } });
  const transport = new StreamableHTTPClientTransport(new URL(`${s.server.url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${s.token}`, ...headers } },
  });
  return { client, transport };
}

/** Polls until `check` holds, failing after `ms` (the bound for a killed process to disappear). */
async function eventually(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  await until(check, what, { timeoutMs: ms, intervalMs: 25 });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startWithWork() {
  const work = tempDir("toolhost-mcp-http-");
  writeFileSync(join(work, "notes.txt"), "first line\nsecond line\n");
  mkdirSync(join(work, "sub"));
  server = await startTestServer();
  return { s: server, work };
}

describe("MCP over Streamable HTTP", () => {
  for (const mode of ["legacy", { pin: "2026-07-28" }] as Mode[]) {
    const era = mode === "legacy" ? "2025 era" : "2026-07-28";
    it(`lists tools with titles and annotations, binds the directory header, reads a file, refuses a path (${era})`, async () => {
      const { s, work } = await startWithWork();
      const { client, transport } = v2Client(s, mode, { "Toolhost-Working-Directory": work });
      await client.connect(transport);
      try {
        expect(client.getProtocolEra()).toBe(mode === "legacy" ? "legacy" : "modern");
        expect(client.getInstructions()).toContain(`The working directory of this connection is`);
        expect(client.getInstructions()).toContain("Toolhost-Working-Directory");
        const { tools } = await client.listTools();
        const readFile = tools.find((t) => t.name === "read_file");
        expect(readFile?.title).toBe("Read file");
        expect(readFile?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
        expect(tools.find((t) => t.name === "write_file")?.annotations).toMatchObject({
          readOnlyHint: false,
          destructiveHint: true,
          idempotentHint: true,
        });
        expect(tools.find((t) => t.name === "list_directory")?.outputSchema?.required).toContain("entries");

        const read = await client.callTool({ name: "read_file", arguments: { path: "notes.txt" } });
        expect(read.isError).toBeFalsy();
        expect(JSON.stringify(read.content)).toContain("second line");

        const listed = await client.callTool({ name: "list_directory", arguments: { path: "." } });
        expect(listed.structuredContent).toMatchObject({
          entries: expect.arrayContaining([{ name: "sub", type: "directory" }]),
        });

        // Toolhost's own data directory is protected whatever the settings say.
        const refused = await client.callTool({
          name: "read_file",
          arguments: { path: join(s.dataDir, "toolhost.db") },
        });
        expect(refused.isError).toBe(true);
        expect(JSON.stringify(refused.content)).toContain("access_denied");
      } finally {
        await client.close();
      }
    });
  }

  it("serves the v1 SDK client too, and refuses a working directory outside what the user may bind", async () => {
    const { s, work } = await startWithWork();
    const client = new V1Client({ name: "v1", version: "1.0.0" });
    await client.connect(
      new V1HttpTransport(new URL(`${s.server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${s.token}`, "Toolhost-Working-Directory": work } },
      }),
    );
    try {
      const read = await client.callTool({ name: "read_file", arguments: { path: "notes.txt" } });
      expect(JSON.stringify(read.content)).toContain("first line");
    } finally {
      await client.close();
    }
    const missing = await s.api("/mcp", {
      method: "POST",
      headers: {
        accept: "application/json, text/event-stream",
        "Toolhost-Working-Directory": join(work, "does-not-exist"),
      },
      json: { jsonrpc: "2.0", id: 1, method: "tools/list" },
    });
    expect(missing.status).toBe(400);
  });

  /** A raw JSON-RPC initialize POSTed to /mcp (started server), with the given revision and client info. */
  const initialize = (protocolVersion: string, clientInfo: Record<string, string>) =>
    server!.api("/mcp", {
      method: "POST",
      headers: { accept: "application/json, text/event-stream" },
      json: { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion, capabilities: {}, clientInfo } },
    });

  it("answers an initialize for a newer, unknown revision with the newest one it supports", async () => {
    server = await startTestServer();
    const response = await initialize("2099-01-01", { name: "future", version: "1" });
    expect(response.status).toBe(200);
    const text = await response.text();
    const body = text.trim().startsWith("{") ? text : (/^data: (.*)$/m.exec(text)?.[1] ?? "");
    expect(JSON.parse(body)).toMatchObject({ id: 1, result: { protocolVersion: "2025-11-25" } });
  });

  it("reads a body up to TOOLHOST_MAX_BODY_BYTES, one limit on every route (the SDK's own stopped at 4 MiB)", async () => {
    server = await startTestServer();
    // 5 MiB: under the server's limit (16 MiB by default), over the SDK's. The initialize carries it as client info.
    const response = await initialize("2025-11-25", { name: "big", version: "1", description: "x".repeat(5 << 20) });
    expect(response.status).toBe(200);
    await response.text();
  });

  it("answers GET and DELETE with 405 and serves the protected-resource metadata", async () => {
    server = await startTestServer();
    const get = await server.api("/mcp", { headers: { accept: "text/event-stream" } });
    expect(get.status).toBe(405);
    const del = await server.api("/mcp", { method: "DELETE" });
    expect(del.status).toBe(405);

    const unauth = await fetch(`${server.server.url}/mcp`, { method: "POST" });
    expect(unauth.status).toBe(401);
    expect(unauth.headers.get("www-authenticate")).toContain(
      `resource_metadata="${server.server.url}/.well-known/oauth-protected-resource/mcp"`,
    );
    const metadata = await fetch(`${server.server.url}/.well-known/oauth-protected-resource/mcp`);
    expect(metadata.status).toBe(200);
    expect(await metadata.json()).toMatchObject({
      resource: `${server.server.url}/mcp`,
      bearer_methods_supported: ["header"],
    });
  });

  it("a settings change reaches a 2026-07-28 client as notifications/tools/list_changed", async () => {
    server = await startTestServer();
    const { client, transport } = v2Client(server, { pin: "2026-07-28" });
    await client.connect(transport);
    try {
      let changed = 0;
      client.setNotificationHandler("notifications/tools/list_changed", () => {
        changed += 1;
      });
      const subscription = await client.listen({ toolsListChanged: true });
      expect(subscription.honoredFilter.toolsListChanged).toBe(true);
      const put = await server.api("/api/settings/tools/list_directory", { method: "PUT", json: { enabled: false } });
      expect(put.status).toBe(200);
      await eventually(() => changed > 0, 5000, "list_changed after a settings change");
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).not.toContain("list_directory");
      await subscription.close();
    } finally {
      await client.close();
    }
  });
});

describe("cancelling a long shell call over HTTP", () => {
  async function startShell() {
    const { s, work } = await startWithWork();
    // The command reports its host pid, so it runs outside the shell sandbox (whose PID namespace renumbers it);
    // shell tools ask before each command by default, and this user allows them.
    const put = await s.api("/api/settings/tools/bash", {
      method: "PUT",
      json: { enabled: true, parameters: { sandbox: "off", approval: "allow" } },
    });
    expect(put.status).toBe(200);
    return { s, work };
  }

  async function pidOf(work: string): Promise<number> {
    const file = join(work, "pid");
    await eventually(() => existsSync(file) && readFileSync(file, "utf8").trim() !== "", 20_000, "the shell to start");
    return Number(readFileSync(file, "utf8").trim());
  }

  async function expectAbortedAudit(s: TestServer): Promise<void> {
    await eventually(
      async () => (await s.ctx.audit.list({ limit: 5 })).some((e) => e.tool === "bash" && e.termination === "aborted"),
      5000,
      "an aborted audit entry",
    );
  }

  // `tee` writes the pid file (under approval: allow a redirection would run as well).
  const command = "echo $$ | tee pid >/dev/null; exec sleep 30";
  /** POSTs a raw tools/call of bash running `command` in `work` (with `init`'s token or signal). */
  const callShell = (s: TestServer, work: string, init: { token?: string; signal?: AbortSignal } = {}) =>
    s.api("/mcp", {
      method: "POST",
      ...init,
      headers: { accept: "application/json, text/event-stream", "Toolhost-Working-Directory": work },
      json: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "bash", arguments: { command } } },
    });

  it("a 2025-era notifications/cancelled on a second request aborts the call (stateless server)", async () => {
    const { s, work } = await startShell();
    const headers = { accept: "application/json, text/event-stream", "Toolhost-Working-Directory": work };
    const call = s.api("/mcp", {
      method: "POST",
      headers,
      json: {
        jsonrpc: "2.0",
        id: 41,
        method: "tools/call",
        params: { name: "bash", arguments: { command } },
      },
    });
    const pid = await pidOf(work);
    expect(alive(pid)).toBe(true);
    const cancel = await s.api("/mcp", {
      method: "POST",
      headers,
      json: { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 41, reason: "user stop" } },
    });
    expect(cancel.status).toBe(202);
    await eventually(() => !alive(pid), 2000, "the shell process to be gone");
    await expectAbortedAudit(s);
    // The cancelled request gets no response: its stream ends without one (clients log "unknown message ID").
    const stream = await call.then((r) => r.text()).catch(() => "");
    expect(stream).not.toMatch(/"id":41/);
  });

  it("another token's cancellation with the same request id does not touch the call", async () => {
    const { s, work } = await startShell();
    const { token: other } = await s.ctx.tokens.create("local", "second client");
    const headers = { accept: "application/json, text/event-stream", "Toolhost-Working-Directory": work };
    const call = s.api("/mcp", {
      method: "POST",
      headers,
      json: { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "bash", arguments: { command } } },
    });
    const pid = await pidOf(work);
    await s.api("/mcp", {
      method: "POST",
      headers,
      token: other,
      json: { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } },
    });
    // The endpoint still tracks the call: it was not aborted by the other client's notification.
    expect(alive(pid)).toBe(true);
    await s.api("/mcp", {
      method: "POST",
      headers,
      json: { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } },
    });
    await eventually(() => !alive(pid), 2000, "the shell process to be gone");
    await call.then((r) => r.text()).catch(() => "");
  });

  it("two running calls of one token with the same request id: a cancellation of that id reaches both", async () => {
    // Two clients sharing a token each number their requests from the start: neither call may be left where no
    // cancellation reaches it (the second used to replace the first in the tracking, which then ran on untracked).
    const { s, work } = await startShell();
    const headers = { accept: "application/json, text/event-stream", "Toolhost-Working-Directory": work };
    const pids: number[] = [];
    const calls: Promise<unknown>[] = [];
    for (const file of ["pidA", "pidB"]) {
      const run = `echo $$ | tee ${file} >/dev/null; exec sleep 30`;
      calls.push(
        s
          .api("/mcp", {
            method: "POST",
            headers,
            json: {
              jsonrpc: "2.0",
              id: 9,
              method: "tools/call",
              params: { name: "bash", arguments: { command: run } },
            },
          })
          .then((r) => r.text())
          .catch(() => ""),
      );
      const path = join(work, file);
      await eventually(() => existsSync(path) && readFileSync(path, "utf8").trim() !== "", 20_000, `${file}`);
      pids.push(Number(readFileSync(path, "utf8").trim()));
    }
    const cancel = await s.api("/mcp", {
      method: "POST",
      headers,
      json: { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 9 } },
    });
    expect(cancel.status).toBe(202);
    for (const pid of pids) await eventually(() => !alive(pid), 5000, `process ${pid} to be gone`);
    await Promise.all(calls);
  });

  for (const mode of ["legacy", { pin: "2026-07-28" }] as Mode[]) {
    it(`an SDK client's abort stops the shell (${mode === "legacy" ? "2025 era" : "2026-07-28"})`, async () => {
      const { s, work } = await startShell();
      const { client, transport } = v2Client(s, mode, { "Toolhost-Working-Directory": work });
      await client.connect(transport);
      try {
        const controller = new AbortController();
        const call = client
          .callTool({ name: "bash", arguments: { command } }, { signal: controller.signal })
          .catch((e: unknown) => e);
        const pid = await pidOf(work);
        controller.abort("stop");
        await call;
        await eventually(() => !alive(pid), 2000, "the shell process to be gone");
        await expectAbortedAudit(s);
      } finally {
        await client.close();
      }
    });
  }

  it("revoking the token a call runs under stops the call and ends its response, as for a chat turn", async () => {
    const { s, work } = await startShell();
    const issued = await s.ctx.tokens.create("local", "to revoke");
    const call = callShell(s, work, { token: issued.token }).then((r) => r.text());
    const pid = await pidOf(work);
    await s.ctx.tokens.revoke(issued.id);
    await eventually(() => !alive(pid), 5000, "the shell process to be gone");
    await expectAbortedAudit(s);
    // The response ends (no result of the call that was stopped).
    expect(await call).not.toMatch(/"result"/);
  });

  it("a dropped connection stops the shell", async () => {
    const { s, work } = await startShell();
    const controller = new AbortController();
    const call = callShell(s, work, { signal: controller.signal }).catch((e: unknown) => e);
    const pid = await pidOf(work);
    controller.abort();
    await call;
    await eventually(() => !alive(pid), 2000, "the shell process to be gone");
    await expectAbortedAudit(s);
  });
});

describe("protocol edges over HTTP", () => {
  it("a refused working-directory header, invalid params and tools that cannot work for the caller", async () => {
    const { s, work } = await startWithWork();
    const mallory = (await s.ctx.tokens.create("mallory")).token;
    const post = (token: string, body: unknown, headers: Record<string, string> = {}) =>
      s.api("/mcp", {
        method: "POST",
        token,
        headers: { accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18", ...headers },
        json: body,
      });
    /** The JSON-RPC message of an answer, whether sent as JSON or as one SSE event. */
    const message = async (res: Response) => {
      const text = await res.text();
      return JSON.parse(text.startsWith("{") ? text : (/^data: (.*)$/m.exec(text)?.[1] ?? "null"));
    };
    // A non-admin binding a directory outside the chat roots (none configured): a JSON-RPC error naming the header.
    const refused = await post(
      mallory,
      { jsonrpc: "2.0", id: 1, method: "tools/list" },
      {
        "Toolhost-Working-Directory": work,
      },
    );
    expect(refused.status).toBe(403);
    const error = await message(refused);
    expect(error).toMatchObject({
      jsonrpc: "2.0",
      // The request's own id, so the client can match the answer to it.
      id: 1,
      error: { code: -32000, data: { header: "Toolhost-Working-Directory" } },
    });
    expect(error.error.message).toMatch(/^Toolhost-Working-Directory refused \(access_denied\)/);
    // Invalid params: -32602 on every method, in words, not raw validator output.
    for (const [method, params] of [
      ["tools/list", { cursor: 5 }],
      ["tools/call", { name: 5 }],
    ] as const) {
      const reply = await message(await post(s.token, { jsonrpc: "2.0", id: 2, method, params }));
      expect(reply.error.code, method).toBe(-32602);
      expect(reply.error.message).toMatch(new RegExp(`^Invalid params for ${method}: params\\.`));
      expect(reply.error.message).not.toContain('"expected"');
    }
    // JSON-RPC batches left the protocol in 2025-06-18: a batch under that revision (or a later one) is refused as
    // on stdio, not served; a 2025-03-26 client (which may batch) still is.
    const batch = [
      { jsonrpc: "2.0", id: 11, method: "ping" },
      { jsonrpc: "2.0", id: 12, method: "tools/list" },
    ];
    const refusedBatch = await post(s.token, batch);
    expect(refusedBatch.status).toBe(400);
    expect(await message(refusedBatch)).toMatchObject({
      id: null,
      error: { code: -32600, message: expect.stringMatching(/batches.*2025-06-18.*one message per request/) },
    });
    const oldBatch = await post(s.token, batch, { "mcp-protocol-version": "2025-03-26" });
    expect(oldBatch.status).toBe(200);
    expect(await oldBatch.text()).toContain('"id":12');
    // The whole list is one page (no nextCursor), so any cursor is one this server never issued: -32602, as the
    // protocol's pagination asks for an invalid cursor, not the first page again (a client would loop on it).
    const forged = await message(
      await post(s.token, { jsonrpc: "2.0", id: 5, method: "tools/list", params: { cursor: "page-2" } }),
    );
    expect(forged).toMatchObject({ id: 5, error: { code: -32602 } });
    expect(forged.error.message).toMatch(/^Invalid params for tools\/list: params\.cursor: .*without a cursor/);
    const firstPage = await message(await post(s.token, { jsonrpc: "2.0", id: 6, method: "tools/list" }));
    expect(firstPage.result.nextCursor).toBeUndefined();
    // A "__proto__" key in a tool's arguments is refused as on stdio (the SDK's copy would make it a prototype).
    const proto = await message(
      await post(s.token, {
        jsonrpc: "2.0",
        id: 4,
        method: "tools/call",
        params: { name: "read_file", arguments: JSON.parse('{"path":"a.txt","__proto__":{"startLine":40}}') },
      }),
    );
    expect(proto).toMatchObject({ id: 4, error: { code: -32602 } });
    expect(proto.error.message).toMatch(/arguments\.__proto__: a "__proto__" key cannot be a tool argument/);
    // The sub-agent tools need a chat turn's calling agent: not offered over MCP.
    const list = await message(await post(s.token, { jsonrpc: "2.0", id: 3, method: "tools/list" }));
    const names = (list.result.tools as { name: string }[]).map((t) => t.name);
    expect(names).toContain("read_file");
    expect(names.filter((n) => n.startsWith("agent_"))).toEqual([]);
  });
});

describe("MCP over Streamable HTTP: approval asks through elicitation", () => {
  it("a 2026-07-28 client that declares elicitation is asked (input_required), and its answer runs the call once", async () => {
    const { s } = await startWithWork();
    const put = await s.api("/api/settings/tools/get_current_datetime", {
      method: "PUT",
      json: { parameters: { approval: "ask" } },
    });
    expect(put.status).toBe(200);
    const client = new Client(
      { name: "asking-http-client", version: "1.0.0" },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    const forms: string[] = [];
    let answer = "allow_once";
    client.setRequestHandler("elicitation/create", async (request) => {
      forms.push((request.params as unknown as { message: string }).message);
      return { action: "accept", content: { decision: answer, message: "not now" } };
    });
    const transport = new StreamableHTTPClientTransport(new URL(`${s.server.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${s.token}` } },
    });
    await client.connect(transport);
    try {
      const allowed = await client.callTool({ name: "get_current_datetime", arguments: { timezone: "UTC" } });
      expect(allowed.isError, JSON.stringify(allowed)).toBeFalsy();
      expect(allowed.structuredContent).toMatchObject({ timezone: "UTC" });
      expect(forms[0]).toContain("get_current_datetime");
      answer = "deny";
      const denied = await client.callTool({ name: "get_current_datetime", arguments: {} });
      expect(denied.isError).toBe(true);
      expect(JSON.stringify(denied.content)).toContain("denied_by_user");
      expect(forms).toHaveLength(2);
      const used = await s.ctx.audit.list({ limit: 10 });
      expect(used.filter((e) => e.tool === "get_current_datetime" && e.outcome === "ok")).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it("a 2025-era client that declared elicitation is refused saying why it cannot be asked over HTTP", async () => {
    const { s } = await startWithWork();
    await s.api("/api/settings/tools/get_current_datetime", {
      method: "PUT",
      json: { parameters: { approval: "ask" } },
    });
    const client = new Client(
      { name: "legacy-asking-client", version: "1.0.0" },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: "legacy" } },
    );
    client.setRequestHandler("elicitation/create", async () => ({
      action: "accept",
      content: { decision: "allow_once" },
    }));
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${s.server.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${s.token}` } },
      }),
    );
    try {
      const refused = await client.callTool({ name: "get_current_datetime", arguments: {} });
      expect(refused.isError).toBe(true);
      const error = JSON.parse((refused.content as { text: string }[])[0]!.text).error;
      expect(error.code).toBe("denied_by_policy");
      // It did declare elicitation: the refusal must not say it did not, but what would let it be asked.
      expect(error.message).not.toContain("did not declare");
      expect(error.message).toMatch(/2025.*over HTTP.*2026-07-28.*stdio/);
    } finally {
      await client.close();
    }
  });
});
