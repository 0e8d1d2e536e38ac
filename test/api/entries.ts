/**
 * The package's public entries, stated once for the tests that check them (exports.test, embedding.test,
 * docs.test): each subpath of package.json's "exports", the source file that defines it, and a loader of that
 * source through the test runner.
 */
export const ENTRIES = {
  toolhost: "src/index.ts",
  "toolhost/app": "src/app/index.ts",
  "toolhost/loop": "src/loop/index.ts",
  "toolhost/providers": "src/providers/index.ts",
  "toolhost/storage": "src/storage/index.ts",
  "toolhost/web": "src/tools/web/index.ts",
  "toolhost/server": "src/server/index.ts",
  "toolhost/mcp": "src/mcp/index.ts",
  "toolhost/ai-sdk": "src/adapters/ai-sdk.ts",
  "toolhost/openai-agents": "src/adapters/openai-agents.ts",
} as const;

/** A public entry's name ("toolhost", "toolhost/server", …). */
export type Entry = keyof typeof ENTRIES;

/** Loads each entry's source module (written out: the runner resolves static specifiers only). */
export const sourceModules: Record<Entry, () => Promise<Record<string, unknown>>> = {
  toolhost: () => import("../../src/index.js"),
  "toolhost/app": () => import("../../src/app/index.js"),
  "toolhost/loop": () => import("../../src/loop/index.js"),
  "toolhost/providers": () => import("../../src/providers/index.js"),
  "toolhost/storage": () => import("../../src/storage/index.js"),
  "toolhost/web": () => import("../../src/tools/web/index.js"),
  "toolhost/server": () => import("../../src/server/index.js"),
  "toolhost/mcp": () => import("../../src/mcp/index.js"),
  "toolhost/ai-sdk": () => import("../../src/adapters/ai-sdk.js"),
  "toolhost/openai-agents": () => import("../../src/adapters/openai-agents.js"),
};

/** The most runtime names the root entry may export: a newcomer learns it in one sitting. */
export const ROOT_RUNTIME_NAMES_MAX = 40;
