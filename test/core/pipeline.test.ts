/**
 * executeTool's pipeline (check → approve → run → cap → audit): the approval stage sees only calls that passed the
 * checks, with their parsed arguments; its refusal ends the call unrun and is not audited twice; its approval is what
 * the audit records; the wait for an answer is not execution time. The audit line does not hold up the answer, and
 * flushAudit/shutdown wait for it.
 */
import { describe, expect, it } from "vitest";
import { DeniedByPolicyError } from "../../src/core/errors.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { type InspectedCall, ToolRuntime } from "../../src/core/runtime.js";
import type { AuditEvent, AuditSink } from "../../src/core/types.js";

function setup(audit?: AuditSink) {
  const registry = new ToolRegistryStore();
  const ran: unknown[] = [];
  registry.register({
    definition: {
      name: "count",
      description: "Counts.",
      parameters: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
    },
    settings: {},
    execute: async (args) => {
      ran.push(args);
      return { n: (args as { n: number }).n };
    },
  });
  const runtime = new ToolRuntime({ registry, spill: false, ...(audit ? { audit } : {}) });
  return { runtime, ran, events: () => (runtime.audit as unknown as { events: AuditEvent[] }).events };
}

describe.concurrent("the approve stage", () => {
  it("is asked only about calls that pass the checks, with parsed arguments", async () => {
    const { runtime, ran } = setup();
    const asked: InspectedCall[] = [];
    const approve = async (call: InspectedCall) => {
      asked.push(call);
      return { run: true as const, approval: { decision: "allow_once", decidedBy: "alice" } };
    };
    const bad = await runtime.executeTool("count", '{"n": "x"}', { userId: "u", approve });
    expect(bad).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    expect(asked).toHaveLength(0);
    const good = await runtime.executeTool("count", '{"n": 3}', { userId: "u", approve });
    expect(good).toMatchObject({ ok: true, result: { n: 3 } });
    expect(asked.map((c) => c.args)).toEqual([{ n: 3 }]);
    expect(ran).toEqual([{ n: 3 }]);
  });

  it("a refusal ends the call unrun and unaudited by the runtime; an approval is what the audit records", async () => {
    const { runtime, ran, events } = setup();
    const refused = { ok: false as const, error: new DeniedByPolicyError("No.").toJSON(), durationMs: 0 };
    const outcome = await runtime.executeTool(
      "count",
      { n: 1 },
      {
        userId: "u",
        approve: async () => ({ run: false, outcome: refused }),
      },
    );
    expect(outcome).toEqual(refused);
    expect(ran).toEqual([]);
    expect(events()).toEqual([]);
    await runtime.executeTool(
      "count",
      { n: 2 },
      {
        userId: "u",
        approve: async () => ({ run: true, approval: { decision: "allow_always", decidedBy: "bob" } }),
      },
    );
    expect(events()).toMatchObject([{ tool: "count", outcome: "ok", approval: "allow_always", approvedBy: "bob" }]);
  });

  it("the answer does not wait for the audit line; flushAudit and shutdown do", async () => {
    let release = () => {};
    const written: AuditEvent[] = [];
    const slowSink: AuditSink = {
      record: async () => {},
      recordEvent: (event) =>
        new Promise<void>((resolve) => {
          release = () => {
            written.push(event);
            resolve();
          };
        }),
    };
    const { runtime } = setup(slowSink);
    const outcome = await runtime.executeTool("count", { n: 5 }, { userId: "u" });
    expect(outcome.ok).toBe(true);
    expect(written).toEqual([]);
    let flushed = false;
    const flushing = runtime.flushAudit().then(() => {
      flushed = true;
    });
    await Promise.resolve();
    expect(flushed).toBe(false);
    release();
    await flushing;
    expect(written).toHaveLength(1);
    expect(await runtime.shutdown({ graceMs: 1000 })).toBe(true);
  });
});
