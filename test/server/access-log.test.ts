/** One JSON access line per request at info; a missing provider key is a warning with a hint, not an error. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../helpers/runtime.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

describe("HTTP access log", () => {
  let server: TestServer;
  let logger: ReturnType<typeof recordingLogger>;
  const saved = { ...process.env };
  beforeAll(async () => {
    delete process.env.ANTHROPIC_API_KEY;
    process.env.TOOLHOST_CONFIG = `${tempDir()}/none.json`;
    logger = recordingLogger();
    server = await startTestServer({ logger });
  });
  afterAll(async () => {
    await server?.stop();
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  });
  const access = () =>
    logger.lines.filter((l) => l.level === "info" && (l.obj as { type?: string }).type === "access").map((l) => l.obj);

  it("logs method, route, status, duration, user and request id for each request, 401 and 404 included", async () => {
    logger.lines.length = 0;
    const ok = await server.api("/api/settings/tools", { headers: { "x-request-id": "trace-42" } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-request-id")).toBe("trace-42");
    const missing = await server.api("/api/chats/nope");
    expect(missing.status).toBe(404);
    const generated = missing.headers.get("x-request-id");
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);
    expect((await server.api("/api/chats", { token: "th_wrong" })).status).toBe(401);
    const lines = access();
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({
      method: "GET",
      route: "/api/settings/tools",
      status: 200,
      user: "local",
      requestId: "trace-42",
    });
    expect(typeof (lines[0] as { durationMs: unknown }).durationMs).toBe("number");
    expect(lines[1]).toMatchObject({
      route: "/api/chats/:id",
      path: "/api/chats/nope",
      status: 404,
      requestId: generated,
    });
    expect(lines[2]).toMatchObject({ status: 401, user: null });
  });

  it("a chat whose provider has no key: 503 with the variable named, logged as a warning without a stack", async () => {
    logger.lines.length = 0;
    const turn = await server.api("/api/chats", {
      method: "POST",
      json: { provider: "anthropic", model: "m", workingDirectory: tempDir() },
    });
    expect(turn.status).toBe(503);
    expect(((await turn.json()) as { error: { message: string } }).error.message).toContain("ANTHROPIC_API_KEY");
    expect(logger.lines.filter((l) => l.level === "error")).toEqual([]);
    const warning = logger.lines.find((l) => l.level === "warn");
    expect(warning?.obj).toMatchObject({
      code: "provider_not_configured",
      hint: expect.stringContaining("ANTHROPIC_API_KEY"),
    });
    expect(JSON.stringify(warning?.obj)).not.toMatch(/\n\s+at /);
  });
});
