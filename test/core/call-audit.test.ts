/**
 * What executeTool's audit line records of a call's arguments, refused or run: the decoded JSON text (nulls kept),
 * the raw text when it is not JSON, a note instead of input beyond the argument limits, secrets redacted — the same
 * whether argument parsing got as far as decoding or not. Plus the in-memory audit sink's bound and the quick path
 * of the value-limit check.
 */
import { describe, expect, it } from "vitest";
import { checkValueLimits, TOOL_ARGUMENT_LIMITS } from "../../src/core/json-limits.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink } from "../../src/core/stores.js";
import type { AuditEvent } from "../../src/core/types.js";

function runtimeWithEcho() {
  const registry = new ToolRegistryStore();
  registry.register({
    definition: {
      name: "echo",
      description: "Returns its text.",
      parameters: {
        type: "object",
        properties: { text: { type: "string" }, token: { type: "string" } },
        required: ["text"],
      },
    },
    settings: {},
    execute: async (args) => ({ text: (args as { text?: unknown }).text }),
  });
  const audit = new MemoryAuditSink();
  return { runtime: new ToolRuntime({ registry, audit, spill: false }), audit };
}

async function recorded(args: unknown): Promise<{ ok: boolean; arguments: unknown }> {
  const { runtime, audit } = runtimeWithEcho();
  const outcome = await runtime.executeTool("echo", args, { userId: "u" });
  const event = audit.events.at(-1) as Extract<AuditEvent, { kind: "tool_call" }>;
  return { ok: outcome.ok, arguments: event.arguments };
}

describe("the audit line's arguments", () => {
  it("decoded JSON text, refused or run, nulls and unknown keys kept, secrets redacted", async () => {
    expect(await recorded('{"text":"hi","token":"abc","extra":1}')).toEqual({
      ok: false,
      arguments: { text: "hi", token: "[redacted]", extra: 1 },
    });
    expect(await recorded('{"text":"hi","token":null}')).toEqual({
      ok: true,
      arguments: { text: "hi", token: null },
    });
    expect(await recorded('{"text": 5}')).toEqual({ ok: false, arguments: { text: 5 } });
    // JSON's own whitespace around the text is fine; other white space makes it a text that is not JSON.
    expect(await recorded(' \n{"text":"a"} ')).toEqual({ ok: true, arguments: { text: "a" } });
    expect(await recorded('\u00a0{"text":"a"}')).toEqual({ ok: true, arguments: '\u00a0{"text":"a"}' });
  });

  it("the raw text when it is not JSON, a note past the limits, objects as given", async () => {
    expect(await recorded('{"text": ')).toEqual({ ok: false, arguments: '{"text": ' });
    expect(await recorded("")).toEqual({ ok: false, arguments: "" });
    expect(await recorded("[1]")).toEqual({ ok: false, arguments: [1] });
    const deep = `${'{"a":'.repeat(40)}1${"}".repeat(40)}`;
    expect((await recorded(deep)).arguments).toEqual({ notRecorded: expect.stringMatching(/maxDepth/) });
    expect(await recorded({ text: 1, password: "p" })).toEqual({
      ok: false,
      arguments: { text: 1, password: "[redacted]" },
    });
    const big = { text: "x", list: Array.from({ length: 10_001 }, () => 1) };
    expect((await recorded(big)).arguments).toEqual({ notRecorded: expect.stringMatching(/maxItems/) });
    expect((await recorded({ text: () => 1 })).arguments).toEqual({
      notRecorded: expect.stringMatching(/is a function/),
    });
  });
});

describe("in-memory audit sink", () => {
  it("keeps the newest entries and events up to its limit", async () => {
    const sink = new MemoryAuditSink({ limit: 3 });
    for (let i = 0; i < 5; i++) {
      await sink.record({ userId: "u", tool: `t${i}` } as never);
      await sink.recordEvent({ kind: "settings_change", n: i } as never);
    }
    expect(sink.entries.map((e) => e.tool)).toEqual(["t2", "t3", "t4"]);
    expect(sink.events.map((e) => (e as unknown as { n: number }).n)).toEqual([2, 3, 4]);
  });
});

describe("value limits (quick path and full walk agree)", () => {
  it("passes small JSON data and names the first problem of anything else", () => {
    expect(checkValueLimits({ a: "x", b: [1, true, null, { c: "d" }], u: undefined }, TOOL_ARGUMENT_LIMITS)).toBe(
      undefined,
    );
    const shared = { x: 1 };
    expect(checkValueLimits({ a: shared, b: shared }, TOOL_ARGUMENT_LIMITS)).toMatch(
      /arguments\.[ab] refers back to itself/,
    );
    let nested: unknown = 1;
    for (let i = 0; i < 40; i++) nested = { n: nested };
    expect(checkValueLimits(nested, TOOL_ARGUMENT_LIMITS)).toMatch(/maxDepth/);
    const manyUndefined = Object.fromEntries(Array.from({ length: 20_001 }, (_, i) => [`k${i}`, undefined]));
    expect(checkValueLimits(manyUndefined, { ...TOOL_ARGUMENT_LIMITS, maxKeys: 30_000 })).toMatch(/maxValues/);
    expect(checkValueLimits({ a: [1, undefined] }, TOOL_ARGUMENT_LIMITS)).toMatch(/arguments\.a\[1\] is undefined/);
    expect(checkValueLimits({ a: { b: Number.POSITIVE_INFINITY } }, TOOL_ARGUMENT_LIMITS)).toMatch(
      /arguments\.a\.b is Infinity/,
    );
  });
});
