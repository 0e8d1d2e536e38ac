import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { configDefaults, defineConfig } from "vitest/config";
import { HeavyFirstSequencer } from "./test/sequencer.js";

// Tests never write into the real per-user data directory: every worker (and every process it spawns, which
// inherits the environment) defaults to throwaway directories. Tests that need their own set TOOLHOST_DATA_DIR.
const scratch = mkdtempSync(join(tmpdir(), "toolhost-vitest-"));
mkdirSync(join(scratch, "tmp"));
// …and leave nothing behind: every temporary directory of the run (the tests' own, npm's, Chromium's, the
// processes' they start) is made under scratch/tmp (TMPDIR below), and scratch is removed when vitest exits.
process.once("exit", () => rmSync(scratch, { recursive: true, force: true }));

/**
 * Files that measure latency under load they create themselves: they run after everything else, one at a time,
 * so the other worker's CPU (and its child processes') does not decide their outcome.
 */
const SOLO = ["test/server/health-latency.test.ts"];

/**
 * Left out of `npm run test:unit` (which sets TOOLHOST_TEST_UNIT=1): the files that start the built CLI, a browser
 * or npm, or run the storage concurrency and crash tests with child processes.
 */
const NOT_UNIT = [
  "test/e2e/**",
  "test/browser/**",
  "test/package/**",
  "test/cli/**",
  "test/**/*e2e*.test.ts",
  "test/**/*cli*.test.ts",
  "test/storage/settings-concurrency-*.test.ts",
  "test/storage/migrations.test.ts",
  "test/mcp/server-stdio.test.ts",
];
const unit = process.env.TOOLHOST_TEST_UNIT === "1";

const shared = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  // One process per worker (the tests start servers, change directories and load a native module).
  pool: "forks" as const,
  // A worker keeps its loaded modules from one test file to the next instead of importing the whole tree again
  // for every file (that import was about half the suite's CPU time). Test files therefore must not leave global
  // state behind: close servers and contexts, never replace the process.env object, and prefer the application's
  // factories (createAppContext, new ToolRuntime, a ToolRegistryStore of the test's own) to module singletons…
  isolate: false,
  // …and test/setup/file-hygiene.ts puts back the environment, the working directory and the default tool
  // registry after each file.
  // TOOLHOST_TEST_CPU_LOG=<file> appends each test file's CPU time to <file> (test/setup/cpu-log.ts).
  // TOOLHOST_TEST_CPU_PROFILE=<dir> writes a V8 CPU profile of each test file into <dir> (test/setup/cpu-profile.ts).
  setupFiles: [
    "test/setup/file-hygiene.ts",
    ...(process.env.TOOLHOST_TEST_CPU_LOG ? ["test/setup/cpu-log.ts"] : []),
    ...(process.env.TOOLHOST_TEST_CPU_PROFILE ? ["test/setup/cpu-profile.ts"] : []),
  ],
  env: {
    TOOLHOST_DATA_DIR: join(scratch, "data"),
    TMPDIR: join(scratch, "tmp"),
    XDG_DATA_HOME: join(scratch, "xdg-data"),
    // Nor read the real config file (provider keys, mcpServers).
    XDG_CONFIG_HOME: join(scratch, "xdg-config"),
    // Every HTTP response is checked against its schema in tests (production skips the check for speed).
    TOOLHOST_VALIDATE_RESPONSES: "1",
    // The tests talk only to loopback over plain HTTP; a machine-wide CA bundle named here (Debian's, 220 KB) would
    // be parsed by every Node process the tests start, ~50 ms of CPU each. Empty turns it off.
    NODE_EXTRA_CA_CERTS: "",
  },
};

export default defineConfig({
  test: {
    sequence: { sequencer: HeavyFirstSequencer },
    reporters: ["default"],
    projects: [
      {
        test: {
          ...shared,
          name: "suite",
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...SOLO, ...(unit ? NOT_UNIT : [])],
          // One worker per core (vitest's default here would be one worker: every file in series). A third worker
          // meant to fill the waits on child processes and timers cost more than it filled: measured on the 2-core
          // machine, quiet, the whole suite took 170 s of CPU and 100–103 s of wall time with three workers, 139 s
          // and 95 s with two (contention, a third import of the source tree, slower child processes).
          maxWorkers: 2,
          // Starts the run's PostgreSQL cluster and guards the real data directory (see the file).
          globalSetup: ["test/global-setup.ts"],
        },
      },
      {
        test: {
          ...shared,
          name: "solo",
          include: SOLO,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
