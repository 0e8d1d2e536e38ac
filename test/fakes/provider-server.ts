/**
 * Protocol-faithful fake provider servers on 127.0.0.1. Each speaks one provider's HTTP API closely enough for the
 * provider's official SDK to be the client: it checks every request's format (tool call ids answered, Anthropic
 * tool_result placement, Gemini signatures echoed…), then streams the documented SSE event sequence for the next
 * scripted turn.
 *
 * Usage:
 *   const fake = await startFakeProvider("anthropic", [
 *     { kind: "tools", calls: [{ name: "list_dir", arguments: { path: "." } }] },
 *     (req) => ({ kind: "text", text: `Found: ${req.lastToolResults[0]?.content}` }),
 *   ]);
 *   createProviderAdapter("anthropic", { apiKey: "test", baseURL: fake.baseURL });
 *   ...; await fake.close();
 */

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { ProviderName } from "../../src/providers/types.js";
import { PROTOCOLS, type ProtocolContext } from "./protocols.js";
import type { FakeRequest, FakeTurn, FakeTurnAction } from "./types.js";

export type { FakeRequest, FakeToolCall, FakeTurn, FakeTurnAction } from "./types.js";

/** A running fake provider. */
export interface FakeProvider {
  name: ProviderName;
  /** Origin, e.g. http://127.0.0.1:41234 */
  url: string;
  /** What to pass as `ProviderConfig.baseURL` for this provider (`<url>/v1` for OpenAI, `<url>` otherwise). */
  baseURL: string;
  /** Every request received, in order. */
  requests: FakeRequest[];
  /** Protocol violations and failed `expect` hooks (each also answered with HTTP 400). */
  failures: string[];
  /** Resolves when the client of a `stall` turn has gone away (abort tests). */
  stallClosed(): Promise<void>;
  /** Number of script turns not consumed yet. */
  remaining(): number;
  close(): Promise<void>;
}

/** Options of {@link startFakeProvider}. */
export interface FakeProviderOptions {
  /** Model name echoed in streamed events (default: the request's model). */
  model?: string;
  /** Called for every request before its turn runs (e.g. to collect tool definitions). */
  onRequest?: (request: FakeRequest) => void;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Starts a fake for `name` that answers each POST with the next turn of `script`. Unmatched paths get 404;
 * an exhausted script gets HTTP 500 with a message saying so. Listens on 127.0.0.1, ephemeral port.
 */
export async function startFakeProvider(
  name: ProviderName,
  script: FakeTurn[],
  options: FakeProviderOptions = {},
): Promise<FakeProvider> {
  const protocol = PROTOCOLS[name];
  const requests: FakeRequest[] = [];
  const failures: string[] = [];
  const sockets = new Set<Socket>();
  let counter = 0;
  const ctx: ProtocolContext = { model: options.model ?? "fake-model", next: () => ++counter, issued: new Map() };
  let turn = 0;
  let stallResolve: (() => void) | undefined;
  const stallPromise = new Promise<void>((resolve) => {
    stallResolve = resolve;
  });

  const sendError = (res: ServerResponse, status: number, message: string, retryAfterMs?: number) => {
    res.writeHead(status, {
      "content-type": "application/json",
      ...(retryAfterMs === undefined ? {} : { "retry-after-ms": String(retryAfterMs) }),
    });
    res.end(JSON.stringify(protocol.errorBody(status, message)));
  };

  const writeFrames = async (res: ServerResponse, frames: string[]) => {
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    for (const frame of frames) {
      if (res.destroyed) return;
      res.write(frame);
      // Yield to the event loop so the client sees the frames as separate chunks.
      await new Promise((resolve) => setImmediate(resolve));
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const raw = await readBody(req);
    if (!protocol.matches(req.method ?? "GET", path)) {
      sendError(res, 404, `fake ${name}: no route for ${req.method} ${path}`);
      return;
    }
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      sendError(res, 400, "request body is not JSON");
      return;
    }
    const parsed = protocol.parse(body);
    const request: FakeRequest = {
      index: requests.length,
      method: req.method ?? "",
      path,
      headers: req.headers,
      body,
      ...parsed,
    };
    requests.push(request);
    options.onRequest?.(request);
    const violations = protocol.validate(body, ctx);
    if (violations.length > 0) {
      failures.push(...violations.map((v) => `request ${request.index}: ${v}`));
      sendError(res, 400, violations.join("; "));
      return;
    }
    const step = script[turn++];
    if (!step) {
      failures.push(`request ${request.index}: script exhausted`);
      sendError(res, 500, `fake ${name}: script exhausted after ${script.length} turns`);
      return;
    }
    let action: FakeTurnAction;
    try {
      if (typeof step === "function") action = step(request);
      else {
        step.expect?.(request);
        action = step;
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      failures.push(`request ${request.index}: ${message}`);
      sendError(res, 400, message);
      return;
    }
    if (options.model === undefined) ctx.model = body.model ?? ctx.model;
    switch (action.kind) {
      case "error":
        sendError(res, action.status, action.message, action.retryAfterMs);
        return;
      case "raw":
        for (const call of action.issues ?? []) ctx.issued.set(call.id, { id: call.id, name: call.name });
        res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
        res.end(action.body);
        return;
      case "break":
        await writeFrames(res, protocol.frames(action, ctx));
        // Give the client time to read what was written, then cut the connection without a terminal event.
        await new Promise((resolve) => setTimeout(resolve, 20));
        res.socket?.destroy();
        return;
      case "stall": {
        await writeFrames(res, protocol.frames(action, ctx));
        await new Promise<void>((resolve) => {
          if (res.destroyed || res.socket?.destroyed) return resolve();
          res.on("close", () => resolve());
        });
        stallResolve?.();
        return;
      }
      default:
        await writeFrames(res, protocol.frames(action, ctx));
        res.end();
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      failures.push(`fake ${name} crashed: ${error instanceof Error ? error.stack : String(error)}`);
      if (!res.headersSent) sendError(res, 500, "fake crashed");
      else res.destroy();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return {
    name,
    url,
    baseURL: name === "openai" || name === "openai-chat" ? `${url}/v1` : url,
    requests,
    failures,
    stallClosed: () => stallPromise,
    remaining: () => Math.max(0, script.length - turn),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
