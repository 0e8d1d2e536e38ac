/**
 * The one process runner behind the shell tools (bash / zsh / powershell, through runShellCommand) and
 * shell_exec.
 *
 * - The child runs in its own session and process group (POSIX), stdin is /dev/null (a command that reads input
 *   gets end-of-file at once instead of hanging), stdout and stderr are captured under UTF-8 byte caps.
 * - An owned timer kills the whole call (see process-tree.ts) at the timeout: termination `timed_out`. A parent
 *   abort kills it too: termination `aborted`, unless the signal's reason is a ToolTimeoutError (the runtime's
 *   backstop), which counts as `timed_out`.
 * - The call completes when the child exits. The pipes are then drained for a short bounded time (`drainMs`):
 *   a background job that inherited them (`sleep 30 & echo started`) cannot hold the call open. Whatever of the
 *   call is still running after that is killed: no process outlives its call.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { NotFoundError, ToolArgumentError, ToolExecutionError, ToolTimeoutError } from "../../core/errors.js";
import { HeadTailCapture } from "./output-cap.js";
import { killProcessTree, PROCESS_TAG_VARIABLE, processStartTime } from "./process-tree.js";

/** How a run ended: normal exit, killed by the owned timer, killed on the caller's abort, or killed by a signal. */
export type Termination = "exited" | "timed_out" | "aborted" | "signalled";

/** Default time (ms) the pipes are drained after the child exited before leftover writers are killed. */
export const DEFAULT_DRAIN_MS = 250;

/** What to run and under which limits. */
export interface RunProcessOptions {
  /** Absolute path of the executable (never looked up on PATH here). */
  file: string;
  /** Arguments after argv[0]; passed verbatim, never through a shell. */
  args: readonly string[];
  /** The argv[0] the child sees (default `file`). */
  argv0?: string;
  /** Working directory (absolute, already validated by the caller). */
  cwd: string;
  /** The child's complete environment (already filtered by the caller); a process tag is added. */
  env: Record<string, string>;
  /** Time budget in milliseconds (> 0); the whole call is SIGKILLed when it runs out. */
  timeoutMs: number;
  /** Caller's cancel signal; aborting kills the call (termination `aborted`). */
  signal?: AbortSignal;
  /** Cap on stdout in UTF-8 bytes (>= 256), marker included. */
  maxStdoutBytes: number;
  /** Cap on stderr in UTF-8 bytes (>= 256), marker included. */
  maxStderrBytes: number;
  /** Bounded drain after exit, in ms (default 250). */
  drainMs?: number;
  /** Receives the child's pid once spawned (tests use it to check nothing survives). */
  onSpawn?: (pid: number) => void;
  /**
   * Bytes written to the child's file descriptor 3 (a pipe closed after them), e.g. the seccomp filter that bwrap
   * reads from `--seccomp 3`. Absent: the child gets no fd 3.
   */
  fd3Input?: Buffer;
  /** Receives every chunk of stdout / stderr as it arrives, before capping (e.g. to spill the full output). */
  onOutput?: (stream: "stdout" | "stderr", chunk: Buffer) => void;
}

/** Outcome of one run. */
export interface ProcessRunResult {
  stdout: string;
  stderr: string;
  /** Exit code, or null when the process was killed by a signal. */
  exitCode: number | null;
  /** The signal that ended the process (e.g. "SIGKILL"), or null. */
  signal: string | null;
  /** Wall time from spawn to the end of the drain, in milliseconds. */
  durationMs: number;
  /** True when either stream lost bytes to its cap. */
  truncated: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** Bytes each stream carried in total (before capping). */
  stdoutBytes: number;
  stderrBytes: number;
  termination: Termination;
  /** The child's pid (its process-group id on POSIX). */
  pid: number;
}

/** Linux's limit on one argument of exec (MAX_ARG_STRLEN: 32 pages of 4 KiB); exec fails with E2BIG past it. */
export const MAX_ARGUMENT_BYTES = 128 * 1024;

/**
 * The classified error of a spawn that failed: NotFoundError for a missing executable or working directory,
 * ToolArgumentError when the arguments are longer than exec takes (E2BIG: the caller's input, which it can shorten),
 * else ToolExecutionError.
 */
function spawnFailure(options: RunProcessOptions, error: NodeJS.ErrnoException): Error {
  const name = options.argv0 ?? options.file;
  if (error.code === "ENOENT") {
    return new NotFoundError(`Cannot run "${name}": the executable or the working directory does not exist.`, {
      file: options.file,
      cwd: options.cwd,
    });
  }
  if (error.code === "E2BIG") {
    const sizes = options.args.map((a) => Buffer.byteLength(a, "utf8"));
    const longest = Math.max(0, ...sizes);
    const total = sizes.reduce((sum, n) => sum + n, 0);
    const fmt = (n: number) => n.toLocaleString("en-US");
    return new ToolArgumentError(
      `Cannot run "${name}": the command is too long for the operating system (its longest argument is ${fmt(longest)} bytes, ${fmt(total)} in all; Linux takes at most ${fmt(MAX_ARGUMENT_BYTES)} bytes in one argument). Write long text to a file (write_file) and pass the file's path, or split the work into shorter commands.`,
      { file: options.file, longestArgumentBytes: longest, argumentBytes: total },
    );
  }
  return new ToolExecutionError(`Cannot run "${name}": ${error.message}.`, { file: options.file, errno: error.code });
}

