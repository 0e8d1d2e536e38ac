/**
 * MCP over stdio (`toolhost mcp`): newline-delimited JSON-RPC on stdin/stdout, served by the SDK's `serveStdio`
 * (both protocol eras from one factory) over a transport that answers malformed input the way JSON-RPC 2.0
 * prescribes instead of dropping it:
 *
 * - a line that is not JSON: `-32700` (parse error) with id null;
 * - JSON that is not a request, notification or response (a batch, a bare value, a missing or wrong `jsonrpc`,
 *   `method` or `id`): `-32600` (invalid request), with the request's id when it has a usable one;
 * - `params` that is not an object, or a request's `params._meta` that fails the SDK's schema (which its transport
 *   would drop silently): `-32602` (invalid params).
 *
 * Every request with an id thus gets a response. Invalid-params errors the SDK raises from its own validation are
 * reworded from raw validator output into one readable sentence (the details stay in `error.data.issues`).
 *
 * Input is decoded as a UTF-8 stream (a character whose bytes straddle two chunks stays whole), and one message is
 * at most TOOLHOST_MAX_BODY_BYTES, the HTTP body limit: a longer line is dropped as it arrives and answered with
 * `-32600`, so a client cannot make the server hold an unbounded line.
 */
import { PassThrough, type Readable, type Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import {
  type JSONRPCMessage,
  parseJSONRPCMessage,
  type Transport,
  type TransportSendOptions,
} from "@modelcontextprotocol/server";
import { StdioServerTransport, serveStdio } from "@modelcontextprotocol/server/stdio";
import { DEFAULT_MAX_BODY_BYTES } from "../../core/config.js";
import { TOOL_ARGUMENT_LIMITS } from "../../core/json-limits.js";
import { createMcpServer, type McpSessionOptions, toolListFingerprint } from "./tool-server.js";

type JsonRpcErrorReply = { jsonrpc: "2.0"; id: string | number | null; error: { code: number; message: string } };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
/** A JSON-RPC id that can be echoed back exactly: a string, or an integer JSON.parse did not round (|id| ≤ 2^53−1). */
const usableId = (id: unknown): id is string | number =>
  typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id));

