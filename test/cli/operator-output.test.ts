/**
 * What an operator reads from the CLI: text that came from users or models is printed with its control characters
 * escaped (no escape sequence reaches the terminal, no newline breaks a table), long bad arguments are cut in error
 * lines, descriptions are cut at word boundaries, and `call` under chat roots binds the current directory, with
 * messages that name CLI flags.
 */
import { mkdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApprovalRequestView } from "../../src/app/approvals/service.js";
import { approvalNote } from "../../src/cli/approval-prompt.js";
import { clip, errorText, printable, table } from "../../src/cli/util.js";
import { evaluateApproval } from "../../src/core/approval/policy.js";
import { AgentRepository } from "../../src/storage/agent-repository.js";
import { buildShellTool } from "../../src/tools/shell/shell-tool.js";
import { runCliInProcess as runCli } from "../helpers/cli.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

const HOSTILE = "\x1b]0;pwned\x07Title\nsecond line\r\u202eevil\u009b";
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe("printing user and model text", () => {
  it("escapes every control character; tables keep one row per record", () => {
    expect(printable(HOSTILE)).toBe("\\x1b]0;pwned\\x07Title\\nsecond line\\r\\u202eevil\\x9b");
    expect(printable("a\nb\tc\x1b", { multiline: true })).toBe("a\nb\tc\\x1b");
    const rendered = table([
      ["ID", "TITLE"],
      ["c1", HOSTILE],
    ]);
    expect(rendered.split("\n")).toHaveLength(2);
    expect(rendered).not.toMatch(RAW_CONTROL);
  });

  it("the approval prompt escapes the command and the reason that quotes it", async () => {
    // The policy's reason quotes the command's words as the shell reads them: $'\e[1A' is a real escape there.
    const verdict = await evaluateApproval(
      buildShellTool("bash", "/bin/bash"),
      { command: "echo $'\\e[1A\\e[2Kls'; rm -rf ~" },
      { enabled: true, values: { approval: "ask", approvalRules: [] } },
      { baseDirectory: "/tmp" },
    );
    expect(verdict.reason).toMatch(RAW_CONTROL);
    const note = approvalNote({
      id: "a1",
      toolCallId: "t1",
      tool: "bash",
      chatId: null,
      preview: "{}",
      subjects: verdict.subjects,
      reason: verdict.reason,
      rule: null,
      allowAlways: false,
      expiresAt: new Date().toISOString(),
      workingDirectory: "/tmp",
    } as unknown as ApprovalRequestView);
    expect(note.body).not.toMatch(RAW_CONTROL);
    expect(note.title).not.toMatch(RAW_CONTROL);
    expect(note.body).toContain("\\x1b[1A");
  });

  it("cuts at a word boundary, and cuts long words in error lines saying how much is left out", () => {
    expect(clip("Reviews the code for obvious mistakes and style", 30)).toBe("Reviews the code for obvious…");
    expect(clip("short text", 30)).toBe("short text");
    expect(clip("x".repeat(50), 10)).toBe(`${"x".repeat(9)}…`);
    const line = errorText(`Expected name=value, got "${"y".repeat(5000)}".`);
    expect(line.length).toBeLessThan(200);
    expect(line).toContain("more characters)");
  });
});

