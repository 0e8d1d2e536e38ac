/**
 * The audit log's batches of tool-call lines: lines recorded together share one INSERT and one promise, batches hold
 * at most 200 lines and every line is stored; a batch the database refuses rejects each of its lines' promises, the
 * runtime still answers its calls and logs the failure once, and a later batch is written again.
 */
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { AuditEvent } from "../../src/core/types.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { SqlAuditLog } from "../../src/storage/repositories.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/server.js";

const call = (i: number): AuditEvent => ({
  kind: "tool_call",
  userId: "batch-user",
  chatId: null,
  tool: "noop",
  arguments: { i },
  cwd: null,
  outcome: "ok",
  errorCode: null,
  durationMs: 1,
  approval: null,
  approvedBy: null,
});

describe("audit batches", () => {
  let database: ToolhostDatabase;
  beforeAll(async () => {
    database = await openDatabase({ dataDir: tempDir() });
  });
  afterAll(async () => {
    await database?.close();
  });

  it("stores every line of 450 recorded together, in batches of at most 200 sharing a promise each", async () => {
    const audit = new SqlAuditLog(database.db);
    const written = Array.from({ length: 450 }, (_, i) => audit.recordEvent(call(i)));
    expect(new Set(written).size).toBe(3);
    await Promise.all(written);
    const stored = await audit.list({ userId: "batch-user", limit: 1000 });
    expect(stored).toHaveLength(450);
    expect(new Set(stored.map((e) => (e.arguments as { i: number }).i)).size).toBe(450);
  });

  it("writes a full batch at once, without waiting for the batch timer (a loop that never yields to timers)", async () => {
    const audit = new SqlAuditLog(database.db);
    const written = Array.from({ length: 450 }, (_, i) => audit.recordEvent({ ...call(i), userId: "full-batch" }));
    // setImmediate runs before the 20 ms batch timer could fire: only writes started at once are done by then.
    await new Promise((resolve) => setImmediate(resolve));
    const early = await database.db
      .selectFrom("audit_log")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("user_id", "=", "full-batch")
      .executeTakeFirstOrThrow();
    expect(Number(early.n)).toBeGreaterThanOrEqual(400);
    await Promise.all(written);
    expect(await audit.list({ userId: "full-batch", limit: 1000 })).toHaveLength(450);
  });

  it("a refused batch rejects its lines; the runtime answers anyway, logs once, and writes the next batch", async () => {
    const audit = new SqlAuditLog(database.db);
    const logger = recordingLogger();
    const registry = new ToolRegistryStore();
    registry.register({
      definition: { name: "noop", description: "Does nothing.", parameters: { type: "object", properties: {} } },
      settings: {
        title: "No-op",
        description: "Does nothing.",
        category: "system",
        enabledByDefault: true,
        canDisable: true,
        defaultParameters: {},
        parameterDescriptors: [],
      },
      execute: async () => ({ ok: true }),
    });
    const runtime = new ToolRuntime({ registry, store: new MemoryToolSettingsStore(), audit, logger });
    await sql`alter table audit_log rename to audit_log_away`.execute(database.db);
    try {
      const outcomes = await Promise.all([1, 2, 3].map(() => runtime.executeTool("noop", {}, { userId: "u" })));
      expect(outcomes.every((o) => o.ok)).toBe(true);
      await runtime.flushAudit();
      const failures = logger.lines.filter((r) => /audit log failed/.test(r.msg ?? ""));
      expect(failures).toHaveLength(1);
      const direct = [audit.recordEvent(call(1)), audit.recordEvent(call(2))];
      expect(direct[0]).toBe(direct[1]);
      await expect(audit.flush()).resolves.toBeUndefined();
      for (const line of direct) await expect(line).rejects.toThrow(/audit_log/);
    } finally {
      await sql`alter table audit_log_away rename to audit_log`.execute(database.db);
    }
    await runtime.executeTool("noop", {}, { userId: "after" });
    await runtime.flushAudit();
    expect(await audit.list({ userId: "after" })).toHaveLength(1);
  });
});
