/**
 * `toolhost chat` end to end: the built CLI, the real SDKs of all four providers against the fake provider
 * servers on loopback, real built-in tools on a real directory, SQLite in a temporary data directory.
 *
 * What is about the process (the bundled bin with each provider's SDK, the spinner on a real terminal, Ctrl-C)
 * runs the bin; the command rules (history across runs, chats made by `call --chat`, missing keys, a failed first
 * turn, chat listing/renaming/deleting, a missing --cwd) run the same `main(argv)` in this process.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ProviderName } from "../../src/providers/types.js";
import { startFakeProvider } from "../fakes/provider-server.js";
import { runCliInProcess } from "../helpers/cli.js";
import { assertBuilt, CLI, cleanEnv, runCli, runProgram, startCli } from "./chat-process.js";
import { makeProject, SECRET_FILE, SECRET_LINE, scenarioScript } from "./chat-scenario.js";

const KEY_ENV: Record<ProviderName, [string, string]> = {
  openai: ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
  "openai-chat": ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
  gemini: ["GEMINI_API_KEY", "GEMINI_BASE_URL"],
  anthropic: ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
};

// Each case spawns real CLI processes, concurrently; on a busy machine one can take a while to start.
vi.setConfig({ testTimeout: 90_000 });

let work: string;
let project: string;

beforeAll(() => {
  assertBuilt();
  work = mkdtempSync(join(tmpdir(), "toolhost-e2e-cli-"));
  project = makeProject();
});

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  rmSync(project, { recursive: true, force: true });
});

function envFor(provider: ProviderName, baseURL: string, dataDir: string) {
  const [key, url] = KEY_ENV[provider];
  return cleanEnv({ TOOLHOST_DATA_DIR: dataDir, [key]: "test-key", [url]: baseURL });
}

/**
 * The environment of an in-process run: this process's, with every provider variable blanked (an empty variable
 * counts as unset) and `extra` on top — what {@link cleanEnv} gives a child process.
 */
function inProcessEnv(extra: Record<string, string | undefined>): Record<string, string> {
  const blank: Record<string, string> = { TOOLHOST_CHAT_PROVIDER: "", TOOLHOST_DATABASE_URL: "", GOOGLE_API_KEY: "" };
  for (const [key, url] of Object.values(KEY_ENV)) Object.assign(blank, { [key]: "", [url]: "" });
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) blank[name] = value;
  return blank;
}

/** `toolhost …args` through main(argv) in this process, with {@link inProcessEnv}. */
const runInProcess = (args: string[], env: Record<string, string | undefined>, cwd?: string) =>
  runCliInProcess(args, inProcessEnv(env), cwd ? { cwd } : {});

/** util-linux script(1), which runs a command on a real pseudo-terminal (the gemini case runs there when it exists). */
const SCRIPT = "/usr/bin/script";

