/**
 * The JSON text the run stage made of a large uncut result travels on its outcome (resultJsonText), hidden from
 * every serialization and copy of the outcome; a cut or small result carries none.
 */
import { describe, expect, it } from "vitest";
import { resultJsonText } from "../../src/core/execution/run.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryToolSettingsStore } from "../../src/core/stores.js";
import { tool } from "../../src/core/typed-tool.js";
import { tempDir } from "../helpers/server.js";

function runtimeWith(result: () => unknown) {
  const registry = new ToolRegistryStore();
  registry.register(
    tool({
      name: "make",
      description: "Returns a value.",
      inputSchema: { type: "object", properties: {} },
      execute: async () => result(),
    }),
  );
  return new ToolRuntime({ registry, store: new MemoryToolSettingsStore(), dataDir: tempDir("toolhost-json-") });
}

describe("a large result's JSON text on its outcome", () => {
  it("is the result's JSON, and invisible to JSON.stringify, spreads and key listings of the outcome", async () => {
    const big = { rows: Array.from({ length: 300 }, (_, i) => ({ i, text: `row ${i} "quoted" \u00e9` })) };
    const outcome = await runtimeWith(() => big).executeTool("make", {}, { userId: "u" });
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(resultJsonText(outcome)).toBe(JSON.stringify(outcome.result));
    expect(Object.keys(outcome).sort()).toEqual(["durationMs", "ok", "result"]);
    expect(Object.getOwnPropertySymbols({ ...outcome })).toEqual([]);
    expect(JSON.parse(JSON.stringify(outcome))).toEqual({ ok: true, result: big, durationMs: outcome.durationMs });
  });

  it("is absent for a small result and for one the cap cut (its text would not be what the model gets)", async () => {
    const small = await runtimeWith(() => ({ a: 1 })).executeTool("make", {}, { userId: "u" });
    expect(resultJsonText(small)).toBeUndefined();
    const runtime = runtimeWith(() => ({ text: "x\n".repeat(200_000) }));
    const cut = await runtime.executeTool("make", {}, { userId: "u" });
    expect(cut.ok).toBe(true);
    expect(JSON.stringify(cut)).toMatch(/truncated|outputTruncated/i);
    expect(resultJsonText(cut)).toBeUndefined();
  });
});

describe("outcomeJsonText", () => {
  it("is JSON.stringify of the outcome, large or small, succeeded or failed", async () => {
    const { outcomeJsonText } = await import("../../src/core/execution/run.js");
    const big = { text: 'é\n\t"quoted" \u2028'.repeat(400), n: [1, 2.5, -0.25] };
    for (const value of [big, { a: 1 }, "a string", null]) {
      const outcome = await runtimeWith(() => value).executeTool("make", {}, { userId: "u" });
      expect(outcomeJsonText(outcome)).toBe(JSON.stringify(outcome));
    }
    const failed = await runtimeWith(() => ({})).executeTool("missing", {}, { userId: "u" });
    expect(outcomeJsonText(failed)).toBe(JSON.stringify(failed));
  });
});
