/**
 * Shutdown of the real processes: `toolhost chat` (Ctrl-C), `toolhost call`, `toolhost mcp` and `toolhost serve`
 * (SIGTERM) while bash runs a long `sleep`. Each process exits with its documented code, no process of the call
 * outlives it, and the call's audit line is in the database with a cancelled outcome (the database closed only after
 * it was written).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { startFakeProvider } from "../fakes/provider-server.js";
import { sleeping, sleepingUnder } from "../helpers/processes.js";
import { until } from "../helpers/until.js";
import { assertBuilt, CLI, type CliProcess, cleanEnv, startCli } from "./chat-process.js";

// Real processes on a machine that may be busy: generous bounds (the tests wait only as long as they must).
vi.setConfig({ testTimeout: 120_000 });

let work: string;
beforeAll(() => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), "toolhost-shutdown-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Waits on a server process: gives up at once (with its output) when the process exits first. */
function watching(p: CliProcess) {
  return {
    timeoutMs: 60_000,
    intervalMs: 50,
    giveUp: () =>
      p.child.exitCode === null
        ? undefined
        : `the process exited (${p.child.exitCode}).\nstdout: ${p.stdout()}\nstderr: ${p.stderr()}`,
  };
}

/** A unique `sleep` command, so the test can find exactly its own process. */
function uniqueSleep(): { command: string; marker: string } {
  const marker = `${40 + Math.floor(Math.random() * 50)}.${process.pid}${Math.floor(Math.random() * 1e6)}`;
  return { command: `sleep ${marker}`, marker };
}

/** A data directory in which user `local` may run bash without an approval ask (bash is off by default). */
async function dataDirWithBash(name: string): Promise<string> {
  const dataDir = join(work, name);
  const ctx = await createAppContext({ dataDir });
  try {
    await ctx.settings.update("local", "bash", { enabled: true, parameters: { approval: "allow" } }, { admin: true });
  } finally {
    await ctx.close();
  }
  return dataDir;
}

/** The audit lines of bash calls in a data directory's SQLite database. */
function bashAudit(dataDir: string): { outcome: string; error_code: string | null; termination: string }[] {
  const db = new Database(join(dataDir, "toolhost.db"), { readonly: true });
  try {
    return db
      .prepare("SELECT outcome, error_code, termination FROM audit_log WHERE tool = 'bash' AND kind = 'tool_call'")
      .all() as { outcome: string; error_code: string | null; termination: string }[];
  } finally {
    db.close();
  }
}