describe("the CLI commands", () => {
  let server: TestServer;
  let env: Record<string, string>;
  beforeAll(async () => {
    server = await startTestServer();
    env = { TOOLHOST_DATA_DIR: server.dataDir };
    await server.ctx.chats.create({ userId: "local", id: "hostile", title: HOSTILE });
    await server.ctx.chats.create({ userId: "local", id: "plain", title: "plain" });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("chats list prints a hostile title escaped, on its own row", async () => {
    const run = await runCli(["chats", "list"], env);
    expect(run.code).toBe(0);
    expect(run.stdout).not.toMatch(RAW_CONTROL);
    expect(run.stdout).toContain("\\x1b]0;pwned\\x07Title\\nsecond line");
    expect(run.stdout.trim().split("\n")).toHaveLength(3);
  });

  it("settings get prints the values compactly; --json the values, --full the descriptor", async () => {
    expect((await runCli(["settings", "set", "grep", "maxResults=7", "--user", "eve"], env)).code).toBe(0);
    const text = await runCli(["settings", "get", "grep", "--user", "eve"], env);
    expect(text.stdout).toMatch(/^grep: enabled\n/);
    expect(text.stdout).toMatch(/^ {2}maxResults = 7 {2}\(locked by an admin\)$/m);
    expect(text.stdout).toMatch(/^ {2}restrictPaths = true {2}\(default\)$/m);
    expect(text.stdout).not.toContain("parameterDescriptors");
    const json = JSON.parse((await runCli(["settings", "get", "grep", "--user", "eve", "--json"], env)).stdout);
    expect(json).toMatchObject({
      name: "grep",
      enabled: true,
      lockedKeys: ["maxResults"],
      parameters: { maxResults: 7 },
    });
    expect(json.parameterDescriptors).toBeUndefined();
    const full = JSON.parse((await runCli(["settings", "get", "grep", "--full"], env)).stdout);
    expect(full.parameterDescriptors.length).toBeGreaterThan(3);
  });

  it("agents list escapes a hostile task; agents show accepts a unique id prefix", async () => {
    const repo = new AgentRepository(server.ctx.database.db);
    const root = await repo.createRoot({
      userId: "local",
      chatId: "plain",
      provider: "openai",
      model: "m",
      task: "root",
      instanceId: "test",
    });
    const limits = { maxDepth: 5, maxSubAgents: 20, maxTreeAgents: 50, maxConcurrent: 4, tokenBudget: 1_000_000 };
    const child = await repo.reserveChild({
      userId: "local",
      parentId: root.id,
      template: "general",
      task: HOSTILE,
      provider: null,
      model: null,
      maxTurns: 1,
      timeMs: 1000,
      instanceId: "test",
      limits,
    });
    const listed = await runCli(["agents", "list"], env);
    expect(listed.stdout).not.toMatch(RAW_CONTROL);
    expect(listed.stdout.trim().split("\n")).toHaveLength(2);
    const shown = await runCli(["agents", "show", child.id.slice(0, 8)], env);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).id).toBe(child.id);
    expect((await runCli(["agents", "show", "ffffffffff"], env)).code).toBe(1);
  });

  it("a long bad argument is cut in the error line", async () => {
    const run = await runCli(["settings", "set", "web_fetch", "z".repeat(20_000)], env);
    expect(run.code).toBe(2);
    expect(run.stderr.length).toBeLessThan(400);
    expect(run.stderr).toMatch(/z{99}…\(19\d{3} more characters\)/);
  });

  it("call under TOOLHOST_CHAT_ROOTS binds the current directory; refusals name --cwd, not HTTP fields", async () => {
    const root = realpathSync(tempDir("toolhost-call-roots-"));
    mkdirSync(join(root, "project"));
    const rooted = { ...env, TOOLHOST_CHAT_ROOTS: root };
    const inside = await runCli(["call", "list_directory", '{"path":"."}'], rooted, { cwd: join(root, "project") });
    expect(inside.stderr).toBe("");
    expect(inside.code).toBe(0);
    const outside = await runCli(["call", "get_current_datetime"], rooted, { cwd: tempDir() });
    expect(outside.code).toBe(2);
    expect(outside.stderr).toMatch(/the current directory ".*" is outside .* within one of them with --cwd DIR\./);
    const flag = await runCli(["call", "get_current_datetime", "--cwd", "/etc"], rooted);
    expect(flag.stderr).toMatch(/--cwd "\/etc" is outside/);
    expect(flag.stderr + outside.stderr).not.toContain("workingDirectory");
  });

  it("chat under TOOLHOST_CHAT_ROOTS refuses the current directory or --cwd in the CLI's words, as call does", async () => {
    const root = realpathSync(tempDir("toolhost-chat-roots-"));
    const rooted = { ...env, TOOLHOST_CHAT_ROOTS: root, OPENAI_API_KEY: "sk-test" };
    const outside = await runCli(["chat", "hi", "--provider", "openai-chat", "--model", "m"], rooted, {
      cwd: tempDir(),
    });
    expect(outside.code).toBe(2);
    expect(outside.stderr).toMatch(/the current directory ".*" is outside .* within one of them with --cwd DIR\./);
    const flag = await runCli(["chat", "hi", "--provider", "openai-chat", "--model", "m", "--cwd", "/etc"], rooted);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/--cwd "\/etc" is outside .* with --cwd DIR\./);
    expect(flag.stderr + outside.stderr).not.toContain("workingDirectory");
  });
});
