/**
 * Who runs what: every instance names itself `<host>:<pid>:<random>` in the rows it owns (chat leases, agents,
 * suspended approval turns), so another process on the same host can tell at once that an owner has died instead
 * of waiting for its lease or heartbeat to go stale. `<host>` is the host name and, on Linux, the PID namespace
 * (`name@4026531836`): a pid only means something inside its namespace, and two containers may share a host name
 * (host networking) while each has pids of its own.
 */
import { randomUUID } from "node:crypto";
import { readlinkSync } from "node:fs";
import { hostname } from "node:os";

let cachedHost: string | undefined;

/** This process's `<host>`: the host name, plus `@<PID namespace id>` where the system names it (Linux). */
function hostKey(): string {
  if (cachedHost !== undefined) return cachedHost;
  let namespace = "";
  try {
    namespace = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "";
  } catch {
    // not Linux, or no /proc: the host name alone
  }
  cachedHost = namespace ? `${hostname()}@${namespace}` : hostname();
  return cachedHost;
}

/** A new owner id for this process: `<host>:<pid>:<8 hex>`. */
export function newInstanceId(): string {
  return `${hostKey()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/**
 * Whether `owner` names a process of this host (and PID namespace) that no longer runs: false for another host or
 * namespace, this process, or an id it cannot read (e.g. one stored by an earlier version, which named no
 * namespace) — then only a stale lease or heartbeat tells. Reads both separators: `:` and the `/` of older ids.
 */
export function ownerIsGone(owner: string | null | undefined): boolean {
  if (!owner) return false;
  const [host, pid] = owner.split(/[:/]/);
  const number = Number(pid);
  if (host !== hostKey() || !Number.isInteger(number) || number <= 0 || number === process.pid) return false;
  try {
    process.kill(number, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}