/** Whether the SDK's JSON-RPC message schema accepts a request carrying this `_meta`. */
function sdkAcceptsMeta(method: string, meta: unknown): boolean {
  try {
    parseJSONRPCMessage({ jsonrpc: "2.0", id: 0, method, params: { _meta: meta } });
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks one inbound line. Returns the error reply to send for a malformed message, or undefined when the line is
 * a well-formed JSON-RPC message the SDK should see.
 */
export function checkJsonRpcLine(line: string): JsonRpcErrorReply | undefined {
  const screened = screenJsonRpcLine(line);
  return "error" in screened ? screened.error : undefined;
}

/** checkJsonRpcLine with the parsed message of a well-formed line (parsed once, for the SDK too). */
function screenJsonRpcLine(line: string): { error: JsonRpcErrorReply } | { message: unknown } {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch (error) {
    return {
      error: replyOf(null, -32700, `Parse error: the line is not valid JSON (${(error as Error).message}).`),
    };
  }
  const error = screenMessage(message);
  return error ? { error } : { message };
}

function replyOf(id: string | number | null, code: number, message: string): JsonRpcErrorReply {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

/** The error reply for a parsed inbound message that is not well-formed JSON-RPC (see checkJsonRpcLine). */
function screenMessage(message: unknown): JsonRpcErrorReply | undefined {
  const reply = replyOf;
  if (Array.isArray(message)) {
    return reply(null, -32600, "Invalid request: JSON-RPC batches are not supported; send one message per line.");
  }
  if (!isRecord(message)) return reply(null, -32600, "Invalid request: a JSON-RPC message must be a JSON object.");
  const hasId = "id" in message;
  if (hasId && !usableId(message.id)) {
    return reply(
      null,
      -32600,
      "Invalid request: id must be a string or an integer (a safe integer: at most 9007199254740991 in magnitude).",
    );
  }
  const id = hasId ? (message.id as string | number) : null;
  if (message.jsonrpc !== "2.0") return reply(id, -32600, 'Invalid request: "jsonrpc" must be "2.0".');
  if ("method" in message) {
    if (typeof message.method !== "string" || message.method === "") {
      return reply(id, -32600, 'Invalid request: "method" must be a non-empty string.');
    }
    if ("params" in message && message.params !== undefined && !isRecord(message.params)) {
      return hasId ? reply(id, -32602, 'Invalid params: "params" must be an object.') : undefined;
    }
    // The SDK's transport drops a message whose `_meta` fails its schema without a word: a request would never be
    // answered. Checked with the SDK's own message schema, so the rule is the SDK's.
    const meta = isRecord(message.params) ? message.params._meta : undefined;
    if (hasId && meta !== undefined && !sdkAcceptsMeta(message.method, meta)) {
      return reply(
        id,
        -32602,
        "Invalid params: params._meta does not match the MCP schema (an object; its progressToken, when present, a string or an integer; its io.modelcontextprotocol/related-task an object).",
      );
    }
    return undefined;
  }
  if (hasId && ("result" in message || "error" in message)) return undefined;
  return reply(id, -32600, 'Invalid request: a request needs "method" (and a response "result" or "error").');
}

/**
 * Rewords an invalid-params error whose message carries raw validator output (a JSON list of issues) into one
 * sentence naming each bad field; returns the message unchanged otherwise.
 */
export function tidyOutgoing(message: JSONRPCMessage): JSONRPCMessage {
  const m = message as { error?: { code?: number; message?: string; data?: unknown } };
  if (!m.error || typeof m.error.message !== "string") return message;
  const match = /^([^[]*?):?\s*(\[[\s\S]*\])\s*$/.exec(m.error.message);
  if (!match) return message;
  let issues: unknown;
  try {
    issues = JSON.parse(match[2] as string);
  } catch {
    return message;
  }
  if (!Array.isArray(issues)) return message;
  const parts = issues.map((issue) => {
    const i = issue as { path?: unknown[]; message?: string };
    const where = Array.isArray(i.path) && i.path.length > 0 ? i.path.join(".") : "request";
    return `${where}: ${i.message ?? "invalid"}`;
  });
  const head = (match[1] ?? "").trim() || "Invalid params";
  return {
    ...message,
    error: {
      ...m.error,
      message: `${head}: ${parts.join("; ")}`,
      data: { issues: parts },
    },
  } as JSONRPCMessage;
}

/**
 * A stdio transport that screens each inbound line (see {@link checkJsonRpcLine}), answers malformed ones itself,
 * and hands well-formed ones, parsed once, to the handler the SDK's own stdio transport would call; that transport
 * (fed only the end of input) keeps its lifecycle and writes the answers.
 */
export class CheckedStdioServerTransport implements Transport {
  readonly #input: Readable;
  readonly #output: Writable;
  readonly #feed = new PassThrough();
  readonly #inner: StdioServerTransport;
  readonly #decoder = new StringDecoder("utf8");
  readonly #maxMessageBytes: number;
  /** The parts of the line being read (joined once, at its end) and their size in UTF-8 bytes. */
  #parts: string[] = [];
  #bytes = 0;
  /** The line being read is over the limit: the rest of it is dropped until its end. */
  #oversized = false;

  /** `maxMessageBytes`: the longest message (line) read, in UTF-8 bytes; default the HTTP body limit's default. */
  constructor(
    input: Readable = process.stdin,
    output: Writable = process.stdout,
    options: { maxMessageBytes?: number } = {},
  ) {
    this.#input = input;
    this.#output = output;
    this.#maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.#inner = new StdioServerTransport(this.#feed, output);
  }

  set onclose(fn: (() => void) | undefined) {
    this.#inner.onclose = fn;
  }
  get onclose(): (() => void) | undefined {
    return this.#inner.onclose;
  }
  set onerror(fn: ((error: Error) => void) | undefined) {
    this.#inner.onerror = fn;
  }
  get onerror(): ((error: Error) => void) | undefined {
    return this.#inner.onerror;
  }
  set onmessage(fn: Transport["onmessage"]) {
    this.#inner.onmessage = fn;
  }
  get onmessage(): Transport["onmessage"] {
    return this.#inner.onmessage;
  }

  async start(): Promise<void> {
    await this.#inner.start();
    this.#input.on("data", this.#onData);
    this.#input.once("end", this.#onEnd);
    this.#input.once("close", this.#onEnd);
  }

  #onData = (chunk: Buffer | string): void => {
    const text = typeof chunk === "string" ? chunk : this.#decoder.write(chunk);
    // Only the new text is searched for line ends: a long line arriving in many chunks costs its length once.
    let start = 0;
    let newline = text.indexOf("\n");
    while (newline !== -1) {
      this.#append(text.slice(start, newline));
      this.#endLine();
      start = newline + 1;
      newline = text.indexOf("\n", start);
    }
    this.#append(text.slice(start));
  };

  #append(part: string): void {
    if (this.#oversized || part === "") return;
    this.#bytes += Buffer.byteLength(part);
    if (this.#bytes > this.#maxMessageBytes) {
      this.#oversized = true;
      this.#parts = [];
      return;
    }
    this.#parts.push(part);
  }

  #endLine(): void {
    const line = this.#parts.join("").replace(/\r$/, "");
    const oversized = this.#oversized;
    this.#parts = [];
    this.#bytes = 0;
    this.#oversized = false;
    if (oversized) {
      const error = replyOf(
        null,
        -32600,
        `Invalid request: the message is larger than ${this.#maxMessageBytes} bytes (TOOLHOST_MAX_BODY_BYTES) and was not read; send less (a tool's arguments hold at most ${TOOL_ARGUMENT_LIMITS.maxBytes} bytes).`,
      );
      this.#output.write(`${JSON.stringify(error)}\n`);
      return;
    }
    this.#line(line);
  }

  #onEnd = (): void => {
    this.#append(this.#decoder.end());
    if (this.#oversized || this.#parts.join("").trim() !== "") this.#endLine();
    this.#feed.end();
  };

  #line(line: string): void {
    if (line.trim() === "") return;
    const screened = screenJsonRpcLine(line);
    if ("error" in screened) {
      this.#output.write(`${JSON.stringify(screened.error)}\n`);
      return;
    }
    // The SDK's transport would parse the line again and validate it with the same schema (its ReadBuffer): the
    // message parsed here goes to it directly, validated by the SDK's own parseJSONRPCMessage. A message the schema
    // refuses is reported to onerror, as the SDK's transport does.
    // Only while the SDK's transport listens (started, not closed): it stops listening to the feed when it closes.
    if (this.#feed.listenerCount("data") === 0) return;
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(screened.message);
    } catch (error) {
      this.#inner.onerror?.(error as Error);
      // A request the screen let through but the SDK's schema refuses still gets an answer.
      const { id, method } = screened.message as { id?: unknown; method?: unknown };
      if (usableId(id) && typeof method === "string") {
        const reply = replyOf(id, -32600, "Invalid request: the message does not match the MCP message schema.");
        this.#output.write(`${JSON.stringify(reply)}\n`);
      }
      return;
    }
    this.#inner.onmessage?.(message);
  }

  send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    return this.#inner.send(tidyOutgoing(message));
  }

  async close(): Promise<void> {
    this.#input.off("data", this.#onData);
    this.#input.off("end", this.#onEnd);
    this.#input.off("close", this.#onEnd);
    await this.#inner.close();
  }
}

