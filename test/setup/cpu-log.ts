/**
 * Per-file CPU accounting, on when TOOLHOST_TEST_CPU_LOG names a file (vitest.config.ts adds this setup file
 * then): after each test file, appends one line
 * `<cpu s> <of it, child processes s> <wall s> <file> <start, ms since the epoch> <worker pid>`. CPU is the worker's
 * user + system time plus that of the child processes it waited for (the CLI, servers, npm, Chromium), from
 * /proc/self/stat (Linux), counted from this file's start, i.e. including the test file's import. A busy
 * machine inflates wall time far more than CPU time, so compare CPU. The start and the pid give the run's timeline:
 * which files ran side by side on the two workers. Sort with `sort -rn <file> | head`.
 *
 * Two more columns give the worker's main thread as the scheduler saw it (Linux, /proc/thread-self/schedstat):
 * `<on-CPU s> <waiting for a CPU s>`. `wall − on-CPU − waiting for a CPU` is the time the main thread slept (timers,
 * sockets, child processes, worker threads, the runner's module fetches): the waits of a file, measured alike on a busy
 * machine, where `wall − cpu` mostly counts the waiting for a CPU. Per file, largest first:
 * `awk '{print $3-$7-$8, $4}' <file> | sort -rn | head`.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { afterAll, expect } from "vitest";

/** [own, children] CPU seconds of this process so far. */
function cpuSeconds(): [number, number] {
  // Fields after the command's closing parenthesis: utime stime cutime cstime are the 12th to 15th (clock ticks).
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ");
  const tick = (i: number) => Number(fields[i]) / 100;
  return [tick(11) + tick(12), tick(13) + tick(14)];
}

/** [on-CPU, waiting for a CPU] seconds of this thread so far; zeros where schedstat is not available. */
function schedSeconds(): [number, number] {
  try {
    const [on, waiting] = readFileSync("/proc/thread-self/schedstat", "utf8").split(" ").map(Number);
    return [(on ?? 0) / 1e9, (waiting ?? 0) / 1e9];
  } catch {
    return [0, 0];
  }
}

const [ownStart, childrenStart] = cpuSeconds();
const [onStart, waitingStart] = schedSeconds();
const wallStart = performance.now();
const epochStart = Date.now();

afterAll(() => {
  const [own, children] = cpuSeconds();
  const [on, waiting] = schedSeconds();
  const spent = own - ownStart + (children - childrenStart);
  const wall = (performance.now() - wallStart) / 1000;
  const file = expect.getState().testPath ?? "?";
  appendFileSync(
    process.env.TOOLHOST_TEST_CPU_LOG!,
    `${spent.toFixed(2)} ${(children - childrenStart).toFixed(2)} ${wall.toFixed(2)} ${file} ${epochStart} ${process.pid} ${(on - onStart).toFixed(2)} ${(waiting - waitingStart).toFixed(2)}\n`,
  );
});
