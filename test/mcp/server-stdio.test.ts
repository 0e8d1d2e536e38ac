/**
 * Toolhost's MCP server on stdio (`toolhost mcp`): JSON-RPC errors for malformed input, protocol version
 * negotiation, change notifications for settings changed by another process, and both SDK eras.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { PassThrough } from "node:stream";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CheckedStdioServerTransport,
  checkJsonRpcLine,
  serveMcpStdio,
  tidyOutgoing,
} from "../../src/mcp/server/stdio.js";
// `toolhost mcp` runs as a process (stdio is the subject); the settings changes made "by another process" run
// main(argv) in this test's process, which is not the server's.
import { BIN, runCliInProcess as runCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";

function env(dataDir: string): Record<string, string> {
  return { ...(process.env as Record<string, string>), TOOLHOST_DATA_DIR: dataDir, TOOLHOST_LOG_LEVEL: "error" };
}

/** A raw `toolhost mcp` child with a line reader over its stdout. */
function rawServer(dataDir: string, cwd: string, extra: string[] = []) {
  const child = spawn(process.execPath, [BIN, "mcp", "--cwd", cwd, ...extra], { env: env(dataDir) });
  const lines = createInterface({ input: child.stdout });
  const queue: unknown[] = [];
  const waiters: ((v: unknown) => void)[] = [];
  lines.on("line", (line) => {
    const message = JSON.parse(line);
    const waiter = waiters.shift();
    if (waiter) waiter(message);
    else queue.push(message);
  });
  return {
    child: child as ChildProcessWithoutNullStreams,
    send(line: string) {
      child.stdin.write(`${line}\n`);
    },
    next(): Promise<Record<string, any>> {
      const queued = queue.shift();
      if (queued !== undefined) return Promise.resolve(queued as Record<string, any>);
      return new Promise((resolve) => waiters.push(resolve as (v: unknown) => void));
    },
  };
}

