/**
 * A turn that waits for approvals is resumed by another process once its owner has shown no sign of life for
 * TOOLHOST_APPROVAL_STALE_MS — judged on the database's clock: a process whose own clock runs behind (or ahead) of
 * the owner's neither waits minutes longer for a dead owner nor takes a live owner's turn.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type AppContext, createAppContext } from "../../src/app/context.js";
import { tempDir } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const TEN_MINUTES = 10 * 60_000;
let ctx: AppContext;
const resumed: string[] = [];

beforeAll(async () => {
  ctx = await createAppContext({
    dataDir: tempDir("toolhost-stale-turns-"),
    env: { TOOLHOST_APPROVAL_STALE_MS: "300" },
  });
  ctx.approvals.setResumer((turn) => {
    resumed.push(turn.id);
    ctx.approvals.resumed(turn.id);
  });
});
afterAll(async () => {
  vi.useRealTimers();
  await ctx?.close();
});

/** Stores a suspended turn owned by a process of another machine, with this process's clock moved by `skewMs`. */
async function suspendedTurn(id: string, skewMs: number): Promise<void> {
  vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + skewMs, shouldAdvanceTime: true });
  try {
    await ctx.approvals.repository.saveTurn(
      { id, chatId: `chat-${id}`, userId: "u", state: {}, owner: "elsewhere:1:aaaa" },
      new Date(),
    );
  } finally {
    vi.useRealTimers();
  }
}

describe("a suspended turn's owner is judged on the database's clock", () => {
  it("a process whose clock runs ten minutes behind resumes a dead owner's turn once its heartbeat is stale", async () => {
    await suspendedTurn("behind", 0);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() - TEN_MINUTES, shouldAdvanceTime: true });
    try {
      await until(
        async () => {
          await ctx.approvals.sweep();
          return resumed.includes("behind");
        },
        "the turn to be resumed",
        { timeoutMs: 5_000, intervalMs: 50 },
      );
    } finally {
      vi.useRealTimers();
    }
  });

  it("an owner whose clock runs ten minutes behind is not taken for dead while its heartbeat is fresh", async () => {
    await suspendedTurn("alive", -TEN_MINUTES);
    await ctx.approvals.sweep();
    expect(resumed).not.toContain("alive");
  });
});
