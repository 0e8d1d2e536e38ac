/**
 * `toolhost mcp-servers` through the CLI program (main(argv) in this process) with real MCP server processes: a
 * stored server and a config-file server, their status, tools and removal.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
// The commands run through main(argv) in this process (the bin as a process is covered in test/cli/).
import { runCliInProcess as runCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/server.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp/fixture-server.mjs", import.meta.url));

describe("toolhost mcp-servers", () => {
  it("add says what it needs: a command or --url, and not both", async () => {
    const env = { TOOLHOST_DATA_DIR: tempDir() };
    const neither = await runCli(["mcp-servers", "add", "x"], env);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(/error: Give the server's command \(after --\) or --url\./);
    expect(neither.stderr).not.toContain("not both");
    const both = await runCli(["mcp-servers", "add", "x", "--url", "http://127.0.0.1:1/mcp", "--", "echo"], env);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/not both/);
  });

  it("add of a server that does not connect says it was stored anyway and how to check or remove it", async () => {
    const env = { TOOLHOST_DATA_DIR: tempDir(), TOOLHOST_LOG_LEVEL: "fatal" };
    const added = await runCli(["mcp-servers", "add", "down", "--url", "http://127.0.0.1:9/mcp"], env);
    expect(added.code).toBe(1);
    expect(added.stdout).toContain("Added down: failed");
    expect(added.stdout).toContain("toolhost mcp-servers status down");
    expect(added.stdout).toContain("toolhost mcp-servers remove down");
    const listed = await runCli(["mcp-servers", "list", "--json"], env);
    expect(listed.stdout).toContain('"down"');
  });

  it("adds, lists, checks, uses and removes servers", async () => {
    const dataDir = tempDir();
    const configDir = tempDir();
    const config = join(configDir, "config.json");
    const starts = join(configDir, "starts.log");
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          filed: {
            command: process.execPath,
            args: [FIXTURE],
            trusted: true,
            env: { FIXTURE_START_LOG: starts, FIXTURE_LABEL: "filed" },
          },
        },
      }),
    );
    const env = { TOOLHOST_DATA_DIR: dataDir, TOOLHOST_CONFIG: config };
    /** The servers started since the last look, in order. */
    const started = () => {
      const lines = existsSync(starts) ? readFileSync(starts, "utf8").split("\n").filter(Boolean) : [];
      rmSync(starts, { force: true });
      return lines.sort();
    };

    const added = await runCli(
      [
        "mcp-servers",
        "add",
        "stored",
        "--env",
        `FIXTURE_START_LOG=${starts}`,
        "--env",
        "FIXTURE_LABEL=stored",
        "--",
        process.execPath,
        FIXTURE,
      ],
      env,
    );
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(added.stdout).toContain("Added stored: connected");
    expect(added.stdout).toContain("mcp__stored__echo");
    // `add` checks the server it adds; the others are not started for it.
    expect(started()).toEqual(["stored"]);

    const list = await runCli(["mcp-servers", "list", "--json"], env);
    const servers = JSON.parse(list.stdout).servers as { name: string; source: string; trusted: boolean }[];
    expect(servers).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "filed", source: "config-file", trusted: true }),
        expect.objectContaining({ name: "stored", source: "database", trusted: false }),
      ]),
    );

    const status = await runCli(["mcp-servers", "status", "--json"], env);
    expect(status.code).toBe(0);
    const states = JSON.parse(status.stdout).servers as { name: string; state: string; warnings: string[] }[];
    expect(states.map((s) => [s.name, s.state])).toEqual([
      ["filed", "connected"],
      ["stored", "connected"],
    ]);
    expect(started()).toEqual(["filed", "stored"]);

    expect((await runCli(["settings", "set", "mcp__filed__echo", "--enable"], env)).code).toBe(0);
    const called = await runCli(["call", "mcp__filed__echo", '{"text":"from the cli"}'], env);
    expect(called.code).toBe(0);
    expect(JSON.parse(called.stdout)).toMatchObject({ source: "mcp:filed", text: "echo: from the cli" });
    const settings = JSON.parse((await runCli(["settings", "get", "mcp__filed__echo", "--json"], env)).stdout);
    expect(settings.external).toMatchObject({ server: "filed", trusted: true });
    // A command about one imported tool starts only the server its name names.
    expect(started()).toEqual(["filed", "filed", "filed"]);

    const refused = await runCli(["mcp-servers", "remove", "filed"], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("config file");
    expect((await runCli(["mcp-servers", "remove", "stored"], env)).code).toBe(0);
    const after = JSON.parse((await runCli(["mcp-servers", "list", "--json"], env)).stdout);
    expect(after.servers.map((s: { name: string }) => s.name)).toEqual(["filed"]);
  }, 180_000);
});
