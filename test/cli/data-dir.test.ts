/**
 * One data directory wherever a command runs: TOOLHOST_DATA_DIR, else $XDG_DATA_HOME/toolhost, else
 * ~/.local/share/toolhost. The CLI runs with a temporary HOME so the real one is never touched.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { chooseDataDir } from "../../src/core/data-dir.js";
import { startCli } from "../e2e/chat-process.js";
// The commands run through main(argv) in this process (with their own working directory and environment); serve,
// whose start line is checked, runs as a process.
import { runCliInProcess as runCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/server.js";

describe("chooseDataDir", () => {
  it("prefers an option, then TOOLHOST_DATA_DIR, then an absolute XDG_DATA_HOME, then ~/.local/share", () => {
    const env = { HOME: "/home/ana", XDG_DATA_HOME: "/xdg", TOOLHOST_DATA_DIR: "/srv/th" };
    expect(chooseDataDir("/opt/d", env)).toEqual({ path: "/opt/d", source: "option" });
    expect(chooseDataDir(undefined, env)).toEqual({ path: "/srv/th", source: "TOOLHOST_DATA_DIR" });
    expect(chooseDataDir(undefined, { ...env, TOOLHOST_DATA_DIR: "" })).toEqual({
      path: "/xdg/toolhost",
      source: "XDG_DATA_HOME",
    });
    // The XDG specification says a relative XDG_DATA_HOME is invalid and must be ignored.
    expect(chooseDataDir(undefined, { HOME: "/home/ana", XDG_DATA_HOME: "rel" })).toEqual({
      path: "/home/ana/.local/share/toolhost",
      source: "home",
    });
  });
});

describe("the CLI uses one data directory wherever it runs", () => {
  it("a setting made in one folder is seen from another; nothing is created in the working folders", async () => {
    const home = tempDir("toolhost-home-");
    const env = { HOME: home, XDG_DATA_HOME: "", TOOLHOST_DATA_DIR: "" };
    const a = tempDir("toolhost-cwd-a-");
    const b = tempDir("toolhost-cwd-b-");
    const set = await runCli(["settings", "set", "get_current_datetime", "--disable"], env, { cwd: a });
    expect(set.stderr).toBe("");
    expect(set.code).toBe(0);
    const tools = await runCli(["tools", "--json"], env, { cwd: b });
    expect(tools.code).toBe(0);
    const listed = JSON.parse(tools.stdout).tools.find((t: { name: string }) => t.name === "get_current_datetime");
    expect(listed.enabled).toBe(false);
    expect(existsSync(join(home, ".local", "share", "toolhost", "toolhost.db"))).toBe(true);
    for (const dir of [a, b]) expect(existsSync(join(dir, ".toolhost"))).toBe(false);
  });

  it("XDG_DATA_HOME is honoured, and serve's start line names the data directory", async () => {
    const home = tempDir("toolhost-home-");
    const xdg = join(home, "xdg");
    mkdirSync(xdg);
    const server = startCli(["serve", "--port", "0"], {
      PATH: process.env.PATH,
      HOME: home,
      XDG_DATA_HOME: xdg,
      TOOLHOST_LOG_LEVEL: "error",
    });
    try {
      await server.waitFor((out) => /Try: curl/.test(out));
      expect(server.stdout()).toContain(`data: ${join(xdg, "toolhost")}`);
      expect(existsSync(join(xdg, "toolhost", "toolhost.db"))).toBe(true);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });

  it("a data directory that cannot be created or is a file is named, with what to set, not a bare errno", async () => {
    const file = join(tempDir(), "a-file");
    writeFileSync(file, "x");
    for (const dataDir of ["/proc/toolhost-none/data", file]) {
      const run = await runCli(["tools"], { TOOLHOST_DATA_DIR: dataDir });
      expect(run.code, dataDir).toBe(1);
      expect(run.stderr, dataDir).toContain(`Cannot open the SQLite database in the data directory ${dataDir}`);
      expect(run.stderr, dataDir).toContain("Set TOOLHOST_DATA_DIR to a directory this user can create or write");
    }
    const url = await runCli(["tools"], { TOOLHOST_DATABASE_URL: `sqlite:${join(file, "t.db")}` });
    expect(url.code).toBe(1);
    expect(url.stderr).toContain(`Cannot open the SQLite database ${join(file, "t.db")}`);
    expect(url.stderr).toContain("Set TOOLHOST_DATABASE_URL to a sqlite: file");
  });

  it("a PostgreSQL database that cannot be reached says what to check, without the password", async () => {
    const run = await runCli(["tools"], { TOOLHOST_DATABASE_URL: "postgres://u:hunter2@127.0.0.1:9/db" });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("Cannot open the postgres database at postgres://u:***@127.0.0.1:9/db");
    expect(run.stderr).toContain("Check that the PostgreSQL server is running");
    expect(run.stderr).not.toContain("hunter2");
  });
});
