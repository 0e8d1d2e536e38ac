/**
 * Waiting for many approval answers under one turn's signal leaves no listener behind on it: each wait removes its
 * own, so a turn with many asks (or many tool calls) never reaches Node's MaxListenersExceededWarning.
 */
import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";

describe("approval waits and the turn's signal", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("twenty answered asks leave the signal with no abort listener, and no warning is emitted", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const turn = new AbortController();
      for (let i = 0; i < 20; i++) {
        const record = await server.ctx.approvals.ask({
          userId: "local",
          chatId: null,
          turnId: null,
          toolCallId: `call-${i}`,
          tool: "bash",
          args: { command: `echo ${i}` },
          preview: `echo ${i}`,
          subjects: [`echo ${i}`],
          candidates: [],
          rule: undefined,
          reason: "test",
          workingDirectory: null,
        });
        const waiting = server.ctx.approvals.waitForAnswer(record, turn.signal);
        await server.ctx.approvals.decide("local", record.id, { decision: "deny", decidedBy: "test" });
        expect((await waiting).status).not.toBe("pending");
      }
      expect(getEventListeners(turn.signal, "abort")).toHaveLength(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).not.toContain("MaxListenersExceededWarning");
    } finally {
      process.off("warning", onWarning);
    }
  });
});
