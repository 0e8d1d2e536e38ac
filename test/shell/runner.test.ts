/**
 * runShellCommand against real processes: nothing survives a timeout or an abort, caps hold against endless
 * output, stdin is closed, background jobs do not hold the call open, and termination says what happened.
 * Each scenario runs several times concurrently ("over repeated runs"), and the scenarios run concurrently with
 * each other (each has its own pid files; most wait out a 1 s budget), except the last check of the process table.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ToolAbortedError, ToolTimeoutError } from "../../src/core/errors.js";
import { listProcesses, PROCESS_TAG_VARIABLE } from "../../src/tools/shell/process-tree.js";
import { findInterpreter, runShellCommand, type ShellCommandResult } from "../../src/tools/shell/shell-tool.js";
import { until } from "../helpers/until.js";
import { readPids, survivors, tempDir, waitForPids } from "./helpers.js";

const REPEATS = 3;
let dir: string;
let cleanup: () => void;
let counter = 0;

beforeAll(() => {
  ({ dir, cleanup } = tempDir());
});
afterAll(() => cleanup());

function pidFile(): string {
  return join(dir, `pids-${++counter}`);
}

function bash(
  command: string,
  options: {
    timeoutMs?: number;
    maxOutputBytes?: number;
    signal?: AbortSignal;
    onOutput?: (stream: "stdout" | "stderr", chunk: Buffer) => void;
  } = {},
) {
  return runShellCommand({
    shell: "bash",
    // Every call records its process tag, so the last test can look for any survivor in the whole process table.
    command: `echo "$${PROCESS_TAG_VARIABLE}" >> ${join(dir, "tags")}\n${command}`,
    cwd: dir,
    timeoutMs: options.timeoutMs ?? 1000,
    maxOutputBytes: options.maxOutputBytes ?? 4096,
    signal: options.signal,
    onOutput: options.onOutput,
  });
}

/** Runs `scenario` REPEATS times concurrently; each returns the result and the pids its command recorded. */
async function repeated(
  scenario: (pids: string) => Promise<ShellCommandResult>,
  expectedPids: number,
): Promise<{ result: ShellCommandResult; pids: number[] }[]> {
  return Promise.all(
    Array.from({ length: REPEATS }, async () => {
      const file = pidFile();
      const result = await scenario(file);
      const pids = readPids(file);
      expect(pids.length, `pids recorded in ${file}`).toBeGreaterThanOrEqual(expectedPids);
      return { result, pids };
    }),
  );
}

describe.concurrent("no process survives a timeout", () => {
  it("kills a background job and the foreground command (`sleep 100 &`)", async () => {
    const runs = await repeated((p) => bash(`sleep 100 & echo $! >> ${p}; echo $$ >> ${p}; sleep 100`), 2);
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("timed_out");
      expect(result.exitCode).toBeNull();
      expect(result.signal).toBe("SIGKILL");
      expect(survivors(pids)).toEqual([]);
    }
  });

  it("kills grandchildren of a double fork without setsid (reparented to init, still in the group)", async () => {
    const runs = await repeated(
      (p) => bash(`( (sleep 100 & echo $! >> ${p}) & ); ( (exec sleep 101) & echo $! >> ${p} ); sleep 100`),
      2,
    );
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("timed_out");
      expect(survivors(pids)).toEqual([]);
    }
  });

  it("kills `nohup` jobs", async () => {
    const runs = await repeated((p) => bash(`nohup sleep 100 >/dev/null 2>&1 & echo $! >> ${p}; sleep 100`), 1);
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("timed_out");
      expect(survivors(pids)).toEqual([]);
    }
  });

  it("kills processes that left the group with setsid, including a daemon whose parent already exited", async () => {
    const runs = await repeated(
      (p) =>
        bash(
          [
            // a new session whose leader stays alive with a child
            `setsid bash -c 'echo $$ >> ${p}; sleep 100 & echo $! >> ${p}; wait' &`,
            // a classic daemon: new session, double fork, intermediate exits (orphan reparented to init)
            `setsid bash -c '(sleep 102 & echo $! >> ${p}) &' &`,
            "sleep 100",
          ].join("\n"),
        ),
      3,
    );
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("timed_out");
      expect(survivors(pids)).toEqual([]);
    }
  });

  it("kills a command that keeps forking until the end", async () => {
    // A 0.5 s budget: what counts is that it still forks while it is being killed, not how long it forked before
    // (each second of it is ~1,000 processes per run).
    const runs = await repeated(
      (p) =>
        bash(
          `for i in 1 2 3 4 5; do sleep 100 & echo $! >> ${p}; done; while :; do sleep 100 & echo $! >> ${p}; (setsid sleep 100 &); sleep 0.01; done`,
          { timeoutMs: 500 },
        ),
      5,
    );
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("timed_out");
      expect(survivors(pids)).toEqual([]);
    }
  });
});