describe.runIf(existsSync("/proc/self/cmdline")).concurrent("shutdown while bash runs", () => {
  it("toolhost chat: Ctrl-C kills the command, writes its audit line, then exits 130", async () => {
    const { command, marker } = uniqueSleep();
    const fake = await startFakeProvider("openai", [
      { kind: "tools", calls: [{ name: "bash", arguments: { command } }] },
      { kind: "text", text: "unused" },
    ]);
    const dataDir = await dataDirWithBash("chat");
    try {
      const p = startCli(
        ["chat", "Wait a while.", "--provider", "openai", "--model", "fake-model", "--cwd", work],
        cleanEnv({ TOOLHOST_DATA_DIR: dataDir, OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.baseURL }),
      );
      await until(() => sleepingUnder([p.child.pid!], marker).length > 0, "the sleep to start", watching(p));
      p.child.kill("SIGINT");
      expect(await p.exited, p.stderr()).toBe(130);
      expect(p.stderr()).not.toMatch(/destroyed/);
      expect(sleeping(marker)).toEqual([]);
      expect(bashAudit(dataDir)).toEqual([{ outcome: "error", error_code: "aborted", termination: "aborted" }]);
    } finally {
      await fake.close();
    }
  });

  it("toolhost call: SIGTERM kills the command, writes its audit line, then exits 143", async () => {
    const { command, marker } = uniqueSleep();
    const dataDir = await dataDirWithBash("call");
    const p = startCli(
      ["call", "bash", JSON.stringify({ command }), "--cwd", work],
      cleanEnv({ TOOLHOST_DATA_DIR: dataDir }),
    );
    await until(() => sleepingUnder([p.child.pid!], marker).length > 0, "the sleep to start", watching(p));
    p.child.kill("SIGTERM");
    expect(await p.exited, p.stderr()).toBe(143);
    expect(p.stdout()).toBe("");
    expect(p.stderr()).toMatch(/^error: aborted: /m);
    expect(sleeping(marker)).toEqual([]);
    expect(bashAudit(dataDir)).toEqual([{ outcome: "error", error_code: "aborted", termination: "aborted" }]);
  });

  it("toolhost mcp: SIGTERM cancels the running tools/call, writes its audit line, exits 0", async () => {
    const { command, marker } = uniqueSleep();
    const dataDir = await dataDirWithBash("mcp");
    const child = spawn(process.execPath, [CLI, "mcp", "--cwd", work], {
      env: cleanEnv({ TOOLHOST_DATA_DIR: dataDir }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "shutdown-test", version: "1" } },
    });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "bash", arguments: { command } } });
    const p = { child, stdout: () => out, stderr: () => err } as unknown as CliProcess;
    await until(() => sleepingUnder([p.child.pid!], marker).length > 0, "the sleep to start", watching(p));
    child.kill("SIGTERM");
    expect(await exited, err).toBe(0);
    expect(sleeping(marker)).toEqual([]);
    expect(bashAudit(dataDir)).toEqual([{ outcome: "error", error_code: "aborted", termination: "aborted" }]);
  });

  it("toolhost mcp: SIGTERM right after answered calls loses none of their audit lines (written after the answers)", async () => {
    const dataDir = join(work, "mcp-batch");
    const child = spawn(process.execPath, [CLI, "mcp", "--cwd", work], {
      env: cleanEnv({ TOOLHOST_DATA_DIR: dataDir }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let err = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const answered = new Set<number>();
    let buffer = "";
    const calls = 40;
    const allAnswered = new Promise<void>((resolve) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        buffer += d;
        for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
          const message = JSON.parse(buffer.slice(0, nl)) as { id?: number; result?: { isError?: boolean } };
          buffer = buffer.slice(nl + 1);
          if (typeof message.id === "number" && message.id >= 10 && message.result && !message.result.isError) {
            answered.add(message.id);
          }
          if (answered.size === calls) resolve();
        }
      });
    });
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "shutdown-test", version: "1" } },
    });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    for (let i = 0; i < calls; i++) {
      send({
        jsonrpc: "2.0",
        id: 10 + i,
        method: "tools/call",
        params: { name: "list_directory", arguments: { path: work } },
      });
    }
    await allAnswered;
    child.kill("SIGTERM");
    expect(await exited, err).toBe(0);
    const db = new Database(join(dataDir, "toolhost.db"), { readonly: true });
    try {
      const row = db
        .prepare(
          "SELECT count(*) AS n FROM audit_log WHERE tool = 'list_directory' AND kind = 'tool_call' AND outcome = 'ok'",
        )
        .get() as { n: number };
      expect(row.n).toBe(calls);
    } finally {
      db.close();
    }
  });

  it("toolhost serve: SIGTERM hands the running chat turn over, cancels the tool call, answers both, writes the audit line, exits 0", async () => {
    const { command, marker } = uniqueSleep();
    const dataDir = await dataDirWithBash("serve");
    const fake = await startFakeProvider("openai", [{ kind: "stall", text: "Thinking it over" }]);
    try {
      const p = startCli(
        ["serve", "--port", "0"],
        cleanEnv({ TOOLHOST_DATA_DIR: dataDir, OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.baseURL }),
      );
      await p.waitFor((out) => /th_[A-Za-z0-9_-]+/.test(out) && /http:\/\/[\d.]+:\d+/.test(out));
      const url = /http:\/\/[\d.]+:\d+/.exec(p.stdout())![0];
      const token = /th_[A-Za-z0-9_-]+/.exec(p.stdout())![0];
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      // A chat turn whose model is still streaming…
      const created = await fetch(`${url}/api/chats`, {
        method: "POST",
        headers,
        body: JSON.stringify({ provider: "openai", model: "fake-model", workingDirectory: work }),
      });
      const chatId = ((await created.json()) as { id: string }).id;
      const stream = await fetch(`${url}/api/chats/${chatId}/messages`, {
        method: "POST",
        headers,
        body: JSON.stringify({ content: "Take your time." }),
      });
      let sse = "";
      const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
      const streamed = (async () => {
        for (;;) {
          const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
          if (done) return;
          sse += value;
        }
      })();
      expect(stream.status).toBe(200);
      await until(() => sse.includes("event: text_delta"), "the model to stream", watching(p));
      // …and a tool call running bash.
      const call = fetch(`${url}/api/tools/bash/execute`, {
        method: "POST",
        headers,
        body: JSON.stringify({ arguments: { command }, workingDirectory: work }),
      }).then(
        async (res) => ({ status: res.status, body: (await res.json()) as { ok: boolean; error?: { code: string } } }),
        (error: Error) => ({ status: 0, body: { ok: false, error: { code: error.message } } }),
      );
      await until(() => sleepingUnder([p.child.pid!], marker).length > 0, "the sleep to start", watching(p));
      p.child.kill("SIGTERM");
      expect(await p.exited, p.stderr()).toBe(0);
      // Both clients got their answers before the connections closed: the turn and the call were cancelled.
      await streamed;
      // The turn is handed over (another instance, or this one's next start, continues it), not ended.
      expect(sse).toMatch(/event: error\ndata: \{"type":"error","code":"handed_over"/);
      expect(sse).toMatch(/event: done\ndata: \{"type":"done","reason":"error"/);
      await fake.stallClosed();
      expect(await call).toMatchObject({ status: 200, body: { ok: false, error: { code: "aborted" } } });
      expect(sleeping(marker)).toEqual([]);
      expect(bashAudit(dataDir)).toEqual([{ outcome: "error", error_code: "aborted", termination: "aborted" }]);
    } finally {
      await fake.close();
    }
  });
});
