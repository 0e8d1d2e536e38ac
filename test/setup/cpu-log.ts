/**
 * Per-file CPU accounting, on when TOOLHOST_TEST_CPU_LOG names a file (vitest.config.ts adds this setup file
 * then): after each test file, appends one line `<cpu s> <of it, child processes s> <wall s> <file> <start, ms since the epoch> <worker pid>`. CPU is the
 * worker's user + system time plus that of the child processes it waited for (the CLI, servers, npm, Chromium),
 * from /proc/self/stat (Linux), counted from this file's start, i.e. including the test file's import. A busy
 * machine inflates wall time far more than CPU time, so compare CPU. The start and the pid give the run's timeline:
 * which files ran side by side on the two workers. Sort with `sort -rn <file> | head`.
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

const [ownStart, childrenStart] = cpuSeconds();
const wallStart = performance.now();
const epochStart = Date.now();

afterAll(() => {
  const [own, children] = cpuSeconds();
  const spent = own - ownStart + (children - childrenStart);
  const wall = (performance.now() - wallStart) / 1000;
  const file = expect.getState().testPath ?? "?";
  appendFileSync(
    process.env.TOOLHOST_TEST_CPU_LOG!,
    `${spent.toFixed(2)} ${(children - childrenStart).toFixed(2)} ${wall.toFixed(2)} ${file} ${epochStart} ${process.pid}\n`,
  );
});
