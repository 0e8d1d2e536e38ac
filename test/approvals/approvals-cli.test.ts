/**
 * Approvals in the terminal, through the built CLI and the OpenAI SDK against the fake provider: without a terminal
 * an ask is refused at once, naming its reason (the model is told, the file is not written) unless --yes; `toolhost call` asks the same way;
 * `toolhost audit` shows the calls, the decisions and the settings change, filtered by user, tool and time.
 * `toolhost chat` runs as a process (no terminal: stdin and stderr are pipes) for the denial; `chat --yes`,
 * `settings`, `call` and `audit` run the same main(argv) in this process, whose stdin and stderr are not terminals
 * either.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { assertBuilt, cleanEnv, runCli } from "../e2e/chat-process.js";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";
import { runCliInProcess } from "../helpers/cli.js";

vi.setConfig({ testTimeout: 60_000 });

let work: string;
let fake: FakeProvider;
const script: FakeTurn[] = [];
let env: NodeJS.ProcessEnv;

/** `toolhost …args` through main(argv) in this process, with the test's environment. */
const runInProcess = (args: string[]) => {
  expect(process.stdin.isTTY && process.stderr.isTTY).toBeFalsy();
  return runCliInProcess(args, env as Record<string, string>);
};

beforeAll(async () => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), "toolhost-approvals-cli-"));
  fake = await startFakeProvider("openai", script);
  env = cleanEnv({ TOOLHOST_DATA_DIR: join(work, "data"), OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.baseURL });
  const set = await runInProcess([
    "settings",
    "set",
    "write_file",
    `approvalRules=[{"decision":"ask","match":"notes/**","mustMatch":["notes/a.md"]}]`,
  ]);
  expect(set.code, set.stderr).toBe(0);
});

afterAll(async () => {
  await fake?.close();
  rmSync(work, { recursive: true, force: true });
});

function writeThenAnswer(content: string): void {
  script.push(
    {
      kind: "tools",
      calls: [{ name: "write_file", arguments: { path: "notes/todo.md", content, createDirectories: true } }],
    },
    (request) => ({ kind: "text", text: `Tool said: ${request.lastToolResults[0]?.content ?? "nothing"}` }),
  );
}

const chatArgs = (dir: string, extra: string[] = []) => [
  "chat",
  "Write the note.",
  "--provider",
  "openai",
  "--model",
  "fake-model",
  "--cwd",
  dir,
  ...extra,
];

describe("toolhost chat without a terminal", () => {
  it("denies an ask unless --yes, and the model is told why", async () => {
    const dir = mkdtempSync(join(work, "project-"));
    writeThenAnswer("milk\n");
    const denied = await runCli(chatArgs(dir), env);
    expect(denied.code, denied.stderr).toBe(0);
    expect(existsSync(join(dir, "notes/todo.md"))).toBe(false);
    expect(denied.stderr).toContain('this call needs approval and nobody can be asked here. The rule ask "notes/**"');
    expect(denied.stderr).toContain("denied_by_policy");
    const told = fake.requests.at(-1)!.lastToolResults[0]!.content;
    expect(told).toContain("denied_by_policy");
    expect(told).toContain("--yes");
    expect(denied.stdout).toContain("Tool said:");

    // --yes is a rule of the command: the same main(argv) in this process (no terminal either).
    writeThenAnswer("eggs\n");
    const allowed = await runInProcess(chatArgs(dir, ["--yes"]));
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(readFileSync(join(dir, "notes/todo.md"), "utf8")).toBe("eggs\n");
  });
});

describe("toolhost call", () => {
  it("asks the same way: denied without a terminal, allowed with --yes", async () => {
    const dir = mkdtempSync(join(work, "call-"));
    const args = JSON.stringify({ path: "notes/x.md", content: "x", createDirectories: true });
    const denied = await runInProcess(["call", "write_file", args, "--cwd", dir]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("denied_by_policy");
    expect(existsSync(join(dir, "notes/x.md"))).toBe(false);
    const allowed = await runInProcess(["call", "write_file", args, "--cwd", dir, "--yes"]);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(readFileSync(join(dir, "notes/x.md"), "utf8")).toBe("x");
  });
});

describe("toolhost audit", () => {
  it("shows calls with their approval decisions and the settings change, filtered", async () => {
    const all = await runInProcess(["audit", "--tool", "write_file", "--since", "1h", "--json", "--limit", "100"]);
    expect(all.code, all.stderr).toBe(0);
    const entries = JSON.parse(all.stdout).entries as any[];
    const calls = entries.filter((e) => e.kind === "tool_call");
    expect(calls.some((e) => e.outcome === "denied" && e.errorCode === "denied_by_policy")).toBe(true);
    expect(calls.some((e) => e.outcome === "ok" && e.approval === "allow_once" && /--yes/.test(e.approvedBy))).toBe(
      true,
    );
    const change = entries.find((e) => e.kind === "settings_change");
    expect(change).toMatchObject({ userId: "local", tool: "write_file" });
    expect(change.actor).toMatch(/^cli:/);
    const none = await runInProcess(["audit", "--tool", "write_file", "--until", "2000-01-01T00:00:00Z", "--json"]);
    expect(JSON.parse(none.stdout).entries).toEqual([]);
    const other = await runInProcess(["audit", "--user", "someone-else", "--json"]);
    expect(JSON.parse(other.stdout).entries).toEqual([]);
    const table = await runInProcess(["audit", "--kind", "settings_change"]);
    expect(table.stdout).toContain("settings_change");
  });
});
