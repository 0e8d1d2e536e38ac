/**
 * Shared pieces of the framework adapter tests: one application context over a throwaway data directory, a working
 * directory with a file in it, and waits on events (a file, a process gone, an audit line).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/temp.js";
import { until } from "../helpers/until.js";

/** Major version of the running Node (AI SDK 7 and the current Agents SDK need 22 or later). */
export const NODE_MAJOR = Number(process.versions.node.split(".")[0]);

/** An application context of its own for one test file (close it in afterAll). */
export async function adapterContext(): Promise<AppContext> {
  return createAppContext({ dataDir: tempDir("toolhost-adapters-"), logger: recordingLogger(), adminUsers: [] });
}

/** A working directory holding `notes.txt`. */
export function workDirectory(): string {
  const work = tempDir("toolhost-adapters-work-");
  writeFileSync(join(work, "notes.txt"), "hello from the working directory\n");
  return work;
}

/** Lets a user run bash unconfined (so a pid it reports is the host's) and without asking. */
export async function allowBash(ctx: AppContext, userId: string): Promise<void> {
  await ctx.settings.update(
    userId,
    "bash",
    { enabled: true, parameters: { sandbox: "off", approval: "allow" } },
    { admin: true, actor: "test-admin", lock: false },
  );
}

/** Makes write_file ask before every call for a user. */
export async function askBeforeWrites(ctx: AppContext, userId: string): Promise<void> {
  await ctx.settings.update(userId, "write_file", { parameters: { approval: "ask" } });
}

/** Waits until `check` holds (the shared until(), polling every 20 ms), failing after `ms`. */
export async function eventually(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  await until(check, what, { timeoutMs: ms, intervalMs: 20 });
}

/** Whether a process exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The shell command of the abort tests: writes its host pid, then sleeps in place (no redirection to a file). */
export const SLEEP_COMMAND = "echo $$ | tee pid >/dev/null; exec sleep 30";

/** The pid the sleeping shell wrote into `work`. */
export async function sleeperPid(work: string): Promise<number> {
  const file = join(work, "pid");
  await eventually(() => existsSync(file) && readFileSync(file, "utf8").trim() !== "", 20_000, "the shell to start");
  return Number(readFileSync(file, "utf8").trim());
}

/** The tool-call audit lines of a user, oldest first. */
export async function auditOf(ctx: AppContext, userId: string) {
  return (await ctx.audit.list({ userId, kind: "tool_call", limit: 200 })).reverse();
}

/** One request a fake Chat Completions server received (the parsed JSON body). */
export type ChatCompletionsRequest = { tools?: { function: { name: string } }[]; messages: unknown[] };

/**
 * A loopback OpenAI Chat Completions server (POST /v1/chat/completions, non-streaming): the n-th request is
 * answered with the tool calls of `turns[n]`, later ones with the text "done". Like some OpenAI-compatible servers,
 * it reports no `usage`. `onRequest` runs before each answer (e.g. to change a setting mid-run).
 */
export async function chatCompletionsServer(
  turns: { id: string; tool: string; input: unknown }[][],
  onRequest?: (n: number) => Promise<void>,
): Promise<{ baseURL: string; requests: ChatCompletionsRequest[]; close: () => Promise<void> }> {
  const { createServer } = await import("node:http");
  const requests: ChatCompletionsRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatCompletionsRequest;
      requests.push(body);
      await onRequest?.(requests.length);
      const turn = turns[requests.length - 1];
      const message = turn
        ? {
            role: "assistant",
            content: null,
            tool_calls: turn.map((c) => ({
              id: c.id,
              type: "function",
              function: { name: c.tool, arguments: JSON.stringify(c.input) },
            })),
          }
        : { role: "assistant", content: "done" };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `chatcmpl-${requests.length}`,
          object: "chat.completion",
          created: 0,
          model: "fake",
          choices: [{ index: 0, message, finish_reason: turn ? "tool_calls" : "stop" }],
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
