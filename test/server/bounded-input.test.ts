/**
 * Bounded input: per-route limits checked before parsing, list-setting caps, non-JSON values from library callers.
 * That /api/health stays responsive while maximal hostile bodies arrive is measured in health-latency.test.ts
 * (which runs alone, after the rest of the suite).
 */
import { request } from "node:http";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { parseToolArguments } from "../../src/core/arg-parsing.js";
import { readConfig } from "../../src/core/config.js";
import {
  checkValueLimits,
  SETTINGS_BODY_LIMITS,
  scanJsonText,
  TOOL_ARGUMENT_LIMITS,
} from "../../src/core/json-limits.js";
import { AUDIT_ARGUMENT_BOUNDS, redactBounded } from "../../src/core/redact.js";
import { agentCloseTool } from "../../src/tools/builtin/agent-close.js";
import { agentSendTool } from "../../src/tools/builtin/agent-send.js";
import { agentSpawnTool } from "../../src/tools/builtin/agent-spawn.js";
import { agentWaitTool } from "../../src/tools/builtin/agent-wait.js";
import { memoryRuntime } from "../helpers/runtime.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** An object with `n` keys as JSON text, built without holding the object. */
const manyKeys = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(",")}}`;

describe("JSON limits", () => {
  it("the scan finds each limit without parsing; within limits it accepts", () => {
    expect(scanJsonText(manyKeys(SETTINGS_BODY_LIMITS.maxKeys), SETTINGS_BODY_LIMITS)).toBeUndefined();
    expect(scanJsonText(manyKeys(SETTINGS_BODY_LIMITS.maxKeys + 1), SETTINGS_BODY_LIMITS)?.limit).toBe("maxKeys");
    expect(scanJsonText(`[${"1,".repeat(1000)}1]`, SETTINGS_BODY_LIMITS)?.limit).toBe("maxItems");
    expect(scanJsonText(`${"[".repeat(9)}${"]".repeat(9)}`, SETTINGS_BODY_LIMITS)?.limit).toBe("maxDepth");
    expect(scanJsonText(`{"a":"${"x".repeat(17_000)}"}`, SETTINGS_BODY_LIMITS)?.limit).toBe("maxStringLength");
    // Brackets and commas inside strings are text, not structure.
    expect(scanJsonText(`{"a":"${"[,".repeat(100)}\\""}`, SETTINGS_BODY_LIMITS)).toBeUndefined();
    expect(scanJsonText("x".repeat(SETTINGS_BODY_LIMITS.maxBytes + 1), SETTINGS_BODY_LIMITS)?.limit).toBe("maxBytes");
  });

  it("a number too large for a double is refused, never carried on as null; large finite ones pass", () => {
    for (const text of ['{"a":1e400}', '{"a":-1E+309}', `{"a":${"9".repeat(400)}}`, '[1,2,{"b":[3e999]}]']) {
      expect(scanJsonText(text, SETTINGS_BODY_LIMITS)?.limit, text).toBe("finiteNumber");
    }
    for (const text of ['{"a":1e308}', '{"a":-2.5e-400}', `{"a":"1e400"}`, `{"a":${"9".repeat(300)}}`, "[0,-1,2.5]"]) {
      expect(scanJsonText(text, SETTINGS_BODY_LIMITS), text).toBeUndefined();
    }
    // Tool arguments: a validation error naming the number, before any tool sees a null.
    expect(() => parseToolArguments({ type: "object" }, '{"params":[1e400]}')).toThrow(/1e400 is too large/);
  });

  it("half a character (a lone surrogate) in any argument or body string is refused, never stored as U+FFFD", async () => {
    const schema = { type: "object" } as const;
    // As JSON text (escaped or raw) and as a library caller's value; in a value and in a key.
    for (const raw of ['{"content":"a\\ud800b"}', '{"content":"a\ud800b"}', { content: "a\ud800b" }]) {
      expect(() => parseToolArguments(schema, raw), JSON.stringify(raw)).toThrow(/"content": it contains a lone/);
    }
    expect(() => parseToolArguments(schema, { params: ["ok", "\udc00"] })).toThrow(/"params\[1\]"/);
    expect(() => parseToolArguments(schema, '{"a":{"\\udfff":1}}')).toThrow(/"a \(a key\)"/);
    // A sub-agent's message is stored: a NUL in it (which PostgreSQL refuses) is refused as an argument.
    for (const tool of [agentSpawnTool, agentSendTool]) {
      const refusal = tool.validateArguments?.(
        { template: "general", agentId: "a", targetAgentId: "b", message: "a\0b" },
        {} as never,
      );
      expect(refusal, tool.definition.name).toMatchObject({ code: "validation_failed", details: { rule: "nul_byte" } });
    }
    // So is one in an agent id the tool looks up in the database (a 0x00 error from PostgreSQL otherwise).
    const ids: [typeof agentWaitTool, Record<string, unknown>, string][] = [
      [agentWaitTool, { agentIds: ["ok", "a\0b"] }, "agentIds[1]"],
      [agentCloseTool, { agentId: "a\0b" }, "agentId"],
      [agentSendTool, { agentId: "a", targetAgentId: "a\0b", message: "m" }, "targetAgentId"],
      [agentSpawnTool, { template: "general", message: "m", parentId: "a\0b" }, "parentId"],
    ];
    for (const [tool, args, argument] of ids) {
      expect(tool.validateArguments?.(args, {} as never), tool.definition.name).toMatchObject({
        code: "validation_failed",
        details: { rule: "nul_byte", argument },
      });
    }
    // Pairs are characters: fine.
    expect(parseToolArguments(schema, '{"content":"\\ud83d\\ude00 \u{1F600}"}')).toEqual({
      content: "\u{1F600} \u{1F600}",
    });
    server = await startTestServer();
    const s = server;
    const put = await s.api("/api/settings/tools/read_file", {
      method: "PUT",
      body: '{"parameters":{"deniedPaths":["/tmp/\\ud800x"]}}',
      headers: { "content-type": "application/json" },
    });
    expect(put.status).toBe(400);
    expect(((await put.json()) as { error: { message: string } }).error.message).toMatch(
      /body.parameters.deniedPaths\[0\]/,
    );
    // In a tool's arguments it is the tool's validation_failed outcome, answered 200 like any other argument problem.
    const execute = await s.api("/api/tools/get_current_datetime/execute", {
      method: "POST",
      body: '{"arguments":{"timezone":"UTC\\ud800"}}',
      headers: { "content-type": "application/json" },
    });
    expect(execute.status).toBe(200);
    expect(await execute.json()).toMatchObject({
      ok: false,
      error: { code: "validation_failed", details: { argument: "timezone", rule: "invalid_unicode" } },
    });
  });

  it("values from library callers: limits, and what JSON cannot carry", () => {
    expect(checkValueLimits({ a: [1, "x", { b: null }] }, TOOL_ARGUMENT_LIMITS)).toBeUndefined();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const [value, pattern] of [
      [{ f: () => 1 }, /arguments\.f is a function/],
      [{ s: Symbol("x") }, /arguments\.s is a symbol/],
      [{ n: 10n }, /arguments\.n is a BigInt/],
      [{ n: Number.NaN }, /NaN/],
      [{ list: [undefined] }, /arguments\.list\[0\] is undefined/],
      [cyclic, /cycle/],
    ] as const) {
      expect(checkValueLimits(value, TOOL_ARGUMENT_LIMITS)).toMatch(pattern);
    }
  });

  it("the audit keeps a bounded, redacted copy of huge arguments (a secret across the cut is still redacted)", async () => {
    const secret = `sk-${"A".repeat(40)}`;
    const huge = {
      content: `key ${secret} ${"x".repeat(AUDIT_ARGUMENT_BOUNDS.maxString - 60)} ${secret} ${"y".repeat(2 * 1024 * 1024)}`,
      list: Array.from({ length: 10_000 }, (_, i) => `item ${i}`),
      ...Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, i])),
    };
    const copy = redactBounded(huge) as Record<string, unknown>;
    const text = JSON.stringify(copy);
    expect(text.length).toBeLessThan(AUDIT_ARGUMENT_BOUNDS.maxTotal + 8 * 1024);
    expect(text).not.toContain("sk-A");
    expect(copy.content).toMatch(/^key \[redacted\] x/);
    expect(copy.content).toMatch(/more characters\]$/);
    expect((copy.list as string[]).at(-1)).toMatch(/^\[\d+ more items\]$/);
    expect(copy["…"]).toMatch(/more keys/);
    // Through the runtime: the call's audit line carries the bounded copy.
    const { runtime, audit } = memoryRuntime();
    await runtime.executeTool("read_file", huge, { userId: "u", workingDirectory: "/tmp" });
    const line = JSON.stringify(audit.events.at(-1));
    expect(line.length).toBeLessThan(AUDIT_ARGUMENT_BOUNDS.maxTotal + 8 * 1024);
  });

  it("a library caller's non-JSON arguments end as validation_failed, never a crash", async () => {
    const { runtime } = memoryRuntime();
    for (const args of [{ path: () => 1 }, { path: Symbol("p") }, { path: 1n }, () => 1, Symbol("x"), 5n]) {
      const outcome = await runtime.executeTool("read_file", args, { userId: "u", workingDirectory: "/tmp" });
      expect(outcome).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    }
  });
});

