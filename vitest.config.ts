import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

// Tests never write into the real per-user data directory: every worker (and every process it spawns, which
// inherits the environment) defaults to throwaway directories. Tests that need their own set TOOLHOST_DATA_DIR.
const scratch = mkdtempSync(join(tmpdir(), "toolhost-vitest-"));

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default"],
    env: {
      TOOLHOST_DATA_DIR: join(scratch, "data"),
      XDG_DATA_HOME: join(scratch, "xdg-data"),
      // Nor read the real config file (provider keys, mcpServers).
      XDG_CONFIG_HOME: join(scratch, "xdg-config"),
      // Every HTTP response is checked against its schema in tests (production skips the check for speed).
      TOOLHOST_VALIDATE_RESPONSES: "1",
    },
    globalSetup: ["test/global-setup.ts"],
  },
});