describe.concurrent("completion", () => {
  it("completes when the shell exits although a background job holds the pipes, and reaps that job", async () => {
    // A 5 s budget: had the call waited for the job's pipes, it would end as timed_out.
    const runs = await repeated((p) => bash(`sleep 30 & echo $! >> ${p}; echo started`, { timeoutMs: 5000 }), 1);
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("exited");
      expect(result.exitCode).toBe(0);
      expect(result.stdout).toBe("started\n");
      expect(survivors(pids)).toEqual([]);
    }
  });

  it("closes stdin: commands that read input end instead of hanging", async () => {
    const result = await bash('cat; read -r line; echo "read:[$line] rc=$?"', { timeoutMs: 5000 });
    expect(result.termination).toBe("exited");
    expect(result.stdout).toBe("read:[] rc=1\n");
  });

  it("reports exit codes, stderr, and death by a signal the command sent itself", async () => {
    const failed = await bash("echo out; echo err >&2; exit 3", { timeoutMs: 10_000 });
    expect(failed).toMatchObject({
      termination: "exited",
      exitCode: 3,
      signal: null,
      stdout: "out\n",
      stderr: "err\n",
    });
    expect(failed.truncated).toBe(false);
    const signalled = await bash("kill -TERM $$", { timeoutMs: 10_000 });
    expect(signalled).toMatchObject({ termination: "signalled", exitCode: null, signal: "SIGTERM" });
  });

  it("keeps multi-byte characters whole when capping", async () => {
    const result = await bash("for i in $(seq 1 3000); do printf '😀é'; done", {
      maxOutputBytes: 1024,
      timeoutMs: 5000,
    });
    const full = "😀é".repeat(3000);
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.stdout)).toBeLessThanOrEqual(1024);
    const [head, tail] = result.stdout.split(/\n\[\.\.\. \d+ bytes, \d+ lines cut here \.\.\.\]\n/);
    expect(full.startsWith(head ?? "x")).toBe(true);
    expect(full.endsWith(tail ?? "x")).toBe(true);
    expect(result.stdout).not.toContain("\uFFFD");
  });

  it("metacharacters in the command are the shell's business, in the given cwd", async () => {
    const result = await bash("pwd; echo a | tr a b", { timeoutMs: 10_000 });
    expect(result.stdout).toBe(`${dir}\nb\n`);
  });
});

describe.concurrent("abort", () => {
  it("a parent abort kills everything and is reported as aborted, never as a timeout", async () => {
    const runs = await repeated(async (p) => {
      const controller = new AbortController();
      const running = bash(`sleep 100 & echo $! >> ${p}; setsid sleep 101 & echo $! >> ${p}; sleep 100`, {
        timeoutMs: 10_000,
        signal: controller.signal,
      });
      await waitForPids(p, 2);
      controller.abort(new ToolAbortedError());
      return running;
    }, 2);
    for (const { result, pids } of runs) {
      expect(result.termination).toBe("aborted");
      expect(survivors(pids)).toEqual([]);
    }
  });

  it("an abort whose reason is the runtime's timeout counts as timed_out", async () => {
    const controller = new AbortController();
    const p = pidFile();
    const running = bash(`sleep 100 & echo $! >> ${p}; sleep 100`, { timeoutMs: 10_000, signal: controller.signal });
    await waitForPids(p, 1);
    controller.abort(new ToolTimeoutError("budget"));
    const result = await running;
    expect(result.termination).toBe("timed_out");
    expect(survivors(readPids(p))).toEqual([]);
  });

  it("an already aborted signal runs nothing", async () => {
    const controller = new AbortController();
    controller.abort(new ToolAbortedError());
    const p = pidFile();
    const result = await bash(`echo $$ >> ${p}`, { signal: controller.signal });
    expect(result.termination).toBe("aborted");
    expect(readPids(p)).toEqual([]);
  });
});