describe("HTTP bodies", () => {
  it("refuses oversized and overstructured settings bodies with 413 naming the limit, before parsing", async () => {
    server = await startTestServer();
    const put = (body: string) =>
      server!.api("/api/settings/tools/grep", { method: "PUT", body, headers: { "content-type": "application/json" } });
    // 100,000 keys (1.2 MB): over the byte limit and the key limit; the byte limit, checked first, is named.
    const huge = await put(`{"parameters":${manyKeys(100_000)}}`);
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { details: unknown } }).error.details).toMatchObject({
      limit: "maxBytes",
    });
    const wide = await put(`{"parameters":${manyKeys(SETTINGS_BODY_LIMITS.maxKeys + 1)}}`);
    expect(wide.status).toBe(413);
    expect(((await wide.json()) as { error: { message: string } }).error.message).toMatch(/maxKeys/);
    // A number JSON.parse would make Infinity (and JSON then null): 400, not a setting silently reset.
    const overflow = await put('{"parameters":{"maxResults":1e309}}');
    expect(overflow.status).toBe(400);
    expect(((await overflow.json()) as { error: { message: string } }).error.message).toMatch(/1e309 is too large/);
  });

  it("a body answered unread (413 on its declared length, 401) is discarded and the connection kept; a stalled one ends it", async () => {
    server = await startTestServer();
    const port = server.server.port;
    const head = (length: number, bearer: string | undefined) =>
      `PUT /api/settings/tools/grep HTTP/1.1\r\nHost: 127.0.0.1\r\n${bearer ? `Authorization: Bearer ${bearer}\r\n` : ""}Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const health = "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    /**
     * Writes `chunks` on one socket and collects the response heads until `heads` have arrived, or the server closes
     * the socket (then `closed`), or 5 s pass.
     */
    const exchange = (chunks: (string | Buffer)[], heads: number) =>
      new Promise<{ heads: string[]; closed: boolean }>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1");
        let received = "";
        // Each response's status line and headers (the bodies here are short JSON without line breaks).
        const found = () => received.match(/HTTP\/1\.1 \d{3}[\s\S]*?\r\n\r\n/g) ?? [];
        const end = (closed: boolean) => {
          clearTimeout(timer);
          socket.destroy();
          resolve({ heads: found(), closed });
        };
        const timer = setTimeout(() => end(false), 5_000);
        socket.on("error", reject);
        socket.on("data", (d) => {
          received += d.toString("latin1");
          if (found().length >= heads) end(false);
        });
        socket.on("close", () => end(true));
        for (const chunk of chunks) socket.write(chunk);
      });
    const body = (n: number) => Buffer.alloc(n, "x");
    // Three connections at once (the stalled one waits out the server's 1 s idle cap):
    const [whole, anonymous, stalled] = await Promise.all([
      // a 12 MB body on a 64 KiB route, sent whole;
      exchange([head(12_000_000, server.token), body(12_000_000), health], 2),
      // the same without a token;
      exchange([head(100_000, undefined), body(100_000), health], 2),
      // a client that stops sending mid-body.
      exchange([head(12_000_000, server.token), body(10_000)], 2),
    ]);
    // The whole body: its 413, then the next request on the same socket is answered.
    expect(whole.heads[0]).toMatch(/^HTTP\/1\.1 413 /);
    expect(whole.heads[0]).not.toMatch(/^connection: close$/im);
    expect(whole.heads[1]).toMatch(/^HTTP\/1\.1 200 /);
    // Without a token: 401, and the connection still serves the next request.
    expect(anonymous.heads[0]).toMatch(/^HTTP\/1\.1 401 /);
    expect(anonymous.heads[1]).toMatch(/^HTTP\/1\.1 200 /);
    // The stalled one: its 413 comes once it stalls, with Connection: close, and the server ends the socket.
    expect(stalled.heads).toHaveLength(1);
    expect(stalled.heads[0]).toMatch(/^HTTP\/1\.1 413 /);
    expect(stalled.heads[0]).toMatch(/^connection: close$/im);
    expect(stalled.closed).toBe(true);
  });

  it("a body that has not arrived within TOOLHOST_BODY_TIMEOUT_SECONDS ends the request: 408 request_timeout, connection closed", async () => {
    // Read when the server's app is built: a short deadline for this server only (the default is 30 s).
    process.env.TOOLHOST_BODY_TIMEOUT_SECONDS = "0.3";
    process.env.TOOLHOST_HEADERS_TIMEOUT_SECONDS = "0.3";
    server = await startTestServer();
    const port = server.server.port;
    const head = (method: string, path: string, framing: string) =>
      `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${server?.token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n${framing}\r\n\r\n`;
    /** Sends a head and part of a body, then nothing more; resolves with what arrived once the server closed. */
    const stall = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1");
        let received = "";
        socket.on("error", reject);
        socket.on("data", (d) => {
          received += d.toString("latin1");
        });
        socket.on("close", () => resolve(received));
        socket.write(request);
      });
    const answers = await Promise.all([
      // a declared length, half sent (readJsonBody waits on it);
      stall(`${head("PUT", "/api/settings/tools/grep", "Content-Length: 100")}{"parameters":`),
      // a chunked body whose last chunk never comes (the body limit's counting reader waits on it);
      stall(`${head("POST", "/api/tools/glob/execute", "Transfer-Encoding: chunked")}5\r\n{"arg\r\n`),
      // the MCP endpoint (the SDK's transport reads the body).
      stall(`${head("POST", "/mcp", "Content-Length: 80")}{"jsonrpc":"2.0",`),
    ]);
    for (const answer of answers) {
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(answer).toMatch(/^connection: close$/im);
      expect(answer).toContain('"code":"request_timeout"');
      expect(answer).toContain("TOOLHOST_BODY_TIMEOUT_SECONDS");
    }
    // Headers that never end: Node's own 408 once TOOLHOST_HEADERS_TIMEOUT_SECONDS pass (checked often enough).
    expect(await stall(`GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `)).toMatch(/^HTTP\/1\.1 408 /);
    // A body that arrives in time is served as usual.
    const ok = await server.api("/api/settings/tools/grep", { method: "PUT", json: { parameters: {} } });
    expect(ok.status).toBe(200);
    expect(() => readConfig({ TOOLHOST_BODY_TIMEOUT_SECONDS: "0" })).toThrow(/TOOLHOST_BODY_TIMEOUT_SECONDS/);
    expect(readConfig({}).bodyTimeoutMs).toBe(30_000);
    expect(() => readConfig({ TOOLHOST_HEADERS_TIMEOUT_SECONDS: "never" })).toThrow(/TOOLHOST_HEADERS_TIMEOUT_SECONDS/);
  });

  it("the server-wide body cap (TOOLHOST_MAX_BODY_BYTES) refuses a body over it, declared or chunked; a chunked body within it is read", async () => {
    // Read when the server's app is built: set for this server only.
    process.env.TOOLHOST_MAX_BODY_BYTES = "2000";
    try {
      server = await startTestServer();
    } finally {
      delete process.env.TOOLHOST_MAX_BODY_BYTES;
    }
    /** PUTs `chunks` with node's HTTP client: chunked transfer encoding unless `length` is declared. */
    const send = (chunks: string[], length?: number) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          `${server!.server.url}/api/settings/tools/grep`,
          {
            method: "PUT",
            headers: {
              authorization: `Bearer ${server!.token}`,
              "content-type": "application/json",
              ...(length === undefined ? {} : { "content-length": String(length) }),
            },
          },
          (res) => {
            let body = "";
            res.setEncoding("utf8").on("data", (d: string) => (body += d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on("error", reject);
        for (const chunk of chunks) req.write(chunk);
        req.end();
      });
    const big = `{"parameters":{"deniedPaths":["/${"x".repeat(3000)}"]}}`;
    for (const sent of [await send([big], big.length), await send([big.slice(0, 1500), big.slice(1500)])]) {
      expect(sent.status).toBe(413);
      expect(sent.body).toMatch(/exceeds 2000 bytes \(TOOLHOST_MAX_BODY_BYTES\)/);
    }
    const small = JSON.stringify({ parameters: { deniedPaths: ["/chunked"] } });
    const read = await send([small.slice(0, 10), small.slice(10)]);
    expect(read.status).toBe(200);
    expect((await server.ctx.settings.get("local", "grep")).parameters.deniedPaths).toEqual(["/chunked"]);
  });

  it("keeps an idle connection longer than clients do (65 s), so a loaded server never resets one a request came on", async () => {
    server = await startTestServer();
    const res = await server.api("/api/health");
    expect(res.headers.get("keep-alive")).toBe("timeout=65");
    await res.text();
  });

  it("caps list settings: entries and entry length, 422 naming the cap", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    const put = (deniedPaths: string[]) =>
      server!.api("/api/settings/tools/grep", {
        method: "PUT",
        token: eve.token,
        json: { parameters: { deniedPaths } },
      });
    const many = await put(Array.from({ length: 101 }, (_, i) => `/d${i}`));
    expect(many.status).toBe(422);
    expect(((await many.json()) as { error: { message: string } }).error.message).toMatch(
      /list length must be at most 100/,
    );
    const long = await put([`/${"x".repeat(1100)}`]);
    expect(long.status).toBe(422);
    expect(((await long.json()) as { error: { message: string } }).error.message).toMatch(
      /at most 1024 characters \(maxLength\)/,
    );
    expect((await put(["/a", "/b"])).status).toBe(200);
    const descriptor = (await server.ctx.settings.get("eve", "grep")).parameterDescriptors.find(
      (d) => d.name === "deniedPaths",
    );
    expect(descriptor).toMatchObject({ max: 100, maxLength: 1024 });
  });
});
