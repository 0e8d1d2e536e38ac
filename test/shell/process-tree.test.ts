/** The /proc scanner: parsing, membership by tag, and never touching processes older than the call. */
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
  findCallProcesses,
  hasProcFs,
  killProcessTree,
  PROCESS_TAG_VARIABLE,
  parseProcStat,
  processStartTime,
} from "../../src/tools/shell/process-tree.js";
import { survivors, survivorsAfter } from "./helpers.js";

describe("parseProcStat", () => {
  it("reads state, ppid, pgrp, session and start time even when the name holds spaces and parentheses", () => {
    const fields = ["S", "10", "20", "30", ...Array(15).fill("0"), "12345", "0"];
    expect(parseProcStat(`42 (a) b (c)) ${fields.join(" ")}`)).toEqual({
      pid: 42,
      ppid: 10,
      pgrp: 20,
      session: 30,
      state: "S",
      startTime: 12345,
    });
    expect(parseProcStat("garbage")).toBeNull();
  });
});

describe.skipIf(!hasProcFs())("findCallProcesses", () => {
  it("finds tagged processes started after the call, never older ones carrying the same tag", async () => {
    const tag = "test-tag-older-processes";
    const env = { ...process.env, [PROCESS_TAG_VARIABLE]: tag };
    const older = spawn("sleep", ["30"], { env, stdio: "ignore" });
    await sleep(50); // start times tick every 10 ms
    const root = spawn("sleep", ["30"], { env, stdio: "ignore", detached: true });
    try {
      const startedAt = processStartTime(root.pid as number);
      expect(startedAt).toBeGreaterThan(processStartTime(older.pid as number) as number);
      expect(findCallProcesses(root.pid as number, tag, startedAt)).toEqual([root.pid]);
      expect(findCallProcesses(root.pid as number, tag).sort()).toEqual([older.pid, root.pid].sort());
      expect(await killProcessTree(root.pid as number, tag, { startedAt })).toBe(true);
      // The root's death is the barrier: any signal to the older process was sent before it.
      expect(await survivorsAfter([root.pid as number], 5_000)).toEqual([]);
      expect(survivors([older.pid as number])).toEqual([older.pid]);
    } finally {
      older.kill("SIGKILL");
      root.kill("SIGKILL");
    }
  });
});
