/** Processes the tests start and look for (Linux /proc). */
import { readdirSync, readFileSync } from "node:fs";

/** Pids of live (not zombie) `sleep <marker>` processes. */
export function sleeping(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      if (!stat.includes("(sleep) ") || stat.includes("(sleep) Z")) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")[1] === marker) pids.push(Number(entry));
    } catch {
      // ended while we looked
    }
  }
  return pids;
}

/** SIGKILLs each pid that is still there (one that ended since it was listed is skipped, not an error). */
export function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
    }
  }
}
