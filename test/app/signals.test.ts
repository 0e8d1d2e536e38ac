/**
 * The signal bus between processes sharing one database, read by its poll (always on SQLite; on PostgreSQL while
 * the LISTEN connection is down): a burst of signals larger than one read of the table must not stop delivery.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Signal, SignalBus } from "../../src/app/signals.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { TurnLeaseRepository } from "../../src/storage/turn-leases.js";
import { tempDir } from "../helpers/temp.js";
import { until } from "../helpers/until.js";

describe("signals between two processes on one SQLite file", () => {
  const dataDir = tempDir();
  let one: ToolhostDatabase;
  let two: ToolhostDatabase;
  let sender: SignalBus;
  let receiver: SignalBus;
  const received: Signal[] = [];
  beforeAll(async () => {
    one = await openDatabase({ dataDir });
    two = await openDatabase({ dataDir });
    sender = new SignalBus({ repository: new TurnLeaseRepository(one.db), database: one });
    receiver = new SignalBus({ repository: new TurnLeaseRepository(two.db), database: two });
    receiver.subscribe((signal) => received.push(signal));
    await sender.start();
    await receiver.start();
  });
  afterAll(async () => {
    await sender?.stop();
    await receiver?.stop();
    await one?.close();
    await two?.close();
  });

  it("a signal sent after a burst of 1,500 others (sent within the same moment) still arrives", async () => {
    const repo = new TurnLeaseRepository(one.db);
    const now = await repo.now();
    const burst = Array.from({ length: 1_500 }, (_, i) => ({
      id: randomUUID(),
      kind: "tools_changed",
      target: `user${i}`,
      created_ms: now,
    }));
    for (let i = 0; i < burst.length; i += 250)
      await (one.db as any)
        .insertInto("signals")
        .values(burst.slice(i, i + 250))
        .execute();
    await until(() => received.length >= 1_000, "the receiver to read the burst");
    await sender.publish("chat_cancel", "after-the-burst");
    await until(
      () => received.some((s) => s.kind === "chat_cancel" && s.target === "after-the-burst"),
      "the signal sent after the burst",
      { timeoutMs: 5_000 },
    );
    expect(received.filter((s) => s.kind === "tools_changed")).toHaveLength(1_500);
  });
});
