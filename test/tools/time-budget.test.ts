/**
 * Time budgets running out, end to end through a ToolRuntime. The smallest budget a user can give
 * (timeoutSeconds = 5, the bottom of the 5–600 range every tool with a budget declares): bash, web_fetch and
 * generate_image each end a call that would never finish with a `timeout` at those 5 s — not before — cancelling
 * what they started. And shell_exec's own `timeout` argument (ms), which kills every process of the call.
 *
 * The budgets run on a fake clock for setTimeout (see atTheBudget): real processes, sockets and requests, without
 * waiting 5 s of real time per check. The same mechanisms in real time, with short budgets where a unit takes one:
 * test/shell/runner.test.ts (runShellCommand's timeoutMs, killing whole process trees), test/shell/sandbox.test.ts
 * (shell_exec's timeout inside the sandbox), test/core/runtime.test.ts (the runtime's budget and backstop),
 * test/image/generate-image.test.ts (an abort whose reason is the budget's timeout); the cancel paths beside them in
 * test/shell/tools.test.ts and test/web/fetch.test.ts.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import { generateImageTool } from "../../src/tools/builtin/generate-image.js";
import { webFetchTool } from "../../src/tools/builtin/web-fetch.js";
import { shellExecTool } from "../../src/tools/shell/shell-exec.js";
import { buildShellTool, findInterpreter } from "../../src/tools/shell/shell-tool.js";
import { recordingLogger } from "../helpers/runtime.js";
import { type FakeServer, startFakeOpenAI } from "../image/fakes.js";
import { readPids, survivors, survivorsAfter, tempDir } from "../shell/helpers.js";
import { startServer, type TestServer } from "../web/servers.js";
// The provider table registers the credential reader generate_image falls back to (as the library entry does).
import "../../src/providers/table.js";
import { until } from "../helpers/until.js";

const USER = "u1";
let root: string;
let cleanup: () => void;
let runtime: ToolRuntime;
let store: MemoryToolSettingsStore;
let audit: MemoryAuditSink;
let web: TestServer;
let image: FakeServer;
let hanging = 0;
let hangingClosed = 0;

beforeAll(async () => {
  ({ dir: root, cleanup } = tempDir("toolhost-budget-"));
  mkdirSync(join(root, "project"));
  const registry = new ToolRegistryStore();
  registry.register(buildShellTool("bash", findInterpreter("bash") as string));
  registry.register(webFetchTool);
  registry.register(generateImageTool);
  registry.register(shellExecTool);
  store = new MemoryToolSettingsStore();
  audit = new MemoryAuditSink();
  runtime = new ToolRuntime({
    registry,
    store,
    audit,
    logger: recordingLogger(),
    dataDir: join(root, "data"),
  });
  // A page that never answers, and an image API that never answers.
  web = await startServer((_req, res) => {
    hanging++;
    res.on("close", () => hangingClosed++);
  });
  image = await startFakeOpenAI(() => "hang");
});

afterAll(async () => {
  await runtime.shutdown({ graceMs: 2_000 });
  await Promise.all([web.close(), image.close()]);
  cleanup();
});

const budget = (parameters: Record<string, unknown> = {}) => ({ ...parameters, timeoutSeconds: 5 });

const shellCall = { userId: USER, chatId: "c1", workingDirectory: "" };

/**
 * Runs a call that never finishes against its budget (`budgetMs`) on a fake clock for setTimeout — which arms every
 * budget here: the runtime's, the shell runner's, generate_image's — so the test need not wait it out in real time.
 * Waits, in real time, until `running()` says the call is under way; moves the clock to 1 ms before the budget, where
 * the call must still run; then to the budget, and returns the outcome. Everything after the budget (killing
 * processes, cancelling requests) runs in real time; the clock stays there, so a longer budget would never end the
 * call (the test times out).
 *
 * "Still runs" is checked without waiting: every way a budget ends a call starts synchronously in its timer's
 * callback — an AbortController aborted (the runtime's budget, generate_image's, and through them every request a
 * tool makes) or a process signalled (the shell runner's kill of the process tree) — and advancing the fake clock
 * runs every callback due by then, with the promise jobs they queue. So 1 ms before the budget the call has not
 * settled, no controller has been aborted and no process signalled since it got under way.
 */
