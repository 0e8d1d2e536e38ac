/**
 * ToolRuntime.shutdown: running calls are cancelled with a `shutdown` reason, their audit lines are written before
 * it resolves (a call that ignores cancellation gets its line when the grace ends), and later calls end as aborted.
 */
import { describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { defineTool } from "../../src/core/settings-declaration.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { RegisteredTool, ToolContext } from "../../src/core/types.js";
import { recordingLogger } from "../helpers/runtime.js";

/** A tool of no arguments running `execute`, with the default settings metadata. */
const tool = (name: string, execute: (args: unknown, ctx: ToolContext) => Promise<unknown>): RegisteredTool =>
  defineTool({ definition: { name, description: name, parameters: { type: "object", properties: {} } }, execute });

describe("ToolRuntime.shutdown", () => {
  it("cancels running calls, waits for their audit lines, and refuses new calls", async () => {
    const registry = new ToolRegistryStore();
    const audit = new MemoryAuditSink();
    const runtime = new ToolRuntime({
      registry,
      store: new MemoryToolSettingsStore(),
      audit,
      logger: recordingLogger(),
      dataDir: "/tmp/toolhost-shutdown-test",
      spill: false,
    });
    const started = new Set<string>();
    // Stops on cancel like a shell tool: it needs a moment, then records its own entry.
    registry.register(
      tool("polite", async (_args, ctx) => {
        started.add("polite");
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
        await new Promise((resolve) => setImmediate(resolve));
        await ctx.audit.record({
          userId: ctx.userId,
          chatId: null,
          tool: "polite",
          command: "stop",
          cwd: null,
          exitCode: null,
          termination: "aborted",
          durationMs: 1,
        });
        return "stopped";
      }),
    );
    // Ignores cancellation altogether.
    registry.register(
      tool("stubborn", () => {
        started.add("stubborn");
        return new Promise(() => {});
      }),
    );
    const calls = [
      runtime.executeTool("polite", {}, { userId: "u" }),
      runtime.executeTool("stubborn", {}, { userId: "u" }),
    ];
    while (started.size < 2) await new Promise((resolve) => setImmediate(resolve));

    expect(await runtime.shutdown({ graceMs: 200 })).toBe(false);
    for (const outcome of await Promise.all(calls)) {
      expect(outcome).toMatchObject({ ok: false, error: { code: "aborted", details: { rule: "shutdown" } } });
    }
    // Both lines were written before shutdown resolved; the polite tool's own entry is folded into its line.
    const lines = audit.events.filter((e) => e.kind === "tool_call");
    expect(lines.map((e) => [e.tool, e.errorCode]).sort()).toEqual([
      ["polite", "aborted"],
      ["stubborn", "aborted"],
    ]);
    expect(lines.find((e) => e.tool === "polite")).toMatchObject({ toolEntry: { termination: "aborted" } });

    const late = await runtime.executeTool("polite", {}, { userId: "u" });
    expect(late).toMatchObject({ ok: false, error: { code: "aborted", details: { rule: "shutdown" } } });
    expect(started.size).toBe(2);
    expect(await runtime.shutdown({ graceMs: 200 })).toBe(true);
  });
});
