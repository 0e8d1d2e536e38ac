/**
 * The bash and shell_exec tools through a real ToolRuntime (own registry, so other built-ins do not matter):
 * allowlist, argv-only execution, environment filtering, cwd containment, audit log, timeout and abort.
 */
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { AccessDeniedError } from "../../src/core/errors.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import { trigger } from "../../src/core/trigger.js";
import { deriveStrictParameters } from "../../src/providers/tool-mapper.js";
import { openDatabase } from "../../src/storage/database.js";
import { SqlAuditLog } from "../../src/storage/repositories.js";
import { STRICT_SHELL_COMMAND_ALLOWLIST } from "../../src/tools/shell/allowlist.js";
import { shellExecTool } from "../../src/tools/shell/shell-exec.js";
import { buildShellTool, findInterpreter } from "../../src/tools/shell/shell-tool.js";
import { recordingLogger } from "../helpers/runtime.js";
import { readPids, survivorsAfter, tempDir, waitForPids } from "./helpers.js";

const BASH = findInterpreter("bash") as string;
const USER = "u1";
let root: string;
let cleanup: () => void;
let wd: string;

function setup(parameters: Record<string, Record<string, unknown>> = {}) {
  const registry = new ToolRegistryStore();
  registry.register(buildShellTool("bash", BASH));
  registry.register(shellExecTool);
  const store = new MemoryToolSettingsStore();
  const audit = new MemoryAuditSink();
  const runtime = new ToolRuntime({ registry, store, audit, logger: recordingLogger(), dataDir: join(root, "data") });
  const enable = async () => {
    for (const name of ["bash", "shell_exec"]) {
      await store.save(USER, name, { enabled: true, parameters: parameters[name] ?? {} });
    }
  };
  const call = (name: string, args: unknown, signal?: AbortSignal) =>
    runtime.executeTool(name, args, { userId: USER, chatId: "c1", workingDirectory: wd, signal });
  return { runtime, store, audit, enable, call };
}

const savedEnv = { ...process.env };
beforeAll(() => {
  ({ dir: root, cleanup } = tempDir());
  wd = join(root, "project");
  mkdirSync(join(wd, "sub"), { recursive: true });
});
afterAll(() => cleanup());
afterEach(() => {
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
});

describe("defaults", () => {
  it("shell tools are off by default and their schemas are plain JSON Schema", async () => {
    const { call } = setup();
    const outcome = await call("shell_exec", { argv: ["echo", "hi"] });
    expect(outcome).toMatchObject({ ok: false, error: { code: "access_denied" } });
    for (const tool of [buildShellTool("bash", BASH), shellExecTool]) {
      expect(tool.settings.enabledByDefault).toBe(false);
      expect(tool.managesOwnTimeout).toBe(true);
      const text = JSON.stringify(tool.definition.parameters);
      expect(tool.definition.parameters.type).toBe("object");
      expect(text).not.toMatch(/"(oneOf|anyOf|allOf|\$ref|not)"/);
      expect(deriveStrictParameters(tool.definition.parameters)).toMatchObject({ strict: true, problems: [] });
    }
  });
});

describe("function-id API", () => {
  it("trigger('tool::shell_exec', …) returns {stdout, stderr, exitCode} and throws classified errors", async () => {
    const { runtime } = setup();
    const options = { runtime, userId: USER, workingDirectory: wd };
    const result = await trigger("tool::shell_exec", { argv: ["echo", "hello"], cwd: "sub" }, options);
    expect(result).toMatchObject({ stdout: "hello\n", stderr: "", exitCode: 0 });
    await expect(trigger("tool::shell_exec", { argv: ["/bin/sh", "-c", "id"] }, options)).rejects.toBeInstanceOf(
      AccessDeniedError,
    );
  });
});

