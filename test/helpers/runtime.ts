/** Test helpers: a fresh in-memory runtime over the default registry (built-ins registered). */

import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryFreshnessLedger, MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { Logger } from "../../src/core/types.js";
import { registerBuiltinTools } from "../../src/tools/index.js";
import { tempDir } from "./temp.js";

registerBuiltinTools();

/** A logger that records what it was given, so tests can assert on warnings. */
export function recordingLogger(): Logger & { lines: { level: string; obj: unknown; msg?: string }[] } {
  const lines: { level: string; obj: unknown; msg?: string }[] = [];
  const at = (level: string) => (obj: object | string, msg?: string) => void lines.push({ level, obj, msg });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/**
 * A runtime with in-memory settings, ledger and audit sink; its data directory (spill files) is a fresh temporary
 * directory of its own unless `dataDir` is given, so no two tests share one.
 */
export function memoryRuntime(dataDir = tempDir("toolhost-runtime-")) {
  const store = new MemoryToolSettingsStore();
  const ledger = new MemoryFreshnessLedger();
  const audit = new MemoryAuditSink();
  const logger = recordingLogger();
  const runtime = new ToolRuntime({ store, ledger, audit, logger, dataDir });
  return { runtime, store, ledger, audit, logger };
}
