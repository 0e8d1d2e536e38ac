/** Test helpers: a real Toolhost server on a loopback port over a real SQLite file in a temp data directory. */
import { type AppContext, type AppContextOptions, createAppContext } from "../../src/app/context.js";
import { type RunningServer, startServer } from "../../src/server/serve.js";
import { recordingLogger } from "./runtime.js";
import { tempDir } from "./temp.js";

export { tempDir } from "./temp.js";

/** A started server with its first-start token and a fetch helper that sends it. */
export interface TestServer {
  ctx: AppContext;
  server: RunningServer;
  token: string;
  dataDir: string;
  /** The lines the server printed on start. */
  printed: string[];
  api(path: string, init?: RequestInit & { json?: unknown; token?: string | null }): Promise<Response>;
  stop(): Promise<void>;
}

/** Starts a server on 127.0.0.1:0 over `<dataDir>/toolhost.db`, capturing the token printed on first start. */
export async function startTestServer(options: AppContextOptions & { dataDir?: string } = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? tempDir();
  const ctx = await createAppContext({ logger: recordingLogger(), ...options, dataDir });
  const lines: string[] = [];
  const server = await startServer(ctx, { port: 0, print: (l) => lines.push(l) });
  const token = lines.map((l) => l.trim()).find((l) => l.startsWith("th_")) ?? "";
  return {
    ctx,
    server,
    token,
    dataDir,
    printed: lines,
    api(path, init = {}) {
      const { json, token: override, ...rest } = init;
      const headers = new Headers(rest.headers);
      const bearer = override === undefined ? token : override;
      if (bearer) headers.set("authorization", `Bearer ${bearer}`);
      if (json !== undefined) headers.set("content-type", "application/json");
      return fetch(`${server.url}${path}`, {
        ...rest,
        headers,
        body: json !== undefined ? JSON.stringify(json) : rest.body,
      });
    },
    async stop() {
      await server.close();
      await ctx.close();
    },
  };
}
