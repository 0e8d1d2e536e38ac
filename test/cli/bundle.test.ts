/**
 * The shipped CLI is bundled (esbuild, code splitting), so modules loaded on first use must work from the bundle
 * too, not only from the compiled tree the library tests import: a dependency's shape can differ there (a
 * CommonJS package's named exports may sit only on `default`). Each case exercises one lazily loaded dependency
 * through the real bin.
 */
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, runCliInProcess } from "../helpers/cli.js";
import { tempDir } from "../helpers/server.js";

describe("bundled CLI: lazily loaded dependencies", () => {
  const env = { TOOLHOST_DATA_DIR: tempDir() };
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(
        "<html><head><title>t</title></head><body><main><h1>Bundled fetch works</h1><p>hello</p></main></body></html>",
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => server?.close());

  it("web_fetch (undici) fetches an allowed loopback page", async () => {
    // The setting is made in this process (main(argv)); the call that loads undici runs the bundled bin.
    const set = await runCliInProcess(["settings", "set", "web_fetch", 'allowedHosts=["127.0.0.1"]'], env);
    expect(set.code, set.stderr).toBe(0);
    const run = await runCli(["call", "web_fetch", JSON.stringify({ url: `http://127.0.0.1:${port}/` })], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("Bundled fetch works");
  });

  it("web_fetch refuses a loopback address by the SSRF guard, not by a loading failure", async () => {
    const other = { TOOLHOST_DATA_DIR: tempDir() };
    const run = await runCli(["call", "web_fetch", JSON.stringify({ url: `http://127.0.0.1:${port}/` })], other);
    expect(run.code).toBe(1);
    // The failed call's one line: the guard's classified refusal, not a module that failed to load.
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/^error: access_denied: The address 127.0.0.1 is refused: loopback address\./);
    expect(run.stderr).not.toMatch(/Cannot find module|ERR_MODULE_NOT_FOUND/);
  });
});