describe.concurrent.each(["openai", "openai-chat", "gemini", "anthropic"] as const)(
  "toolhost chat --provider %s",
  (provider) => {
    // One provider's run is on a terminal: the same scenario, plus the spinner a terminal gets (a process less than
    // a separate terminal test).
    const onTerminal = provider === "gemini" && existsSync(SCRIPT);
    it(`lists the directory, reads the file it found, and answers from it${onTerminal ? " (on a terminal: with a spinner per running tool)" : ""}`, async () => {
      const fake = await startFakeProvider(provider, scenarioScript(provider, project));
      try {
        const dataDir = join(work, `data-${provider}`);
        const args = [
          "chat",
          "Find the launch code in this project.",
          "--provider",
          provider,
          "--model",
          "fake-model",
          "--cwd",
          project,
        ];
        const env = envFor(provider, fake.baseURL, dataDir);
        if (onTerminal) {
          const command = [process.execPath, CLI, ...args].map((a) => JSON.stringify(a)).join(" ");
          // On the terminal, stdout and stderr are the one screen script(1) prints.
          const { code, stdout } = await runProgram(SCRIPT, ["-qec", command, "/dev/null"], { ...env, TERM: "xterm" });
          expect(fake.failures).toEqual([]);
          expect(code, stdout).toBe(0);
          expect(stdout).toContain("Let me look at the directory.");
          expect(stdout).toContain(SECRET_LINE);
          expect(stdout).toContain(SECRET_FILE);
          expect(stdout).toContain('\x1b[2K⠋ list_directory path="."');
          expect(stdout).toMatch(/\x1b\[2K✓ list_directory path="\." · ok · /);
          expect(stdout).toMatch(/✓ grep pattern="launchCode" path="src" · ok · /);
          expect(stdout).toContain(`✓ read_file path="${SECRET_FILE}" · ok · `);
        } else {
          const { code, stdout, stderr } = await runCli(args, env);
          expect(fake.failures).toEqual([]);
          expect(code, stderr).toBe(0);
          expect(stdout).toContain("Let me look at the directory.");
          expect(stdout).toContain(SECRET_LINE);
          expect(stdout).toContain(SECRET_FILE);
          // Tool lines (not a TTY: plain lines) with name, short arguments, outcome and duration.
          expect(stderr).toMatch(/→ list_directory path="\."/);
          expect(stderr).toMatch(/✓ list_directory path="\." · ok · \d+(\.\d+)? m?s/);
          expect(stderr).toMatch(/✓ grep pattern="launchCode" path="src" · ok · /);
          expect(stderr).toContain(`✓ read_file path="${SECRET_FILE}" · ok · `);
        }
        expect(fake.requests).toHaveLength(4);
        expect(fake.requests[0]!.model).toBe("fake-model");
      } finally {
        await fake.close();
      }
    });
  },
);

describe.concurrent("toolhost chat (the process)", () => {
  it("cancels the turn on Ctrl-C: the provider request is closed and the process exits 130", async () => {
    const fake = await startFakeProvider("anthropic", [{ kind: "stall", text: "Thinking about it" }]);
    try {
      const p = startCli(
        ["chat", "Take your time.", "--provider", "anthropic", "--cwd", project],
        envFor("anthropic", fake.baseURL, join(work, "data-sigint")),
      );
      await p.waitFor((out) => out.includes("Thinking about it"));
      p.child.kill("SIGINT");
      await fake.stallClosed();
      const code = await p.exited;
      expect(code).toBe(130);
      expect(p.stderr()).toContain("Cancelled.");
    } finally {
      await fake.close();
    }
  });
});

describe("toolhost chat (command rules, in this process)", () => {
  it("continues a chat across runs with --chat, sending the stored history", async () => {
    const fake = await startFakeProvider("openai-chat", [
      ...scenarioScript("openai-chat", project),
      (request) => ({
        kind: "text",
        text: `You asked before; ${request.toolResults.length} tool results are in the history.`,
      }),
    ]);
    try {
      const env = envFor("openai-chat", fake.baseURL, join(work, "data-continue"));
      const args = ["--provider", "openai-chat", "--model", "local-model", "--chat", "my-chat"];
      const first = await runInProcess(["chat", "Find the launch code.", ...args, "--cwd", project], env);
      expect(first.code, first.stderr).toBe(0);
      const second = await runInProcess(["chat", "What did you find?", "--chat", "my-chat"], env, project);
      expect(second.code, second.stderr).toBe(0);
      expect(second.stdout).toContain("3 tool results are in the history");
      expect(fake.requests[4]!.model).toBe("local-model");
      expect(fake.requests[4]!.lastUserText).toBe("What did you find?");
      expect(fake.failures).toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it("gives a chat made by `toolhost call --chat` the default provider on its first chat turn", async () => {
    const fake = await startFakeProvider("anthropic", [{ kind: "text", text: "Hello from the default provider." }]);
    try {
      const env = {
        ...envFor("anthropic", fake.baseURL, join(work, "data-premade")),
        TOOLHOST_CHAT_PROVIDER: "anthropic",
      };
      const call = await runInProcess(
        ["call", "list_directory", '{"path":"."}', "--chat", "premade", "--cwd", project],
        env,
      );
      expect(call.code, call.stderr).toBe(0);
      const chat = await runInProcess(["chat", "hi", "--chat", "premade", "--json"], env);
      expect(chat.code, chat.stderr).toBe(0);
      // --json: one loop event per line.
      const events = chat.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      expect(events[0]).toEqual({ type: "iteration", n: 1 });
      expect(
        events
          .filter((e) => e.type === "text_delta")
          .map((e) => e.delta)
          .join(""),
      ).toBe("Hello from the default provider.");
      expect(events.at(-1)).toMatchObject({ type: "done", reason: "text" });
      expect(fake.requests[0]!.system).toContain(project);
    } finally {
      await fake.close();
    }
  });

  it("names the missing API key variable", async () => {
    const { code, stderr } = await runInProcess(
      ["chat", "hi", "--provider", "anthropic", "--cwd", project],
      cleanEnv({ TOOLHOST_DATA_DIR: join(work, "data-nokey") }),
    );
    expect(code).toBe(2);
    expect(stderr).toContain("ANTHROPIC_API_KEY");
    // The failed first turn leaves no empty chat behind.
    const listed = await runInProcess(
      ["chats", "list", "--json"],
      cleanEnv({ TOOLHOST_DATA_DIR: join(work, "data-nokey") }),
    );
    expect(JSON.parse(listed.stdout).chats).toEqual([]);
  });

  it("a first turn the provider fails keeps no empty chat; a later chat can be listed, renamed and deleted", async () => {
    const env = cleanEnv({
      TOOLHOST_DATA_DIR: join(work, "data-provider-down"),
      OPENAI_API_KEY: "k",
      // Nothing listens on port 1: the SDK's request fails at once.
      OPENAI_BASE_URL: "http://127.0.0.1:1/v1",
    });
    const failed = await runInProcess(
      ["chat", "hi", "--provider", "openai", "--cwd", project, "--chat", "doomed"],
      env,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).not.toContain("--chat doomed");
    const list = async () => JSON.parse((await runInProcess(["chats", "list", "--json"], env)).stdout).chats;
    expect(await list()).toEqual([]);

    // A chat made by `call --chat` (kept: the user asked for it) is listed, renamed and deleted.
    expect(
      (await runInProcess(["call", "get_current_datetime", "{}", "--chat", "kept", "--cwd", project], env)).code,
    ).toBe(0);
    expect((await list()).map((c: { id: string }) => c.id)).toEqual(["kept"]);
    const renamed = await runInProcess(["chats", "rename", "kept", "Release", "notes"], env);
    expect(renamed.code).toBe(0);
    expect((await list())[0].title).toBe("Release notes");
    // The confirmation prints a title's control characters escaped (an escape sequence would drive the terminal).
    const hostile = await runInProcess(["chats", "rename", "kept", "evil\x1b]0;pwn\x07title"], env);
    expect(hostile.code).toBe(0);
    expect(hostile.stdout).not.toMatch(/[\x1b\x07]/);
    expect(hostile.stdout).toContain("\\x1b");
    expect((await runInProcess(["chats", "delete", "kept"], env)).code).toBe(0);
    expect(await list()).toEqual([]);
    const again = await runInProcess(["chats", "delete", "kept"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/No chat "kept"/);
  });

  it("refuses a --cwd that does not exist", async () => {
    const { code, stderr } = await runInProcess(
      ["chat", "hi", "--provider", "openai", "--cwd", join(project, "missing")],
      cleanEnv({ TOOLHOST_DATA_DIR: join(work, "data-nocwd"), OPENAI_API_KEY: "k" }),
    );
    expect(code).toBe(2);
    expect(stderr).toMatch(/no such directory/);
  });
});
