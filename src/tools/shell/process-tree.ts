/**
 * Finding and killing every process a shell call started ("bash / zsh / powershell":
 * "The process is killed with SIGKILL after the configured timeout"; children and grandchildren,
 * background jobs, `nohup`, and processes that left the group with `setsid`).
 *
 * The runner starts each child as the leader of a new session and process group (`detached: true` calls setsid()),
 * and tags its environment with a per-call marker (PROCESS_TAG_VARIABLE=<uuid>). On Linux a process belongs to the
 * call when, in /proc, it
 * - is in the call's process group or session (background jobs, `nohup`, double forks without setsid), or
 * - descends from the child or from another member through the parent links still present, or
 * - carries the marker in its initial environment (/proc/<pid>/environ): a `setsid` daemon that double-forked
 *   and was reparented to init keeps it, since environments are inherited.
 * Only processes started after the child are considered, so nothing older than the call is ever examined or
 * killed, whatever pids get recycled. Members are SIGKILLed (their process groups too), and the scan repeats until none is left alive, so a process
 * forked during the kill is caught by the next round. A process that both leaves the session and execs with a
 * scrubbed environment (`env -i setsid …`) after its parent died escapes; only a cgroup or container closes that gap.
 *
 * Elsewhere: POSIX systems without /proc get the process-group kill; Windows gets `taskkill /T /F`.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/** Name of the environment variable that tags every process of one call. */
export const PROCESS_TAG_VARIABLE = "TOOLHOST_PROCESS_TAG";

/** One row of the process table, as read from /proc/<pid>/stat. */
export interface ProcessStat {
  pid: number;
  ppid: number;
  pgrp: number;
  session: number;
  /** One-letter state (R, S, D, Z, T, …). */
  state: string;
  /** Start time in clock ticks since boot (field 22 of /proc/<pid>/stat). */
  startTime: number;
}

/** Parses the text of /proc/<pid>/stat; null when malformed. The command name may hold spaces and parentheses. */
export function parseProcStat(text: string): ProcessStat | null {
  const close = text.lastIndexOf(")");
  const open = text.indexOf("(");
  if (open < 1 || close < open) return null;
  const pid = Number.parseInt(text.slice(0, open), 10);
  const fields = text
    .slice(close + 2)
    .trim()
    .split(" ");
  const [state, ppid, pgrp, session] = [fields[0], Number(fields[1]), Number(fields[2]), Number(fields[3])];
  if (!state || !Number.isInteger(pid) || !Number.isInteger(ppid) || !Number.isInteger(pgrp)) return null;
  const startTime = Number(fields[19]);
  return { pid, ppid, pgrp, session, state, startTime: Number.isFinite(startTime) ? startTime : 0 };
}

/** True when this platform exposes a Linux-style /proc with stat and environ files. */
export function hasProcFs(): boolean {
  try {
    readFileSync("/proc/self/stat");
    return true;
  } catch {
    return false;
  }
}

/** Every process visible in /proc (empty when /proc is unavailable). */
export function listProcesses(): ProcessStat[] {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const out: ProcessStat[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = parseProcStat(readFileSync(`/proc/${name}/stat`, "utf8"));
      if (stat) out.push(stat);
    } catch {
      // exited while we looked
    }
  }
  return out;
}

/** The start time (clock ticks since boot) of a live process, or undefined (no /proc, or gone). */
export function processStartTime(pid: number): number | undefined {
  try {
    const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
    return stat && stat.state !== "Z" ? stat.startTime : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a process is alive (exists and is not a zombie). Uses /proc where present, else `kill(pid, 0)`. */
export function isProcessAlive(pid: number): boolean {
  if (hasProcFs()) {
    try {
      const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
      return stat !== null && stat.state !== "Z" && stat.state !== "X";
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function carriesTag(pid: number, needle: Buffer): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`).includes(needle);
  } catch {
    return false;
  }
}

/**
 * The live processes that belong to the call whose child is `rootPid` and whose environment tag is `tag`
 * (see the module comment). Never includes this process or its parent. `startedAt` (the root's start time, in
 * clock ticks) skips every process older than the call, so only newer ones have their environment read.
 * Linux only; empty elsewhere.
 */
export function findCallProcesses(rootPid: number, tag: string, startedAt = 0): number[] {
  const table = listProcesses().filter((p) => p.state !== "Z" && p.state !== "X");
  const self = new Set([process.pid, process.ppid]);
  const needle = Buffer.from(`${PROCESS_TAG_VARIABLE}=${tag}\0`);
  const members = new Set<number>();
  for (const p of table) {
    if (self.has(p.pid) || p.startTime < startedAt) continue;
    if (p.pid === rootPid || p.pgrp === rootPid || p.session === rootPid || carriesTag(p.pid, needle)) {
      members.add(p.pid);
    }
  }
  // Close over parent links: descendants of any member (the root's own children only while the root is alive,
  // so a recycled pid can never pull in a stranger's children).
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of table) {
      if (members.has(p.pid) || self.has(p.pid) || p.startTime < startedAt) continue;
      if (members.has(p.ppid)) {
        members.add(p.pid);
        grew = true;
      }
    }
  }
  return [...members];
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone, or not ours
  }
}

/** Options of killProcessTree. */
export interface KillTreeOptions {
  /** Most scan-and-kill rounds on Linux (default 25). */
  maxRounds?: number;
  /** The root's start time in clock ticks (processStartTime right after spawn); older processes are skipped. */
  startedAt?: number;
}

/**
 * SIGKILLs the call's process group, then (Linux) repeatedly scans for and kills every member until none is alive.
 * Resolves true when nothing of the call is left alive, false when members survived every round (they are then
 * unkillable, e.g. in uninterruptible sleep). Never throws.
 */
export async function killProcessTree(rootPid: number, tag: string, options: KillTreeOptions = {}): Promise<boolean> {
  if (process.platform === "win32") {
    await new Promise<void>((resolve) => {
      const killer = spawn("taskkill", ["/pid", String(rootPid), "/T", "/F"], { stdio: "ignore", windowsHide: true });
      killer.once("error", () => resolve());
      killer.once("exit", () => resolve());
    });
    return true;
  }
  const procFs = hasProcFs();
  // Snapshot the tree while the parent links still exist (killing a parent reparents its children to init).
  const initial = procFs ? findCallProcesses(rootPid, tag, options.startedAt) : [];
  signal(-rootPid, "SIGKILL");
  signal(rootPid, "SIGKILL");
  if (!procFs) return true;
  const rounds = options.maxRounds ?? 25;
  for (let round = 0; round < rounds; round++) {
    const members = round === 0 ? initial : findCallProcesses(rootPid, tag, options.startedAt);
    if (members.length === 0) return true;
    for (const pid of members) {
      signal(-pid, "SIGKILL"); // its own group, when it leads one (setsid daemons)
      signal(pid, "SIGKILL");
    }
    await sleep(round < 4 ? 5 : 20);
  }
  return findCallProcesses(rootPid, tag, options.startedAt).length === 0;
}
