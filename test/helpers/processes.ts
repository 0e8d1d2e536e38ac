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

/**
 * Pids of `sleep <marker>` processes among the descendants of `roots` (through /proc/<pid>/task/<tid>/children):
 * for polling while a process under test starts its sleep, ~0.2 ms a look where a scan of every process
 * ({@link sleeping}) on a busy machine costs ~15 ms. An orphan is no descendant any more: whether a sleep is gone, or
 * outlived the process that ran it, is for {@link sleeping} to say.
 */
export function sleepingUnder(roots: number[], marker: string): number[] {
  const found: number[] = [];
  const queue = [...roots];
  while (queue.length > 0) {
    const pid = queue.pop()!;
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // ended while we looked
    }
    for (const task of tasks) {
      let children: string[] = [];
      try {
        children = readFileSync(`/proc/${pid}/task/${task}/children`, "latin1").split(" ").filter(Boolean);
      } catch {
        continue;
      }
      for (const child of children) {
        queue.push(Number(child));
        try {
          const argv = readFileSync(`/proc/${child}/cmdline`, "utf8").split("\0");
          if (argv[0]?.endsWith("sleep") && argv[1] === marker) found.push(Number(child));
        } catch {
          // ended while we looked
        }
      }
    }
  }
  return found;
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
