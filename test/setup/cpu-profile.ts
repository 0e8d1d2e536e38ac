/**
 * Per-file CPU profiles, on when TOOLHOST_TEST_CPU_PROFILE names a directory (vitest.config.ts adds this setup file
 * then): the V8 profiler of the worker runs from this file's start to its end and writes
 * `<dir>/<test file path with / as _>.cpuprofile` (open it in Chrome DevTools or speedscope). Child processes the
 * test starts are not in it; their CPU shows in the TOOLHOST_TEST_CPU_LOG line's children column.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect } from "vitest";

const session = new Session();

beforeAll(async () => {
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 500 });
  await session.post("Profiler.start");
});

afterAll(async () => {
  const { profile } = await session.post("Profiler.stop");
  session.disconnect();
  const dir = process.env.TOOLHOST_TEST_CPU_PROFILE!;
  mkdirSync(dir, { recursive: true });
  const file = (expect.getState().testPath ?? "unknown").replace(/^.*?\/test\//, "test/").replaceAll("/", "_");
  writeFileSync(join(dir, `${file}.cpuprofile`), JSON.stringify(profile));
});
