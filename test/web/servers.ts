/** Loopback HTTP servers for the web tool tests: every request and every TCP connection is counted. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { memoryRuntime } from "../helpers/runtime.js";

/** A running loopback server. */
export interface TestServer {
  port: number;
  host: string;
  /** Base URL, e.g. http://127.0.0.1:41234 */
  origin: string;
  /** Request paths received, in order. */
  requests: string[];
  /** TCP connections accepted (counts attempts that never sent a request too). */
  connections: number;
  close(): Promise<void>;
}

/** Starts a server on `host` (127.0.0.1 unless told) and `port` (0 = any free port). */
export async function startServer(
  handler: (req: IncomingMessage, res: ServerResponse, server: TestServer) => void | Promise<void>,
  options: { host?: string; port?: number } = {},
): Promise<TestServer> {
  const host = options.host ?? "127.0.0.1";
  const sockets = new Set<Socket>();
  const state = { requests: [] as string[], connections: 0 } as TestServer;
  const server: Server = createServer((req, res) => {
    state.requests.push(req.url ?? "");
    Promise.resolve(handler(req, res, state)).catch((error) => {
      res.statusCode = 500;
      res.end(String(error));
    });
  });
  server.on("connection", (socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  state.port = port;
  state.host = host;
  state.origin = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return state;
}

/** A server answering every request with 200 "secret" (the target an SSRF attempt must never reach). */
export function startCountingServer(options: { host?: string; port?: number } = {}): Promise<TestServer> {
  return startServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("SECRET internal data");
  }, options);
}

/** A test resolver: a fixed name → addresses map; unknown names fail like NXDOMAIN. Counts lookups per name. */
export function mapResolver(map: Record<string, string[] | (() => string[])>) {
  const calls: string[] = [];
  const resolver = async (host: string): Promise<string[]> => {
    calls.push(host);
    const entry = map[host];
    if (!entry) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return typeof entry === "function" ? entry() : entry;
  };
  return Object.assign(resolver, { calls });
}

/** A resolver answering `first` on its first lookup and `later` on every lookup after (DNS rebinding). */
export function rebindingResolver(first: string[], later: string[]) {
  const calls: string[] = [];
  const resolver = async (host: string): Promise<string[]> => {
    calls.push(host);
    return calls.length === 1 ? first : later;
  };
  return Object.assign(resolver, { calls });
}

/** A memory runtime plus a helper that calls a tool with services and saved settings for user "u". */
export function webRuntime() {
  const env = memoryRuntime();
  const call = async (
    tool: string,
    args: Record<string, unknown>,
    opts: { services?: Record<string, unknown>; settings?: Record<string, unknown>; signal?: AbortSignal } = {},
  ) => {
    if (opts.settings) await env.store.save("u", tool, { enabled: null, parameters: opts.settings });
    return env.runtime.executeTool(tool, args, { userId: "u", services: opts.services ?? {}, signal: opts.signal });
  };
  return { ...env, call };
}