describe("MCP over stdio: malformed requests", () => {
  it("answers each malformed line with the right JSON-RPC error and every request with an id", async () => {
    const dataDir = tempDir();
    const work = tempDir("toolhost-mcp-stdio-");
    // For the call at the end: a tool the policy asks about, called by a client that cannot be asked.
    expect((await runCli(["settings", "set", "get_current_datetime", "approval=ask"], env(dataDir))).code).toBe(0);
    const server = rawServer(dataDir, work);
    try {
      // A client pinned to a revision newer than the server knows gets the newest the server supports.
      server.send(
        JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2099-01-01", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
        }),
      );
      const init = await server.next();
      expect(init.id).toBe(1);
      expect(init.result.protocolVersion).toBe("2025-11-25");
      expect(init.result.capabilities.tools.listChanged).toBe(true);
      expect(init.result.instructions).toContain(work);
      server.send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));

      const cases: [string, number, string | number | null][] = [
        ["this is not json", -32700, null],
        ['{"jsonrpc":"2.0","id":2}', -32600, 2],
        ['{"id":3,"method":"tools/list"}', -32600, 3],
        ["[1,2]", -32600, null],
        ["42", -32600, null],
        ['{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, null],
        ['{"jsonrpc":"2.0","id":4,"method":"tools/list","params":"x"}', -32602, 4],
        ['{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}', -32602, 5],
        ['{"jsonrpc":"2.0","id":6,"method":"tools/call"}', -32602, 6],
        ['{"jsonrpc":"2.0","id":7,"method":"no/such/method"}', -32601, 7],
        ['{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}', -32602, 8],
        // A `_meta` the SDK's schema refuses: its transport dropped the request without an answer.
        ['{"jsonrpc":"2.0","id":21,"method":"tools/list","params":{"_meta":{"progressToken":{}}}}', -32602, 21],
        ['{"jsonrpc":"2.0","id":22,"method":"ping","params":{"_meta":5}}', -32602, 22],
        // Invalid params on a method other than tools/call: -32602 too (the SDK said -32603), readable.
        ['{"jsonrpc":"2.0","id":23,"method":"tools/list","params":{"cursor":5}}', -32602, 23],
        ['{"jsonrpc":"2.0","id":24,"method":"initialize","params":{"protocolVersion":5}}', -32602, 24],
      ];
      for (const [line, code, id] of cases) {
        server.send(line);
        const reply = await server.next();
        expect({ line, code: reply.error?.code, id: reply.id }).toEqual({ line, code, id });
        expect(reply.error.message).not.toContain('"expected"');
      }
      // A "__proto__" key in a tool's arguments: the method's schema would drop it unseen; it is refused by name.
      server.send(
        '{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a","__proto__":{"startLine":40}}}}',
      );
      const proto = await server.next();
      expect(proto).toMatchObject({ id: 25, error: { code: -32602 } });
      expect(proto.error.message).toMatch(/"__proto__" key cannot be a tool argument/);
      // A nested one survives the copy and is refused by the tool's own argument check.
      server.send(
        '{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a","view":{"__proto__":{}}}}}',
      );
      const nested = await server.next();
      expect(nested).toMatchObject({ id: 26, result: { isError: true } });
      expect(JSON.stringify(nested.result.content)).toContain("validation_failed");
      // Still serving after all that.
      server.send('{"jsonrpc":"2.0","id":9,"method":"tools/list"}');
      const list = await server.next();
      expect(list.id).toBe(9);
      const readFile = list.result.tools.find((t: { name: string }) => t.name === "read_file");
      // The sub-agent tools need a chat turn's calling agent: never offered to an MCP client.
      expect(list.result.tools.map((t: { name: string }) => t.name)).not.toContain("agent_spawn");
      expect(readFile.annotations.readOnlyHint).toBe(true);
      // This client declared no elicitation capability: an ask cannot reach its user, so the call is denied, with a
      // message naming the setting (the asking client is in "approval asks through elicitation" below).
      server.send(
        '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"get_current_datetime","arguments":{}}}',
      );
      const refused = await server.next();
      expect(refused.id).toBe(10);
      expect(refused.result.isError).toBe(true);
      expect(JSON.stringify(refused.result.content)).toContain("cannot be asked");
    } finally {
      server.child.kill();
    }
  });

  it("reads a message whose UTF-8 characters are split between chunks intact (unit)", async () => {
    // A pipe delivers 64 KiB chunks wherever they fall: a character's bytes may arrive in two of them.
    const input = new PassThrough();
    const output = new PassThrough();
    const transport = new CheckedStdioServerTransport(input, output);
    const received: unknown[] = [];
    transport.onmessage = (message) => void received.push(message);
    await transport.start();
    const content = "é€😀".repeat(3);
    const bytes = Buffer.from(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { content } })}\n`);
    const at = bytes.indexOf(Buffer.from("€")) + 1;
    input.write(bytes.subarray(0, at));
    input.write(bytes.subarray(at, at + 3));
    input.write(bytes.subarray(at + 3));
    await until(() => received.length === 1, "the message");
    expect(received[0]).toMatchObject({ id: 1, params: { content } });
    await transport.close();
  });

  it("answers a message over the size limit with -32600 and reads the next one (unit)", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    const replies: Record<string, any>[] = [];
    createInterface({ input: output }).on("line", (line) => replies.push(JSON.parse(line)));
    const transport = new CheckedStdioServerTransport(input, output, { maxMessageBytes: 1000 });
    const received: { id?: unknown }[] = [];
    transport.onmessage = (message) => void received.push(message as { id?: unknown });
    await transport.start();
    const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "x", params: { text: "a".repeat(5000) } });
    // In pieces, as a pipe delivers it: what is over the limit is dropped as it arrives, not kept until its end.
    for (let i = 0; i < big.length; i += 700) input.write(big.slice(i, i + 700));
    input.write('\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
    await until(() => received.length === 1 && replies.length === 1, "the refusal and the next message");
    expect(replies[0]).toMatchObject({ id: null, error: { code: -32600 } });
    expect(replies[0]?.error.message).toMatch(/larger than 1000 bytes.*TOOLHOST_MAX_BODY_BYTES/);
    expect(received[0]?.id).toBe(2);
    await transport.close();
  });

  it("refuses a --poll-ms a timer cannot hold (it would poll every millisecond), saying the range", async () => {
    for (const value of ["99999999999", "50", "abc"]) {
      const run = await runCli(["mcp", "--poll-ms", value], env(tempDir()));
      expect(run.code, value).toBe(2);
      expect(run.stderr).toMatch(/--poll-ms must be an integer from 100 to 3600000/);
    }
    expect(() =>
      serveMcpStdio({ runtime: {} as never, userId: "u", pollMs: 99_999_999_999, input: new PassThrough() }),
    ).toThrow(RangeError);
  });

  it("exits 2 on a refused --cwd even with an external MCP server configured (its connection does not keep it running)", async () => {
    const dataDir = tempDir();
    const config = join(dataDir, "config.json");
    // A server that never answers initialize: started, it would hold the process until its connect timeout or longer.
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: { silent: { command: process.execPath, args: ["-e", "setInterval(() => {}, 1000)"] } },
      }),
    );
    const child = spawn(process.execPath, [BIN, "mcp", "--cwd", join(dataDir, "missing")], {
      env: { ...env(dataDir), TOOLHOST_CONFIG: config },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        resolve(null);
      }, 8000);
      child.on("exit", (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(code).toBe(2);
    expect(stderr).toMatch(/--cwd ".*missing" does not exist/);
  });

  it("classifies lines and rewords raw validator output (unit)", () => {
    expect(checkJsonRpcLine('{"jsonrpc":"2.0","id":1,"result":{}}')).toBeUndefined();
    expect(checkJsonRpcLine('{"jsonrpc":"2.0","method":"notifications/initialized"}')).toBeUndefined();
    expect(checkJsonRpcLine('{"jsonrpc":"2.0","method":"x","params":[1]}')).toBeUndefined();
    expect(checkJsonRpcLine('{"jsonrpc":"1.0","id":"a","method":"x"}')?.error.code).toBe(-32600);
    // An id past 2^53 cannot be echoed exactly (JSON.parse rounds it) and the SDK's schema drops such a request
    // unanswered: refused here, with id null.
    expect(checkJsonRpcLine('{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}')?.error).toMatchObject({
      code: -32600,
      message: expect.stringMatching(/safe integer/),
    });
    const tidy = tidyOutgoing({
      jsonrpc: "2.0",
      id: 1,
      error: {
        code: -32602,
        message:
          'Invalid tools/call request: [\n  {\n    "code": "invalid_type",\n    "path": ["params", "name"],\n    "message": "expected string"\n  }\n]',
      },
    }) as { error: { message: string } };
    expect(tidy.error.message).toBe("Invalid tools/call request: params.name: expected string");
  });
});

/** A `toolhost mcp` child behind the SDK's stdio client, its client declaring `capabilities`. */
async function sdkClient(
  dataDir: string,
  work: string,
  options: { mode?: "legacy" | { pin: "2026-07-28" }; capabilities?: Record<string, unknown> } = {},
) {
  const client = new Client(
    { name: "stdio-test", version: "1.0.0" },
    {
      ...(options.mode ? { versionNegotiation: { mode: options.mode } } : {}),
      ...(options.capabilities ? { capabilities: options.capabilities } : {}),
    },
  );
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN, "mcp", "--cwd", work, "--poll-ms", "200"],
      env: env(dataDir),
      stderr: "pipe",
    }),
  );
  return client;
}

/** Lists, reads a file, refuses a path, and sees a settings change made by another process announced. */
async function listsReadsRefusesAnnounces(client: Client, dataDir: string, legacy: boolean) {
  expect(client.getProtocolEra()).toBe(legacy ? "legacy" : "modern");
  const read = await client.callTool({ name: "read_file", arguments: { path: "hello.txt" } });
  expect(JSON.stringify(read.content)).toContain("hello from stdio");
  const refused = await client.callTool({ name: "read_file", arguments: { path: join(dataDir, "toolhost.db") } });
  expect(refused.isError).toBe(true);

  let changed = 0;
  client.setNotificationHandler("notifications/tools/list_changed", () => {
    changed += 1;
  });
  const subscription = legacy ? undefined : await client.listen({ toolsListChanged: true });
  expect((await runCli(["settings", "set", "glob", "--disable"], env(dataDir))).code).toBe(0);
  await until(() => changed > 0, "a tools/list_changed notification", { intervalMs: 50 });
  expect((await client.listTools()).tools.map((t) => t.name)).not.toContain("glob");
  await subscription?.close();
}

describe("MCP over stdio with the SDK client", () => {
  it("lists, reads a file, refuses a path, and announces a settings change made by another process (2026-07-28)", async () => {
    const dataDir = tempDir();
    const work = tempDir("toolhost-mcp-stdio-");
    writeFileSync(join(work, "hello.txt"), "hello from stdio\n");
    const client = await sdkClient(dataDir, work, { mode: { pin: "2026-07-28" } });
    try {
      await listsReadsRefusesAnnounces(client, dataDir, false);
    } finally {
      await client.close();
    }
  });

  // The 2025-era client declares elicitation: one `toolhost mcp` process serves both
  // tests below (a process costs ~0.6 s of CPU to start; neither test needs a fresh one). get_current_datetime asks
  // for approval, set before the server starts; the first test calls only read_file.
  describe("2025 era, a client that can be asked", () => {
    let dataDir: string;
    let work: string;
    let client: Client;
    beforeAll(async () => {
      dataDir = tempDir();
      work = tempDir("toolhost-mcp-stdio-");
      writeFileSync(join(work, "hello.txt"), "hello from stdio\n");
      expect((await runCli(["settings", "set", "get_current_datetime", "approval=ask"], env(dataDir))).code).toBe(0);
      client = await sdkClient(dataDir, work, { mode: "legacy", capabilities: { elicitation: { form: {} } } });
    });
    afterAll(async () => {
      await client?.close();
    });

    it("lists, reads a file, refuses a path, and announces a settings change made by another process (2025 era)", async () => {
      await listsReadsRefusesAnnounces(client, dataDir, true);
    });

    it("asks the client's user with a form, runs on allow and refuses on deny", async () => {
      const forms: { message: string; choices: unknown }[] = [];
      let answer = "allow_once";
      client.setRequestHandler("elicitation/create", async (request) => {
        const params = request.params as unknown as {
          message: string;
          requestedSchema: { properties: { decision: unknown } };
        };
        forms.push({ message: params.message, choices: params.requestedSchema.properties.decision });
        return answer === "dismiss"
          ? { action: "cancel" }
          : { action: "accept", content: { decision: answer, message: "not now" } };
      });
      const allowed = await client.callTool({ name: "get_current_datetime", arguments: { timezone: "UTC" } });
      expect(allowed.isError).toBeFalsy();
      expect(allowed.structuredContent).toMatchObject({ timezone: "UTC" });
      expect(forms[0]?.message).toContain("get_current_datetime");
      answer = "deny";
      const denied = await client.callTool({ name: "get_current_datetime", arguments: {} });
      expect(denied.isError).toBe(true);
      expect(JSON.stringify(denied.content)).toContain("denied_by_user");
      expect(JSON.stringify(denied.content)).toContain("not now");
      answer = "dismiss";
      const dismissed = await client.callTool({ name: "get_current_datetime", arguments: {} });
      expect(dismissed.isError).toBe(true);
      expect(forms).toHaveLength(3);
      // A client without elicitation is denied instead: see the malformed-requests test, whose raw client declares
      // none.
    });
  });
});