function closed(stream: Readable | null): Promise<void> {
  if (!stream || stream.destroyed || stream.readableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once("close", () => resolve());
    stream.once("end", () => resolve());
    stream.once("error", () => resolve());
  });
}

/**
 * Waits until `promise` settles, at most `ms` of wall time — and in any case past one poll of the event loop after
 * that time. The event loop runs every due timer before it polls again: when other work held it (e.g. many calls
 * ending at once, each scanning /proc), the time can run out before the loop has read what the child already wrote
 * into its pipes, and a finished command's output would be lost. The extra turn reads it.
 */
async function waitAtMost(promise: Promise<unknown>, ms: number): Promise<void> {
  const controller = new AbortController();
  await Promise.race([promise, sleep(ms, undefined, { signal: controller.signal }).catch(() => {})]);
  controller.abort();
  // setImmediate callbacks run right after the poll phase.
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Runs `file args` under the rules of the module comment and resolves with its ProcessRunResult; a non-zero exit,
 * a timeout or an abort are results, not errors (the caller decides what to surface).
 * Throws NotFoundError when the executable or the cwd does not exist, ToolArgumentError when the arguments are longer
 * than exec takes, ToolExecutionError when it cannot be spawned otherwise.
 */
export async function runProcess(options: RunProcessOptions): Promise<ProcessRunResult> {
  const started = performance.now();
  const tag = randomUUID();
  const stdoutCap = new HeadTailCapture(options.maxStdoutBytes);
  const stderrCap = new HeadTailCapture(options.maxStderrBytes);
  const drainMs = options.drainMs ?? DEFAULT_DRAIN_MS;

  const build = (termination: Termination, exitCode: number | null, sig: string | null, pid: number) => {
    const out = stdoutCap.result();
    const err = stderrCap.result();
    return {
      stdout: out.text,
      stderr: err.text,
      exitCode,
      signal: sig,
      durationMs: Math.round(performance.now() - started),
      truncated: out.truncated || err.truncated,
      stdoutTruncated: out.truncated,
      stderrTruncated: err.truncated,
      stdoutBytes: out.totalBytes,
      stderrBytes: err.totalBytes,
      termination,
      pid,
    } satisfies ProcessRunResult;
  };

  if (options.signal?.aborted) {
    return build(options.signal.reason instanceof ToolTimeoutError ? "timed_out" : "aborted", null, null, 0);
  }

  const posix = process.platform !== "win32";
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(options.file, [...options.args], {
      cwd: options.cwd,
      env: { ...options.env, [PROCESS_TAG_VARIABLE]: tag },
      argv0: options.argv0 ?? options.file,
      detached: posix,
      stdio: options.fd3Input ? ["ignore", "pipe", "pipe", "pipe"] : ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
  } catch (error) {
    // Some failures (E2BIG: arguments longer than exec takes) are thrown by spawn itself, not emitted.
    throw spawnFailure(options, error as NodeJS.ErrnoException);
  }
  if (options.fd3Input) {
    const fd3 = child.stdio[3] as Writable | null;
    fd3?.on("error", () => {}); // the child may exit before reading it: its exit status tells
    fd3?.end(options.fd3Input);
  }

  if (child.pid === undefined) {
    const error = await new Promise<NodeJS.ErrnoException>((resolve) => child.once("error", resolve));
    throw spawnFailure(options, error);
  }
  const pid = child.pid;
  // Every process of the call starts after the child; older ones are never examined (undefined: no /proc).
  const startedAt = posix ? processStartTime(pid) : undefined;
  options.onSpawn?.(pid);
  child.on("error", () => {}); // late errors (e.g. a failed kill) are not fatal: the exit event decides

  const onOutput = options.onOutput;
  child.stdout?.on("data", (chunk: Buffer) => {
    stdoutCap.push(chunk);
    onOutput?.("stdout", chunk);
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderrCap.push(chunk);
    onOutput?.("stderr", chunk);
  });
  const pipesClosed = Promise.all([closed(child.stdout), closed(child.stderr)]);

  const exited = new Promise<{ code: number | null; sig: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, sig) => resolve({ code, sig }));
  });

  const state: { finished: boolean; killedAs: Termination | null; killing: Promise<boolean> | null } = {
    finished: false,
    killedAs: null,
    killing: null,
  };
  const killAll = (as: Termination) => {
    if (state.finished || state.killedAs) return;
    state.killedAs = as;
    state.killing = killProcessTree(pid, tag, { startedAt });
  };

  const timer = setTimeout(() => killAll("timed_out"), Math.min(2 ** 31 - 1, Math.max(1, options.timeoutMs)));
  const onAbort = () => killAll(options.signal?.reason instanceof ToolTimeoutError ? "timed_out" : "aborted");
  options.signal?.addEventListener("abort", onAbort, { once: true });

  let outcome: { code: number | null; sig: NodeJS.Signals | null };
  try {
    outcome = await exited;
  } finally {
    state.finished = true;
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }

  // The child is gone. Give the pipes a short, bounded time to deliver what is buffered; then kill whatever of
  // the call is left (background jobs, daemons) so that nothing outlives the call and the pipes close.
  await waitAtMost(pipesClosed, drainMs);
  if (state.killing) await state.killing;
  await killProcessTree(pid, tag, { startedAt });
  await waitAtMost(pipesClosed, 100);
  child.stdout?.destroy();
  child.stderr?.destroy();

  const termination: Termination = state.killedAs ?? (outcome.sig ? "signalled" : "exited");
  return build(termination, outcome.code, outcome.sig, pid);
}
