/**
 * `toolhost doctor` as a user runs it: one line per check, keys never printed, exit code says healthy or not. The
 * first report comes from the bin as a process; the other runs go through the same main(argv) in this process.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, runCliInProcess } from "../helpers/cli.js";
import { tempDir } from "../helpers/server.js";

interface Report {
  healthy: boolean;
  checks: { id: string; status: string; detail: string }[];
}
const byId = (report: Report, id: string) => report.checks.find((c) => c.id === id);

describe("toolhost doctor", () => {
  it("reports data directory, database with migrations, providers without keys, ripgrep, shells, admins; exit 0", async () => {
    const dataDir = join(tempDir(), "data");
    const secret = "sk-doctor-must-never-print-this";
    const config = join(tempDir(), "config.json");
    writeFileSync(config, JSON.stringify({ providers: { anthropic: { apiKey: "sk-ant-from-file-secret" } } }));
    const env = { TOOLHOST_DATA_DIR: dataDir, OPENAI_API_KEY: secret, TOOLHOST_CONFIG: config, GEMINI_API_KEY: "" };
    const run = await runCli(["doctor", "--json"], env);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).not.toContain(secret);
    expect(run.stdout).not.toContain("sk-ant-from-file-secret");
    const report = JSON.parse(run.stdout) as Report;
    expect(report.healthy).toBe(true);
    expect(byId(report, "data-dir")).toMatchObject({ status: "ok", detail: expect.stringContaining(dataDir) });
    expect(byId(report, "data-dir")?.detail).toContain("from TOOLHOST_DATA_DIR");
    expect(byId(report, "database")?.detail).toMatch(/^sqlite .*toolhost\.db.*migrations (\d+)\/\1 applied/);
    // Admins see where spills are (users and models only ever see spill:<id> names).
    expect(byId(report, "spills")).toMatchObject({
      status: "ok",
      detail: expect.stringContaining(`0 in the database (0.0 MiB); this instance's cache ${join(dataDir, "spill")}`),
    });
    expect(byId(report, "provider.openai")).toMatchObject({
      status: "ok",
      detail: expect.stringContaining("OPENAI_API_KEY"),
    });
    expect(byId(report, "provider.anthropic")).toMatchObject({ status: "ok", detail: expect.stringContaining(config) });
    expect(byId(report, "provider.gemini")).toMatchObject({
      status: "warn",
      detail: expect.stringContaining("GEMINI_API_KEY"),
    });
    expect(byId(report, "ripgrep")?.detail).toMatch(/ripgrep \d+/);
    expect(byId(report, "shell.bash")?.detail).toMatch(/bash/);
    // bwrap works on this machine (the sandbox's own tests need it too).
    expect(byId(report, "sandbox")).toMatchObject({ status: "ok", detail: expect.stringContaining("bubblewrap") });
    expect(byId(report, "admins")?.detail).toContain("local");
    expect(byId(report, "mcp")).toMatchObject({ status: "ok", detail: "none configured" });

    expect(byId(report, "shell.bash")?.detail).toContain("off for local: `toolhost settings set bash --enable`");

    // What it says follows the settings: enabled for the CLI's user once enabled.
    expect((await runCliInProcess(["settings", "set", "bash", "--enable"], env)).code).toBe(0);
    const text = await runCliInProcess(["doctor", "--no-mcp"], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^ok {3}data directory +\//m);
    expect(text.stdout).toMatch(/^ok {3}shell bash +\S+ \(tool "bash" available; enabled for local\)$/m);
    expect(text.stdout).toMatch(/Healthy\.$/m);
  });

  it("says that openai-chat needs only OPENAI_BASE_URL for a local server without a key", async () => {
    const config = join(tempDir(), "config.json");
    writeFileSync(config, "{}");
    const env = {
      TOOLHOST_DATA_DIR: join(tempDir(), "data"),
      TOOLHOST_CONFIG: config,
      OPENAI_API_KEY: "",
      OPENAI_BASE_URL: "",
    };
    const report = JSON.parse((await runCliInProcess(["doctor", "--json", "--no-mcp"], env)).stdout) as Report;
    expect(byId(report, "provider.openai-chat")).toMatchObject({
      status: "warn",
      detail: expect.stringContaining("for a local server that needs no key, OPENAI_BASE_URL alone"),
    });
    expect(byId(report, "provider.openai")?.detail).not.toContain("OPENAI_BASE_URL");
  });

  it("names every malformed TOOLHOST_* variable on one line and still runs every other check", async () => {
    const run = await runCli(["doctor", "--json", "--no-mcp"], {
      TOOLHOST_DATA_DIR: join(tempDir(), "data"),
      TOOLHOST_MAX_BODY_BYTES: "lots",
      TOOLHOST_TURN_LEASE_MS: "-1",
    });
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as Report;
    const config = byId(report, "config");
    expect(config?.status).toBe("fail");
    expect(config?.detail).toContain("TOOLHOST_MAX_BODY_BYTES");
    expect(config?.detail).toContain("TOOLHOST_TURN_LEASE_MS");
    for (const id of ["data-dir", "ripgrep", "shell.bash", "sandbox", "chat-roots", "admins"])
      expect(byId(report, id), id).toBeDefined();
    // The database opens on the defaults too: its line is about the database, not a repeat of the config error.
    expect(byId(report, "database")).toMatchObject({ status: "ok", detail: expect.stringMatching(/^sqlite /) });
  });

  it("a data directory that cannot be created is reported at once, not waited on", async () => {
    // Creating a directory under /proc fails with ENOENT forever: a recursive mkdir there never returned.
    const run = await runCli(["doctor", "--json", "--no-mcp"], { TOOLHOST_DATA_DIR: "/proc/toolhost-none/data" });
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as Report;
    expect(byId(report, "data-dir")).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("cannot be created"),
    });
  });

  it("a data directory that is a file fails the check and the exit code; a broken MCP server is a warning", async () => {
    const file = join(tempDir(), "not-a-dir");
    writeFileSync(file, "x");
    const bad = await runCliInProcess(["doctor", "--json", "--no-mcp"], { TOOLHOST_DATA_DIR: file });
    expect(bad.code).toBe(1);
    const report = JSON.parse(bad.stdout) as Report;
    expect(report.healthy).toBe(false);
    expect(byId(report, "data-dir")).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("not a directory"),
    });
    expect(byId(report, "database")?.status).toBe("fail");
    const noSandbox = await runCliInProcess(["doctor", "--json", "--no-mcp"], {
      TOOLHOST_DATA_DIR: join(tempDir(), "d"),
      TOOLHOST_BWRAP: "/definitely/not/bwrap",
    });
    expect(byId(JSON.parse(noSandbox.stdout) as Report, "sandbox")?.status).toBe("warn");

    const config = join(tempDir(), "config.json");
    writeFileSync(config, JSON.stringify({ mcpServers: { broken: { command: "/definitely/not/a/server" } } }));
    const withMcp = await runCliInProcess(["doctor", "--json"], {
      TOOLHOST_DATA_DIR: join(tempDir(), "d"),
      TOOLHOST_CONFIG: config,
    });
    const mcp = byId(JSON.parse(withMcp.stdout) as Report, "mcp.broken");
    expect(mcp).toMatchObject({ status: "warn", detail: expect.stringMatching(/^failed/) });
    expect(withMcp.code).toBe(0);
  });
});