describe("shell_exec allowlist (hostile)", () => {
  it("refuses paths as argv[0]: /bin/sh, ./git, ../x/git", async () => {
    const { enable, call, audit } = setup();
    await enable();
    for (const argv0 of ["/bin/sh", "./git", "../x/git", "/usr/bin/git", "sub/git"]) {
      const outcome = await call("shell_exec", { argv: [argv0, "-c", "echo pwned"] });
      expect(outcome, argv0).toMatchObject({
        ok: false,
        error: { code: "access_denied", details: { rule: "not_a_bare_name" } },
      });
    }
    expect(audit.entries.map((e) => e.termination)).toEqual(Array(5).fill("refused"));
    expect(audit.entries[0]).toMatchObject({
      userId: USER,
      chatId: "c1",
      tool: "shell_exec",
      command: ["/bin/sh", "-c", "echo pwned"],
    });
  });

  it("refuses names not on the allowlist (sh, bash, rm)", async () => {
    const { enable, call } = setup();
    await enable();
    for (const argv0 of ["sh", "bash", "rm", "GIT"]) {
      const outcome = await call("shell_exec", { argv: [argv0, "--version"] });
      expect(outcome, argv0).toMatchObject({
        ok: false,
        error: { code: "access_denied", details: { rule: "not_allowlisted" } },
      });
    }
  });

  it("a `git` planted in the working directory is never run, even with . and the cwd on PATH", async () => {
    const { enable, call } = setup();
    await enable();
    const fake = join(wd, "git");
    writeFileSync(fake, `#!/bin/sh\ntouch "${join(wd, "PWNED")}"\necho fake git\n`);
    chmodSync(fake, 0o755);
    process.env.PATH = `.:${wd}:${savedEnv.PATH}`;
    const outcome = await call("shell_exec", { argv: ["git", "--version"] });
    expect(outcome).toMatchObject({ ok: true, result: { exitCode: 0, termination: "exited" } });
    expect((outcome as { result: { stdout: string } }).result.stdout).toMatch(/^git version \d/);
    process.env.PATH = `.:${wd}`;
    const missing = await call("shell_exec", { argv: ["git", "--version"] });
    expect(missing).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(existsSync(join(wd, "PWNED"))).toBe(false);
  });

  it("a PATH entry that links into the working directory does not make a planted binary runnable", async () => {
    const { enable, call } = setup();
    await enable();
    const planted = join(wd, "jq");
    writeFileSync(planted, `#!/bin/sh\ntouch "${join(wd, "PWNED-jq")}"\n`);
    chmodSync(planted, 0o755);
    const bin = join(root, "linkbin");
    mkdirSync(bin, { recursive: true });
    symlinkSync(planted, join(bin, "jq"));
    symlinkSync(wd, join(root, "wd-link"));
    process.env.PATH = `${bin}:${join(root, "wd-link")}`;
    const outcome = await call("shell_exec", { argv: ["jq", "--version"] });
    expect(outcome).toMatchObject({ ok: false, error: { code: "not_found" } });
    expect(existsSync(join(wd, "PWNED-jq"))).toBe(false);
  });

  it("shell metacharacters in arguments are inert", async () => {
    const { enable, call } = setup();
    await enable();
    const args = [
      "a; touch PWNED1",
      "$(touch PWNED2)",
      "`touch PWNED3`",
      "|",
      "cat",
      ">",
      "PWNED4",
      "&&",
      "*",
      "$HOME",
      "'\"",
      "\n",
    ];
    const outcome = await call("shell_exec", { argv: ["echo", ...args] });
    expect(outcome).toMatchObject({ ok: true, result: { stdout: `${args.join(" ")}\n`, exitCode: 0 } });
    for (const f of ["PWNED1", "PWNED2", "PWNED3", "PWNED4"]) expect(existsSync(join(wd, f))).toBe(false);
  });

  it("the strict preset is one setting away and refuses interpreters", async () => {
    const { enable, call } = setup({ shell_exec: { allowlistPreset: "strict" } });
    await enable();
    for (const argv0 of ["python3", "node", "env", "awk", "find", "make", "git", "sed", "tar", "sort", "curl"]) {
      expect(STRICT_SHELL_COMMAND_ALLOWLIST).not.toContain(argv0);
      const outcome = await call("shell_exec", { argv: [argv0, "--version"] });
      expect(outcome, argv0).toMatchObject({ ok: false, error: { code: "access_denied" } });
    }
    expect(await call("shell_exec", { argv: ["ls"] })).toMatchObject({ ok: true });
  });

  it("refuses a NUL byte in an argument", async () => {
    const { enable, call } = setup();
    await enable();
    expect(await call("shell_exec", { argv: ["echo", "a\u0000b"] })).toMatchObject({
      ok: false,
      error: { code: "validation_failed" },
    });
    expect(await call("bash", { command: "echo a\u0000b" })).toMatchObject({
      ok: false,
      error: { code: "validation_failed" },
    });
    expect(await call("bash", { command: "  " })).toMatchObject({ ok: false, error: { code: "validation_failed" } });
  });

  it("a command too long for the operating system is refused as an argument error that says what to do", async () => {
    const { enable, call } = setup();
    await enable();
    // Linux takes at most 128 KiB in one argument (MAX_ARG_STRLEN); the exec fails with E2BIG past it.
    const long = "a".repeat(200_000);
    for (const [tool, args] of [
      ["bash", { command: `: ${long}` }],
      ["shell_exec", { argv: ["echo", long] }],
    ] as const) {
      const outcome = await call(tool, args);
      expect(outcome, tool).toMatchObject({ ok: false, error: { code: "validation_failed" } });
      const message = outcome.ok ? "" : outcome.error.message;
      expect(message).toMatch(/too long/);
      expect(message).toContain("200,");
      expect(message).toMatch(/file/);
    }
  });
});