/**
 * How often (ms) serveMcpStdio re-checks the user's tool list for changes another process made: the default, the
 * least, and the most (a timer cannot hold more than about 24.8 days; Node then fires every millisecond instead).
 */
export const TOOL_LIST_POLL_MS = { default: 2000, min: 100, max: 3_600_000 } as const;

/** Options of serveMcpStdio. */
export interface StdioServeOptions extends McpSessionOptions {
  /** How often (ms) to re-check the user's tool list for changes made by another process (see TOOL_LIST_POLL_MS). */
  pollMs?: number;
  input?: Readable;
  output?: Writable;
  /** Longest message read, in UTF-8 bytes (the CLI passes TOOLHOST_MAX_BODY_BYTES); default 16 MiB. */
  maxMessageBytes?: number;
  /** Called once the connection has closed (stdin ended or the client went away). */
  onClose?: () => void;
}

/**
 * Serves the user's tools on stdio until stdin ends. Sends `notifications/tools/list_changed` when the user's tool
 * list changes: at once for changes made in this process, and within `pollMs` for changes another process (the
 * CLI, the HTTP service) stored in the shared database.
 */
export function serveMcpStdio(options: StdioServeOptions): { close(): Promise<void> } {
  const pollMs = options.pollMs ?? TOOL_LIST_POLL_MS.default;
  if (!Number.isInteger(pollMs) || pollMs < TOOL_LIST_POLL_MS.min || pollMs > TOOL_LIST_POLL_MS.max) {
    throw new RangeError(
      `pollMs must be an integer from ${TOOL_LIST_POLL_MS.min} to ${TOOL_LIST_POLL_MS.max} (milliseconds), got ${pollMs}.`,
    );
  }
  const servers = new Set<ReturnType<typeof createMcpServer>>();
  const transport = new CheckedStdioServerTransport(
    options.input,
    options.output,
    options.maxMessageBytes === undefined ? {} : { maxMessageBytes: options.maxMessageBytes },
  );
  let last: string | undefined;
  let checking = false;
  const check = async () => {
    if (checking) return;
    checking = true;
    try {
      const now = await toolListFingerprint(options.runtime, options.userId);
      if (last !== undefined && now !== last) {
        for (const server of servers) void server.sendToolListChanged().catch(() => {});
      }
      last = now;
    } catch {
      // A transient database error: try again at the next tick.
    } finally {
      checking = false;
    }
  };
  void check();
  const unsubscribe = options.runtime.registry.changes.subscribe((userId) => {
    if (userId === null || userId === options.userId) void check();
  });
  const timer = setInterval(() => void check(), pollMs);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    unsubscribe();
  };
  const input = options.input ?? process.stdin;
  let closed = false;
  const ended = () => {
    if (closed) return;
    closed = true;
    stop();
    // Let the SDK abort and settle in-flight requests before the caller tears down what they use.
    setImmediate(() => options.onClose?.());
  };
  input.once("end", ended);
  input.once("close", ended);
  const handle = serveStdio(
    () => {
      const server = createMcpServer(options);
      servers.add(server);
      return server;
    },
    { transport },
  );
  return {
    async close() {
      stop();
      await handle.close();
    },
  };
}
