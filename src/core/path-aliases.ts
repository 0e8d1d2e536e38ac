/**
 * Hard links to denied and protected files. A hard link is the same file under another name, and nothing on the way
 * to it (no symbolic link, no `..`) tells: a denied file linked into an allowed directory resolves to the allowed
 * name. What gives it away is its identity (device and inode) and its link count: a file with one name has no
 * alias. So a regular file with more than one name is compared with the denied and protected entries that are
 * regular files with more than one name; equal identities are the same file, refused as the entry is. (A hard link
 * to a file inside a denied directory cannot be told from any other file with two names, short of walking the
 * directory: deny the file itself to cover its aliases.)
 */
import { type BigIntStats, fstatSync, type Stats, statSync } from "node:fs";

/** The identity of a file as text: `device:inode` (bigint, exact for any inode number). */
function identity(info: BigIntStats): string {
  return `${info.dev}:${info.ino}`;
}

/** stat (path) or fstat (descriptor) with bigint fields, or undefined when it fails. */
function exactStat(target: string | number): BigIntStats | undefined {
  try {
    return typeof target === "number" ? fstatSync(target, { bigint: true }) : statSync(target, { bigint: true });
  } catch {
    return undefined;
  }
}

/**
 * The identities (`device:inode`) of the entries of `denied` (absolute paths: deniedPaths and protected paths) that
 * are regular files with more than one name: the only denied files another name can reach. Looked up afresh on
 * every call (a link made a moment ago counts).
 */
export function linkedDeniedFiles(denied: readonly string[]): Set<string> {
  const found = new Set<string>();
  for (const entry of denied) {
    const info = exactStat(entry);
    if (info?.isFile() && info.nlink > 1n) found.add(identity(info));
  }
  return found;
}

/**
 * True when the regular file `info` describes (the stat of `target`, a path or an open descriptor) is one of the
 * entries of `denied` under another name (a hard link). Costs nothing for a file with one name; otherwise one exact
 * stat of the file and one of each entry.
 */
export function isDeniedFileAlias(denied: readonly string[], info: Stats, target: string | number): boolean {
  if (!info.isFile() || info.nlink <= 1 || denied.length === 0) return false;
  return isLinkedDeniedFile(linkedDeniedFiles(denied), target);
}

/**
 * Whether the file at `target` (a path or an open descriptor) is one of the files `identities` names (as
 * {@link linkedDeniedFiles} gives them): false at once for an empty set; otherwise one exact stat, and a file with
 * one name, or one that cannot be read, is no alias.
 */
export function isLinkedDeniedFile(identities: ReadonlySet<string>, target: string | number): boolean {
  if (identities.size === 0) return false;
  const info = exactStat(target);
  if (!info?.isFile()) return false;
  return info.nlink > 1n && identities.has(identity(info));
}