describe("environment (hostile)", () => {
  it("server secrets never reach shell_exec or bash children", async () => {
    process.env.FOO_API_KEY = "sk-secret-foo";
    process.env.GITHUB_TOKEN = "ghp_secret_token";
    process.env.DATABASE_URL = "postgres://user:pw@db/x";
    process.env.AWS_SECRET_ACCESS_KEY = "aws-secret";
    process.env.BASH_ENV = join(wd, "evil.sh");
    const { enable, call } = setup();
    await enable();
    const viaExec = await call("shell_exec", { argv: ["env"] });
    const viaBash = await call("bash", { command: "env; echo done" });
    for (const outcome of [viaExec, viaBash]) {
      expect(outcome.ok).toBe(true);
      const stdout = (outcome as { result: { stdout: string } }).result.stdout;
      expect(stdout).toMatch(/^PATH=/m);
      for (const needle of [
        "sk-secret-foo",
        "ghp_secret",
        "user:pw",
        "aws-secret",
        "FOO_API_KEY",
        "GITHUB_TOKEN",
        "BASH_ENV",
      ]) {
        expect(stdout).not.toContain(needle);
      }
    }
  });
});

describe("cwd containment", () => {
  it("defaults to the chat working directory and accepts a subdirectory", async () => {
    const { enable, call } = setup();
    await enable();
    expect(await call("bash", { command: "pwd" })).toMatchObject({ ok: true, result: { stdout: `${wd}\n` } });
    expect(await call("shell_exec", { argv: ["ls"], cwd: "sub" })).toMatchObject({ ok: true, result: { exitCode: 0 } });
  });

  it("refuses a cwd outside the working directory or on the denied list", async () => {
    const { enable, call, audit } = setup({ bash: { deniedPaths: [join(wd, "sub")] } });
    await enable();
    for (const cwd of ["..", "/etc", "~"]) {
      expect(await call("shell_exec", { argv: ["ls"], cwd }), cwd).toMatchObject({
        ok: false,
        error: { code: "access_denied" },
      });
      expect(await call("bash", { command: "ls", cwd }), cwd).toMatchObject({
        ok: false,
        error: { code: "access_denied" },
      });
    }
    expect(await call("bash", { command: "ls", cwd: "sub" })).toMatchObject({
      ok: false,
      error: { code: "access_denied" },
    });
    expect(await call("bash", { command: "ls", cwd: "missing" })).toMatchObject({
      ok: false,
      error: { code: "not_found" },
    });
    symlinkSync("/etc", join(wd, "etc-link"));
    writeFileSync(join(wd, "a-file"), "x");
    expect(await call("shell_exec", { argv: ["ls"], cwd: "etc-link" })).toMatchObject({
      ok: false,
      error: { code: "access_denied" },
    });
    expect(await call("bash", { command: "ls", cwd: "a-file" })).toMatchObject({
      ok: false,
      error: { code: "validation_failed" },
    });
    expect(audit.entries.every((e) => e.termination === "refused")).toBe(true);
  });
});

describe.concurrent("timeouts and aborts through the runtime", () => {
  // These tests read host pids from files outside the working directory, so they run unsandboxed; the same
  // guarantees inside the sandbox are tested in sandbox.test.ts. Each has its own runtime and pid files, so they
  // run concurrently.
  it("a user cancel is reported as aborted (not timeout) and kills every process", async () => {
    const { enable, call, audit } = setup({ bash: { sandbox: "off" } });
    await enable();
    for (let i = 0; i < 2; i++) {
      const p = join(root, `bash-abort-pids-${i}`);
      const controller = new AbortController();
      const running = call(
        "bash",
        { command: `sleep 100 & echo $! >> ${p}; nohup sleep 101 >/dev/null 2>&1 & echo $! >> ${p}; sleep 100` },
        controller.signal,
      );
      await waitForPids(p, 2);
      controller.abort();
      const outcome = await running;
      expect(outcome).toMatchObject({ ok: false, error: { code: "aborted" } });
      expect(JSON.stringify(outcome)).not.toMatch(/timeout|timed out/i);
      // The runtime answers at once; the tool finishes killing in the background.
      expect(await survivorsAfter(readPids(p), 2000)).toEqual([]);
    }
    // The audit lines are recorded once the kills are done, in the background.
    await vi.waitFor(() => expect(audit.entries.filter((e) => e.termination === "aborted")).toHaveLength(2));
  });

  // shell_exec's timeout argument and bash's timeoutSeconds at its minimum (5 s) killing the group with the timeout
  // message are checked in test/tools/time-budget.test.ts, with the other tools' budget checks.

  it("bash returns non-zero exits as results with termination and truncation flags", async () => {
    const { enable, call } = setup({ bash: { maxOutputBytes: 1024 } });
    await enable();
    const outcome = await call("bash", { command: "seq 1 5000; exit 7" });
    expect(outcome).toMatchObject({
      ok: true,
      result: { exitCode: 7, termination: "exited", truncated: true, signal: null },
    });
    const stdout = (outcome as { result: { stdout: string } }).result.stdout;
    expect(Buffer.byteLength(stdout)).toBeLessThanOrEqual(1024);
    expect(stdout.endsWith("4999\n5000\n")).toBe(true);
  });
});