async function atTheBudget<T>(budgetMs: number, start: () => Promise<T>, running: () => boolean): Promise<T> {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const aborts = vi.spyOn(AbortController.prototype, "abort");
  const kills = vi.spyOn(process, "kill");
  try {
    let settled = false;
    const call = start().finally(() => {
      settled = true;
    });
    await until(running, "the call to get under way");
    aborts.mockClear();
    kills.mockClear();
    await vi.advanceTimersByTimeAsync(budgetMs - 1);
    expect(settled, "the call settled before its budget").toBe(false);
    expect(aborts, "a controller was aborted before the budget").not.toHaveBeenCalled();
    // Signal 0 only asks whether a process exists.
    expect(
      kills.mock.calls.filter(([, sig]) => sig !== 0),
      "a process was signalled before the budget",
    ).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    const outcome = await call;
    // The probes can fail: the budget itself ended the call through one of them.
    expect(aborts.mock.calls.length + kills.mock.calls.length).toBeGreaterThan(0);
    return outcome;
  } finally {
    aborts.mockRestore();
    kills.mockRestore();
    vi.useRealTimers();
  }
}

// One at a time: they share the fake clock.
describe("timeoutSeconds = 5 (the minimum) ends a call that never finishes", () => {
  it("bash: kills the process group and says the command did not finish within 5s", async () => {
    await store.save(USER, "bash", { enabled: true, parameters: budget({ sandbox: "off" }) });
    const p = join(root, "bash-timeout-pids");
    const outcome = await atTheBudget(
      5_000,
      () =>
        runtime.executeTool(
          "bash",
          { command: `sleep 100 & echo $! >> ${p}; sleep 100` },
          { ...shellCall, workingDirectory: join(root, "project") },
        ),
      () => readPids(p).length === 1 && survivors(readPids(p)).length === 1,
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: "timeout" } });
    expect((outcome as { error: { message: string } }).error.message).toMatch(/did not finish within 5s/);
    expect(readPids(p)).toHaveLength(1);
    // SIGKILL is delivered by the kernel when the process next runs: gone within moments, not at the instant.
    expect(await survivorsAfter(readPids(p), 2_000)).toEqual([]);
  });

  it("web_fetch: a page that never answers ends as a timeout", async () => {
    await store.save(USER, "web_fetch", { enabled: null, parameters: budget({ allowedHosts: ["127.0.0.1"] }) });
    const outcome = await atTheBudget(
      5_000,
      () => runtime.executeTool("web_fetch", { url: `${web.origin}/hang` }, { userId: USER }),
      () => hanging === 1 && hangingClosed === 0,
    );
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error.code).toBe("timeout");
    // The request is cancelled on the wire.
    await vi.waitFor(() => expect(hangingClosed).toBe(1));
  });

  it("generate_image: cancels the provider's requests on the wire and reports 0 of 2 made", async () => {
    await store.save(USER, "generate_image", { enabled: null, parameters: budget() });
    const outcome = await atTheBudget(
      5_000,
      () =>
        runtime.executeTool(
          "generate_image",
          { prompt: "slow", count: 2 },
          { userId: USER, services: { imageGeneration: { openai: { apiKey: "k", baseUrl: image.baseUrl } } } },
        ),
      () => image.requests.length === 2 && image.cancelled === 0,
    );
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe("timeout");
      expect(outcome.error.message).toMatch(/Generated 0 of 2 images/);
    }
    await image.waitForCancelled(2);
    expect(image.requests).toHaveLength(2);
  });
});

describe("shell_exec's timeout argument", () => {
  it("kills every process at the timeout (ms) and surfaces a timeout error with the output so far", async () => {
    // Unsandboxed: the pids are read from a file outside the working directory (sandbox.test.ts checks the same
    // inside the sandbox).
    await store.save(USER, "shell_exec", {
      enabled: true,
      parameters: { allowlistPreset: "custom", allowedCommands: ["bash"], sandbox: "off" },
    });
    const p = join(root, "exec-timeout-pids");
    const outcome = await atTheBudget(
      1_000,
      () =>
        runtime.executeTool(
          "shell_exec",
          {
            argv: [
              "bash",
              "-c",
              `sleep 100 & echo $! >> ${p}; echo partial; setsid sleep 101 & echo $! >> ${p}; sleep 100`,
            ],
            timeout: 1000,
          },
          { ...shellCall, workingDirectory: join(root, "project") },
        ),
      () => readPids(p).length === 2 && survivors(readPids(p)).length === 2,
    );
    expect(outcome).toMatchObject({ ok: false, error: { code: "timeout", details: { termination: "timed_out" } } });
    expect((outcome as unknown as { error: { details: { stdoutTail: string } } }).error.details.stdoutTail).toBe(
      "partial\n",
    );
    // SIGKILL is delivered by the kernel when the process next runs: gone within moments, not at the instant.
    expect(await survivorsAfter(readPids(p), 2_000)).toEqual([]);
    expect(readPids(p)).toHaveLength(2);
    expect(audit.entries.filter((e) => e.tool === "shell_exec").at(-1)).toMatchObject({
      termination: "timed_out",
      exitCode: null,
    });
  });
});
