/** Test helpers for generate_image: a runtime holding only generate_image, and a direct ToolContext. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { getDefaultToolSettings } from "../../src/core/settings-policy.js";
import { MemoryAuditSink, MemoryFreshnessLedger, MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { Logger, ToolContext, ToolProgressEvent } from "../../src/core/types.js";
import { generateImageTool } from "../../src/tools/builtin/generate-image.js";
// The provider table registers the credential reader generate_image falls back to (as the library entry does).
import "../../src/providers/table.js";

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A temporary data directory, removed by the returned cleanup. */
export function tempDataDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "toolhost-image-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A runtime whose registry holds only generate_image, with in-memory settings. */
export function imageRuntime(dataDir: string) {
  const registry = new ToolRegistryStore();
  registry.register(generateImageTool);
  const store = new MemoryToolSettingsStore();
  const runtime = new ToolRuntime({
    registry,
    store,
    ledger: new MemoryFreshnessLedger(),
    audit: new MemoryAuditSink(),
    logger: silentLogger,
    dataDir,
  });
  return { runtime, store };
}

/** A ToolContext for calling generate_image's execute directly; progress events are collected. */
export function directContext(
  dataDir: string,
  signal: AbortSignal,
  services: Record<string, unknown>,
  parameters: Record<string, unknown> = {},
): { context: ToolContext; events: ToolProgressEvent[] } {
  const events: ToolProgressEvent[] = [];
  const defaults = getDefaultToolSettings(generateImageTool);
  const context: ToolContext = {
    userId: "alice",
    chatId: null,
    workingDirectory: null,
    signal,
    settings: { enabled: true, values: { ...defaults.values, ...parameters } },
    dataDir,
    ledger: new MemoryFreshnessLedger(),
    audit: new MemoryAuditSink(),
    logger: silentLogger,
    emitProgress: (e) => events.push(e),
    services,
  };
  return { context, events };
}
