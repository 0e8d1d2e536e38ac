/**
 * The SQLite database file kept outside the data directory (TOOLHOST_DATABASE_URL=sqlite:PATH): it is still
 * Toolhost's data, so tools refuse it (as they refuse a deniedPaths entry) and the shell sandbox hides it; a new file is private
 * (mode 0600).
 */
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { sqliteFiles } from "../../src/storage/database.js";
import { tempDir } from "../shell/helpers.js";

describe("a database file outside the data directory", () => {
  it("is created with mode 0600 and is a protected path, with its -wal/-shm/-journal siblings", async () => {
    const { dir, cleanup } = tempDir("toolhost-dbfile-");
    onTestFinished(cleanup);
    const elsewhere = join(dir, "elsewhere");
    mkdirSync(elsewhere);
    const file = join(elsewhere, "th.db");
    const ctx = await createAppContext({ dataDir: join(dir, "data"), databaseUrl: `sqlite:${file}` });
    onTestFinished(() => ctx.close());

    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(`${file}-wal`).mode & 0o777).toBe(0o600);
    expect(ctx.runtime.protectedPaths).toEqual(expect.arrayContaining(sqliteFiles(file)));

    const outcome = await ctx.runtime.executeTool(
      "read_file",
      { path: file, view: "hex" },
      { userId: "local", chatId: "c1", workingDirectory: elsewhere },
    );
    expect(outcome.ok).toBe(false);
    // Refused like a deniedPaths entry: the answer does not single out Toolhost's own files.
    expect(outcome).toMatchObject({ ok: false, error: { code: "access_denied", details: { rule: "deniedPaths" } } });
    const wal = await ctx.runtime.executeTool(
      "read_file",
      { path: `${file}-wal`, view: "hex" },
      { userId: "local", chatId: "c1", workingDirectory: elsewhere },
    );
    expect(wal).toMatchObject({ ok: false, error: { code: "access_denied", details: { rule: "deniedPaths" } } });
  });

  it("the config file (provider keys, data-source passwords) is protected the same way, wherever it is", async () => {
    const { dir, cleanup } = tempDir("toolhost-config-");
    onTestFinished(cleanup);
    const config = join(dir, "work", "toolhost.json");
    mkdirSync(join(dir, "work"));
    writeFileSync(config, JSON.stringify({ providers: { openai: { apiKey: "sk-secret" } } }));
    const ctx = await createAppContext({
      dataDir: join(dir, "data"),
      env: { ...process.env, TOOLHOST_CONFIG: config },
    });
    onTestFinished(() => ctx.close());
    expect(ctx.runtime.protectedPaths).toContain(config);
    const outcome = await ctx.runtime.executeTool(
      "read_file",
      { path: "toolhost.json" },
      { userId: "local", chatId: "c1", workingDirectory: join(dir, "work") },
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: "access_denied", details: { rule: "deniedPaths" } } });
    expect(JSON.stringify(outcome)).not.toContain("sk-secret");
  });
});
