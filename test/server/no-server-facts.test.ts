/**
 * No server facts to non-admins: a chat whose provider has no key (503 provider_not_configured) and generate_image's
 * unavailable reason name the variable and the config-file entry to set, never the server's config file path; a cut
 * tool result names its full output by a virtual spill name, never the server's data directory. Admins still see the
 * path in `toolhost doctor` (test/cli/doctor.test.ts).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { providerConfigPath } from "../../src/core/credentials.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

let server: TestServer;
let bob: string;
let configPath: string;
const saved = { ...process.env };

beforeAll(async () => {
  // A config file in a directory whose name no answer may contain.
  configPath = join(tempDir("toolhost-server-facts-"), "secret-dir", "config.json");
  for (const key of ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"])
    delete process.env[key];
  process.env.TOOLHOST_CONFIG = configPath;
  expect(providerConfigPath()).toBe(configPath);
  server = await startTestServer();
  bob = (await server.ctx.tokens.create("bob")).token;
});

afterAll(async () => {
  await server?.stop();
  process.env = saved;
});

describe("what a non-admin learns about the server", () => {
  it("provider_not_configured names the variable and the config-file entry, not the config file's path", async () => {
    const created = await server.api("/api/chats", {
      method: "POST",
      token: bob,
      json: { provider: "anthropic", model: "m" },
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const turn = await server.api(`/api/chats/${id}/messages`, {
      method: "POST",
      token: bob,
      json: { content: "hi" },
    });
    expect(turn.status).toBe(503);
    const body = (await turn.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("provider_not_configured");
    expect(body.error.message).toContain("ANTHROPIC_API_KEY");
    expect(body.error.message).toContain("providers.anthropic.apiKey");
    expect(JSON.stringify(body)).not.toContain("secret-dir");
  });

  it("generate_image's unavailable reason names the variables, not the config file's path", async () => {
    const listed = await server.api("/api/settings/tools/generate_image", { token: bob });
    expect(listed.status).toBe(200);
    const tool = (await listed.json()) as { unavailableReason?: string };
    expect(tool.unavailableReason).toMatch(/OPENAI_API_KEY/);
    const all = await (await server.api("/api/settings/tools", { token: bob })).text();
    expect(all).toContain("OPENAI_API_KEY");
    expect(all).not.toContain("secret-dir");
  });

  it("a cut result names its full output spill:<id>, never the server's data directory", async () => {
    // An admin's call (the admin binds a directory of the server); the point is what the answer names.
    const work = tempDir("toolhost-server-facts-work-");
    writeFileSync(join(work, "big.txt"), `${"line of text\n".repeat(20_000)}`);
    const put = await server.api("/api/settings/tools/grep", {
      method: "PUT",
      json: { parameters: { maxResultBytes: 4096, maxMatchesPerFile: 1000, maxResults: 1000 } },
    });
    expect(put.status).toBe(200);
    const cut = await server.api("/api/tools/grep/execute", {
      method: "POST",
      json: { arguments: { pattern: "line", path: "big.txt" }, workingDirectory: work },
    });
    const text = await cut.text();
    expect(text).toMatch(/"spillFile":"spill:[0-9a-f]{24}"/);
    expect(text).not.toContain(server.dataDir);
  });
});
