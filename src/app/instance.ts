/**
 * Who runs a turn: every instance names itself `<host>:<pid>:<random>` in the rows it owns (chat leases, agents,
 * suspended approval turns), so another process on the same host can tell at once that an owner has died instead
 * of waiting for its lease or heartbeat to go stale.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";

/** A new owner id for this process: `<host>:<pid>:<8 hex>`. */
export function newInstanceId(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/**
 * Whether `owner` names a process of this host that no longer runs (false for another host, this process, or an
 * id it cannot read). Reads both separators: `:` and the `/` of ids stored by earlier versions.
 */
export function ownerIsGone(owner: string | null | undefined): boolean {
  if (!owner) return false;
  const [host, pid] = owner.split(/[:/]/);
  const number = Number(pid);
  if (host !== hostname() || !Number.isInteger(number) || number <= 0 || number === process.pid) return false;
  try {
    process.kill(number, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}
