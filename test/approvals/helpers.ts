/**
 * Helpers of the approval end-to-end tests: the built server (`toolhost serve`) in its own process over a data
 * directory that survives restarts, and an incremental SSE reader (read up to an event, act, read on).
 */

import type { ApprovalRecord } from "../../src/storage/approvals.js";
import { type CliProcess, startCli } from "../e2e/chat-process.js";
import { until } from "../helpers/until.js";

/** One Server-Sent Event with its JSON data. */
export interface SseEvent {
  event: string;
  id?: string;
  data: any;
}

/** Reads an SSE response event by event. */
export class SseReader {
  readonly events: SseEvent[] = [];
  #buffer = "";
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #decoder = new TextDecoder();
  #ended = false;

  constructor(response: Response) {
    if (!response.headers.get("content-type")?.startsWith("text/event-stream")) {
      throw new Error(`expected an event stream, got HTTP ${response.status} ${response.headers.get("content-type")}`);
    }
    this.#reader = response.body!.getReader();
  }

  /** Reads until an event satisfies `predicate` and returns it; throws when the stream ends first. */
  async until(predicate: (event: SseEvent) => boolean): Promise<SseEvent> {
    const seen = this.events.length;
    for (let i = seen; ; i += 1) {
      while (i >= this.events.length) {
        if (this.#ended) {
          throw new Error(`stream ended without the event; got ${this.events.map((e) => e.event).join(", ")}`);
        }
        await this.#read();
      }
      if (predicate(this.events[i]!)) return this.events[i]!;
    }
  }

  /** Reads to the end of the stream (swallows the error of a connection cut by a dying server). */
  async rest(): Promise<SseEvent[]> {
    try {
      while (!this.#ended) await this.#read();
    } catch {
      this.#ended = true;
    }
    return this.events;
  }

  async #read(): Promise<void> {
    const { done, value } = await this.#reader.read();
    if (done) {
      this.#ended = true;
      return;
    }
    this.#buffer += this.#decoder.decode(value, { stream: true });
    let end = this.#buffer.indexOf("\n\n");
    while (end >= 0) {
      const frame = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      end = this.#buffer.indexOf("\n\n");
      const event: SseEvent = { event: "message", data: "" };
      const data: string[] = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.event = value;
        else if (field === "id") event.id = value;
        else if (field === "data") data.push(value);
      }
      if (data.length === 0) continue;
      event.data = JSON.parse(data.join("\n"));
      this.events.push(event);
    }
  }
}

/** A running `toolhost serve`. */
export interface ServerProcess {
  process: CliProcess;
  url: string;
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL (no cleanup, as a crash) and wait. */
  kill(): Promise<void>;
}

/**
 * Starts the built server on a free port with `env`; `token` authenticates every request (the first start prints
 * it: pass undefined to read it from the output, then reuse it for restarts over the same data directory).
 */
export async function startServerProcess(
  env: NodeJS.ProcessEnv,
  token?: string,
): Promise<ServerProcess & { token: string }> {
  const p = startCli(["serve", "--port", "0"], env);
  await p.waitFor(
    (out) => /Toolhost (http:\/\/127\.0\.0\.1:\d+)/.test(out) && (token !== undefined || /^\s+(th_\S+)$/m.test(out)),
  );
  const url = /Toolhost (http:\/\/127\.0\.0\.1:\d+)/.exec(p.stdout())![1]!;
  const bearer = token ?? /^\s+(th_\S+)$/m.exec(p.stdout())![1]!;
  return {
    process: p,
    url,
    token: bearer,
    api: (path, init = {}) => {
      const { json, ...rest } = init;
      return fetch(`${url}${path}`, {
        ...rest,
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", ...(rest.headers ?? {}) },
        ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
      });
    },
    async stop() {
      p.child.kill("SIGTERM");
      await p.exited;
    },
    async kill() {
      p.child.kill("SIGKILL");
      await p.exited;
    },
  };
}

/** Polls `read` until it returns something truthy (the shared until(), 25 ms between polls; 25 s at most). */
export async function eventually<T>(read: () => Promise<T | undefined | null | false>): Promise<T> {
  return (await until(read, "a truthy value", { intervalMs: 25, timeoutMs: 25_000 })) as T;
}

/** A pending ask of user "ana" for write_file, expiring in a minute; `overrides` replace any field. */
export function approvalRecord(id: string, overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  const now = Date.now();
  return {
    id,
    userId: "ana",
    chatId: "chat-1",
    turnId: null,
    toolCallId: `call-${id}`,
    tool: "write_file",
    argsHash: "h",
    preview: "{}",
    rule: { decision: "ask", match: "notes/**" },
    reason: "asks",
    candidates: [],
    agentPath: null,
    workingDirectory: null,
    status: "pending",
    decision: null,
    message: null,
    decidedBy: null,
    decidedAt: null,
    createdAt: new Date(now).toISOString(),
    expiresAt: new Date(now + 60_000).toISOString(),
    hmac: "00",
    ...overrides,
  };
}