// Runs concurrently with the timeout and abort tests above (its own database and runtime).
describe.concurrent("audit log in the database", () => {
  it("records argv, cwd, exit and termination in audit_log, listed newest first per user", async () => {
    const database = await openDatabase({ dataDir: join(root, "db") });
    try {
      const audit = new SqlAuditLog(database.db);
      const registry = new ToolRegistryStore();
      registry.register(shellExecTool);
      registry.register(buildShellTool("bash", BASH));
      const store = new MemoryToolSettingsStore();
      await store.save(USER, "shell_exec", { enabled: true, parameters: {} });
      await store.save(USER, "bash", { enabled: true, parameters: {} });
      const runtime = new ToolRuntime({
        registry,
        store,
        audit,
        logger: recordingLogger(),
        dataDir: join(root, "data"),
      });
      const ctx = { userId: USER, chatId: "c9", workingDirectory: wd };
      await runtime.executeTool("shell_exec", { argv: ["echo", "a b"] }, ctx);
      await runtime.executeTool("shell_exec", { argv: ["/bin/sh"] }, ctx);
      await runtime.executeTool("bash", { command: "exit 4" }, ctx);
      const rows = await audit.list({ userId: USER, limit: 10 });
      expect(rows).toHaveLength(3);
      const byTool = rows.map((r) => [r.tool, r.command, r.exitCode, r.termination]);
      expect(byTool).toEqual(
        expect.arrayContaining([
          ["shell_exec", ["echo", "a b"], 0, "exited"],
          ["shell_exec", ["/bin/sh"], null, "refused"],
          ["bash", "exit 4", 4, "exited"],
        ]),
      );
      expect(rows.find((r) => r.tool === "bash")).toMatchObject({ userId: USER, chatId: "c9", cwd: wd });
    } finally {
      await database.close();
    }
  });

  it("records the command redacted and bounded like the arguments: no secret, no megabyte line", async () => {
    const database = await openDatabase({ dataDir: join(root, "db-redact") });
    try {
      const audit = new SqlAuditLog(database.db);
      const registry = new ToolRegistryStore();
      registry.register(shellExecTool);
      registry.register(buildShellTool("bash", BASH));
      const store = new MemoryToolSettingsStore();
      await store.save(USER, "shell_exec", { enabled: true, parameters: {} });
      await store.save(USER, "bash", { enabled: true, parameters: {} });
      const runtime = new ToolRuntime({
        registry,
        store,
        audit,
        logger: recordingLogger(),
        dataDir: join(root, "data"),
      });
      const ctx = { userId: USER, chatId: "c9", workingDirectory: wd };
      const secret = "hunter2-s3cr3t-value";
      const long = "a".repeat(300_000);
      await runtime.executeTool("bash", { command: `echo x --password=${secret} >/dev/null; : ${long}` }, ctx);
      await runtime.executeTool("shell_exec", { argv: ["echo", `--password=${secret}`, long] }, ctx);
      // Refused before it ran (the allowlist), recorded all the same.
      await runtime.executeTool("shell_exec", { argv: ["/bin/echo", `--password=${secret}`] }, ctx);
      const rows = await audit.list({ userId: USER, limit: 10 });
      expect(rows).toHaveLength(3);
      for (const row of rows) {
        const line = JSON.stringify(row);
        expect(line).not.toContain(secret);
        expect(line.length).toBeLessThan(80_000);
        expect(JSON.stringify(row.command)).toContain("[redacted]");
      }
    } finally {
      await database.close();
    }
  });
});