describe.skipIf(!findInterpreter("zsh"))("zsh", { concurrent: true }, () => {
  it("runs zsh -c and kills its background jobs at the timeout", async () => {
    const p = pidFile();
    const result = await runShellCommand({
      shell: "zsh",
      command: `echo $ZSH_VERSION; sleep 100 & echo $! >> ${p}; sleep 100`,
      cwd: dir,
      timeoutMs: 1000,
      maxOutputBytes: 4096,
    });
    expect(result.termination).toBe("timed_out");
    expect(result.stdout).toMatch(/^\d+\.\d+/);
    expect(survivors(readPids(p))).toEqual([]);
  });
});

// Not concurrent: on a fake clock for setTimeout (the runner's budget timer), so the floods run until each stream
// carried a megabyte — not for a whole second of both cores — and then meet their budget.
describe("no process survives a timeout of a flood", () => {
  it("kills `yes` flooding both streams, and the caps hold", async () => {
    const cap = 2048;
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    let runs: { result: ShellCommandResult; pids: number[] }[];
    try {
      const started = [1, 2].map(() => {
        const p = pidFile();
        const seen = { stdout: 0, stderr: 0 };
        const result = bash(`yes & echo $! >> ${p}; yes >&2 & echo $! >> ${p}; wait`, {
          maxOutputBytes: cap,
          onOutput: (stream, chunk) => {
            seen[stream] += chunk.length;
          },
        });
        return { p, seen, result };
      });
      await until(
        () => started.every(({ seen }) => seen.stdout >= 1_000_000 && seen.stderr >= 1_000_000),
        "the floods to reach a megabyte per stream",
      );
      await vi.advanceTimersByTimeAsync(1000);
      runs = await Promise.all(started.map(async ({ p, result }) => ({ result: await result, pids: readPids(p) })));
    } finally {
      vi.useRealTimers();
    }
    for (const { result, pids } of runs) {
      expect(pids).toHaveLength(2);
      expect(result.termination).toBe("timed_out");
      expect(result.truncated).toBe(true);
      for (const stream of [result.stdout, result.stderr]) {
        expect(Buffer.byteLength(stream)).toBeLessThanOrEqual(cap);
        expect(stream.startsWith("y\ny\ny\n")).toBe(true);
        expect(stream).toMatch(/\[\.\.\. \d+ bytes, \d+ lines cut here \.\.\.\]/);
      }
      expect(survivors(pids)).toEqual([]);
    }
  });
});

// Not concurrent: runs after every call above has ended.
describe("the whole process table", () => {
  it("holds no live process carrying the tag of any call made above", () => {
    const tags = readFileSync(join(dir, "tags"), "utf8").split("\n").filter(Boolean);
    expect(tags.length).toBeGreaterThan(20);
    const tagged: string[] = [];
    for (const p of listProcesses()) {
      if (p.state === "Z" || p.state === "X") continue;
      let environ = "";
      try {
        environ = readFileSync(`/proc/${p.pid}/environ`, "latin1");
      } catch {
        continue;
      }
      if (tags.some((t) => environ.includes(`${PROCESS_TAG_VARIABLE}=${t}\0`))) tagged.push(`${p.pid}`);
    }
    expect(tagged).toEqual([]);
  });
});
