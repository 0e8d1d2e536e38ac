/** Helpers for the filesystem tool tests: temp trees, a bare ToolContext, and a runtime with settings. */
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryAuditSink, MemoryFreshnessLedger } from "../../src/core/stores.js";
import type { FreshnessLedger, ToolContext } from "../../src/core/types.js";
import { memoryRuntime, recordingLogger } from "../helpers/runtime.js";

/** A fresh real (symlink-free) temporary directory; `cleanup()` removes it. */
export function tempDir(prefix = "toolhost-fs-"): { dir: string; cleanup: () => void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A ToolContext for calling tool executors and the path policy directly. */
export function makeContext(
  options: {
    workingDirectory?: string | null;
    parameters?: Record<string, unknown>;
    chatId?: string | null;
    ledger?: FreshnessLedger;
    signal?: AbortSignal;
  } = {},
): ToolContext {
  return {
    userId: "u1",
    chatId: options.chatId === undefined ? "chat-1" : options.chatId,
    workingDirectory: options.workingDirectory ?? null,
    signal: options.signal ?? new AbortController().signal,
    settings: { enabled: true, values: options.parameters ?? {} },
    dataDir: "/tmp/toolhost-test-data",
    ledger: options.ledger ?? new MemoryFreshnessLedger(),
    audit: new MemoryAuditSink(),
    logger: recordingLogger(),
    emitProgress: () => {},
    services: {},
  };
}

/** A runtime plus a `call(tool, args, settings?)` that runs a tool in chat `chat-1` bound to `cwd`. */
export function fsRuntime(cwd: string | null, chatId: string | null = "chat-1") {
  const rt = memoryRuntime();
  const call = async (tool: string, args: unknown, parameters?: Record<string, unknown>) => {
    if (parameters) await rt.store.save("u1", tool, { enabled: null, parameters });
    return rt.runtime.executeTool(tool, args, { userId: "u1", chatId, workingDirectory: cwd });
  };
  return { ...rt, call };
}
