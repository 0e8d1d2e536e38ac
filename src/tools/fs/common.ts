/**
 * Shared pieces of the filesystem tools: capped reads through one descriptor, sha256, the freshness guard of
 * write_file / apply_patch, atomic writes (temp file + rename, mode kept), and the settings descriptors.
 */
import { createHash, randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  type Dirent,
  fstatSync,
  lstatSync,
  opendirSync,
  openSync,
  read,
  readSync,
  type Stats,
} from "node:fs";
import { chmod, link, lstat, open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { clip, NotFoundError, ToolArgumentError, ToolExecutionError } from "../../core/errors.js";
import { makeDirectories } from "../../core/make-directory.js";
import { descriptorLocation } from "../../core/path-opened.js";
import { pathSystemError } from "../../core/path-refusals.js";
import type { ToolContext } from "../../core/types.js";

/** Result of reading a whole file through one descriptor under a byte cap. */
export interface CappedRead {
  /** The bytes read (at most `cap`). */
  bytes: Buffer;
  /** sha256 (hex) of every byte read. Only the whole file's hash when `exceeded` is false. */
  sha256: string;
  /** True when the descriptor yielded more than `cap` bytes (the file is refused; `bytes` is incomplete). */
  exceeded: boolean;
}

/** 1 MiB. */
export const MIB = 1024 * 1024;

/** The ledger key of a chat (chatId, or "" for calls outside a chat). */
export function ledgerChat(context: ToolContext): string {
  // One-off calls (no chat) get a per-user scope: one user's read never vouches for another user's write.
  return context.chatId ?? `user:${context.userId}`;
}

/**
 * Files of at most this many bytes (by fstat) are read with synchronous calls on the event loop; larger ones, and
 * those whose size stat does not tell (/proc, sysfs: 0), through the thread pool, so one call's large read never
 * holds the other requests up. A local read of this size takes microseconds; the thread pool's round trips cost
 * more CPU than the read itself (see docs/filesystem.md, "Synchronous lookups").
 */
export const SYNC_READ_MAX_BYTES = 256 * 1024;

/**
 * At most this many entries of a directory are read with synchronous calls on the event loop (see
 * {@link readDirectory}); the rest, in a larger directory, through the thread pool.
 */
export const SYNC_READDIR_MAX_ENTRIES = 2000;

/**
 * Every entry of directory `real`: the first {@link SYNC_READDIR_MAX_ENTRIES} read synchronously (a few
 * microseconds each, where a thread-pool round trip cost more than a small directory's whole read), the rest of a
 * larger one through the thread pool, so a huge directory never holds the event loop for long whatever its file
 * system reports. Throws the system error of opening or reading it.
 */
export async function readDirectory(real: string): Promise<Dirent[]> {
  const dir = opendirSync(real, { bufferSize: 256 });
  const entries: Dirent[] = [];
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      entries.push(entry);
      if (entries.length >= SYNC_READDIR_MAX_ENTRIES) {
        for (let more = await dir.read(); more !== null; more = await dir.read()) entries.push(more);
        break;
      }
    }
  } finally {
    dir.closeSync();
  }
  return entries;
}

/** A regular file opened for reading: its descriptor (close it with closeSync) and what fstat said of it. */
export interface OpenedFile {
  fd: number;
  info: Stats;
}

/**
 * Opens a regular file read-only without following a final symlink and without blocking on FIFOs (O_NONBLOCK:
 * the open returns at once whatever the file is; fstat then refuses anything but a regular file). Synchronous, as
 * the path lookups before it. Throws NotFoundError, ToolArgumentError (`symlink_race`, `regular_file`) or the
 * classified system error.
 */
export function openRegularFile(real: string, input: string, argument = "path"): OpenedFile {
  let fd: number;
  try {
    fd = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new NotFoundError(`No such file: "${clip(input)}".`, { path: clip(input), argument });
    if (code === "ELOOP") {
      throw new ToolArgumentError(`"${clip(input)}" changed into a symbolic link while being opened; try again.`, {
        argument,
        rule: "symlink_race",
      });
    }
    // A socket (ENXIO) or a device without a driver or terminal (ENXIO, ENODEV) cannot be opened at all: it is
    // refused as what it is, like a FIFO, not as a system failure.
    if (code === "ENXIO" || code === "ENODEV") {
      const kind = lstatSyncOrUndefined(real);
      if (kind && !kind.isFile()) throw notRegularFile(kind, input, argument);
    }
    throw pathSystemError(error, input, argument);
  }
  let info: Stats;
  try {
    info = fstatSync(fd);
  } catch (error) {
    closeSync(fd);
    throw pathSystemError(error, input, argument);
  }
  if (!info.isFile()) {
    closeSync(fd);
    throw notRegularFile(info, input, argument);
  }
  return { fd, info };
}

/** The refusal of something that is not a regular file (`rule: "regular_file"`), naming what it is. */
function notRegularFile(info: Stats, input: string, argument: string): ToolArgumentError {
  const what = info.isDirectory()
    ? "a directory (use list_directory or glob)"
    : info.isFIFO()
      ? "a FIFO (named pipe)"
      : info.isCharacterDevice() || info.isBlockDevice()
        ? "a device"
        : info.isSocket()
          ? "a socket"
          : "not a regular file";
  return new ToolArgumentError(`"${clip(input)}" is ${what}; only regular files can be read.`, {
    argument,
    rule: "regular_file",
    path: clip(input),
  });
}

/** lstatSync, or undefined when it fails. */
function lstatSyncOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** fs.read on a descriptor, through the thread pool: resolves with the number of bytes read. */
function readThroughPool(fd: number, buffer: Buffer, offset: number, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    read(fd, buffer, offset, length, null, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead)));
  });
}

/**
 * Reads everything a regular file's descriptor yields, up to `cap` bytes, hashing as it goes. The cap bounds the
 * bytes read, not what stat claimed: a file that grows mid-read or under-reports its size stops at cap + 1 bytes
 * with `exceeded: true`. `sizeHint` is the size stat gave: a read that yields exactly that, short of what it asked
 * for, is taken as the end of the file; up to {@link SYNC_READ_MAX_BYTES} it is read synchronously. Throws the
 * signal's reason when aborted.
 */
export async function readAllCapped(fd: number, cap: number, signal?: AbortSignal, sizeHint = 0): Promise<CappedRead> {
  const hash = createHash("sha256");
  // Room for the size stat gave and one byte more (to see the file grew); 64 KiB when it gave none (/proc).
  let buffer = Buffer.allocUnsafe(Math.min(sizeHint > 0 ? sizeHint + 1 : 64 * 1024, cap + 1));
  let length = 0;
  const small = sizeHint > 0 && sizeHint <= SYNC_READ_MAX_BYTES;
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    if (length === buffer.length) {
      const grown = Buffer.allocUnsafe(Math.min(buffer.length * 2, cap + 1));
      buffer.copy(grown, 0, 0, length);
      buffer = grown;
    }
    const asked = buffer.length - length;
    // A small file is read on the event loop, and so is what it grows by, up to the same limit.
    const bytesRead =
      small && length <= SYNC_READ_MAX_BYTES
        ? readSync(fd, buffer, length, asked, null)
        : await readThroughPool(fd, buffer, length, asked);
    if (bytesRead === 0) break;
    hash.update(buffer.subarray(length, length + bytesRead));
    length += bytesRead;
    if (length > cap) return { bytes: buffer.subarray(0, cap), sha256: "", exceeded: true };
    // The size stat gave, read with room to spare: that is the end of the file, no second read to meet it. (Not
    // otherwise: /proc and sysfs files claim 0 or 4096 bytes and yield theirs in pieces.)
    if (bytesRead < asked && sizeHint > 0 && length === sizeHint) break;
  }
  return { bytes: buffer.subarray(0, length), sha256: hash.digest("hex"), exceeded: false };
}

/** sha256 (hex) of a buffer or string (UTF-8). */
export function sha256(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/** A check of a file just opened (its descriptor and fstat): the error that refuses it, or undefined. */
export type OpenedCheck = (fd: number, info: Stats) => Error | undefined;

/**
 * Opens the regular file `real` (see {@link openRegularFile}), reads it under `cap` (see {@link readAllCapped}) and
 * closes it. Resolves with the read and what fstat said; the caller decides what an exceeded cap means. `check`
 * (openedFileRefusal: the policy decided again on what was opened) runs before a byte is read; its error is thrown.
 */
export async function readRegularFile(
  real: string,
  input: string,
  cap: number,
  signal?: AbortSignal,
  check?: OpenedCheck,
): Promise<CappedRead & { info: Stats }> {
  const { fd, info } = openRegularFile(real, input);
  const refusal = check?.(fd, info);
  if (refusal) {
    closeSync(fd);
    throw refusal;
  }
  try {
    return { ...(await readAllCapped(fd, cap, signal, info.size)), info };
  } finally {
    closeSync(fd);
  }
}

/** Reads a whole existing regular file (no cap besides `cap`) for the freshness guard and patching. */
export async function readWholeFile(real: string, input: string, cap: number, signal?: AbortSignal) {
  const read = await readRegularFile(real, input, cap, signal);
  if (read.exceeded) {
    throw new ToolArgumentError(
      `"${clip(input)}" is larger than ${formatBytes(cap)}; it cannot be edited with this tool.`,
      {
        path: clip(input),
        rule: "size_cap",
      },
    );
  }
  return read;
}

/** "10 MiB", "256 KiB", "12 bytes". */
export function formatBytes(n: number): string {
  if (n >= MIB && n % MIB === 0) return `${n / MIB} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/**
 * The freshness guard (write_file, apply_patch): overwriting an existing file requires that this chat read it
 * (any view) and that its content still hashes to what the ledger recorded. Throws ToolExecutionError with
 * `rule: "read_before_write"` or `"stale_read"` telling the model to read the file first.
 */
export async function assertFresh(
  context: ToolContext,
  real: string,
  input: string,
  currentSha: string,
): Promise<void> {
  const recorded = await context.ledger.getRead(ledgerChat(context), real);
  // Whose reads count: the chat's, or (a call outside any chat) those of the user's calls outside any chat.
  const lastRead = context.chatId ? "this chat last read it" : "you last read it outside a chat";
  if (recorded === undefined) throw notReadRefusal(context, input);
  if (recorded !== currentSha) {
    throw new ToolExecutionError(
      `Refusing to overwrite "${clip(input)}": it changed since ${lastRead}. Call read_file on "${clip(input)}" again, re-apply your change to the current content, then retry.`,
      { path: clip(input), rule: "stale_read" },
    );
  }
}

/**
 * The `read_before_write` refusal (ToolExecutionError) of overwriting a file this chat (or, outside a chat, this
 * user's chat-less calls) never read, telling the model to read it first.
 */
export function notReadRefusal(context: ToolContext, input: string): ToolExecutionError {
  const notRead = context.chatId ? "this chat has not read it" : "you have not read it outside a chat";
  return new ToolExecutionError(
    `Refusing to overwrite "${clip(input)}": ${notRead}. Call read_file on "${clip(input)}" first (any view), then retry.`,
    { path: clip(input), rule: "read_before_write" },
  );
}

const pathLocks = new Map<string, Promise<void>>();

/**
 * Runs `fn` while holding this process's lock on `realPath` (a resolved, absolute path): calls for the same path
 * run one after another in arrival order, calls for other paths are not delayed. write_file, file_write and
 * apply_patch hold it around the freshness check and the write, so of N concurrent writers holding the same
 * stale read exactly one succeeds. The lock is per process: two server processes on one data directory are not
 * serialized with each other. Resolves or rejects with what `fn` does.
 */
export async function withPathLock<T>(realPath: string, fn: () => Promise<T>): Promise<T> {
  const previous = pathLocks.get(realPath) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  pathLocks.set(realPath, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    if (pathLocks.get(realPath) === tail) pathLocks.delete(realPath);
  }
}

/**
 * withPathLock over several paths: duplicates dropped, taken in sorted order (so two calls sharing paths cannot
 * deadlock), released when `fn` settles.
 */
export function withPathLocks<T>(realPaths: readonly string[], fn: () => Promise<T>): Promise<T> {
  const sorted = [...new Set(realPaths)].sort();
  const run = (i: number): Promise<T> => (i === sorted.length ? fn() : withPathLock(sorted[i]!, () => run(i + 1)));
  return run(0);
}

/**
 * Refuses a write target whose final component is a symbolic link (dangling or not, wherever it points):
 * O_NOFOLLOW semantics for write_file, file_write and apply_patch. `absolute` is the lexically normalized path
 * (links in parent directories are fine). Throws ToolArgumentError (validation_failed, rule "symlink_target")
 * telling the model to write to the link's target path directly.
 */
export async function refuseFinalSymlink(absolute: string, input: string, argument = "path"): Promise<void> {
  const info = await lstatOrUndefined(absolute).catch((error: unknown) => {
    throw pathSystemError(error, input, argument);
  });
  if (info?.isSymbolicLink()) {
    throw new ToolArgumentError(
      `"${clip(input)}" is a symbolic link; write to its target path directly (read_file and list_directory show where files are).`,
      { argument, path: clip(input), rule: "symlink_target" },
    );
  }
}

/** lstat that returns undefined for a missing path. */
export async function lstatOrUndefined(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Bytes of a temp file's name around the target's own name: "." + "." + 12 hex digits + ".toolhost-tmp". */
const TEMP_NAME_OVERHEAD = 1 + 1 + 12 + ".toolhost-tmp".length;

/**
 * The temp file name for a target named `name` in a directory whose path is `dirBytes` UTF-8 bytes long:
 * `.<name>.<random>.toolhost-tmp`, with `name` cut (on a character boundary) so the name stays within 255 bytes and
 * the temp file's path within 4,095, even for a target at either limit; when not even an empty stem fits the path,
 * the shortest form `.<random>`.
 */
export function tempName(name: string, dirBytes = 0): string {
  const random = randomBytes(6).toString("hex");
  const room = Math.min(255, 4095 - dirBytes - 1) - TEMP_NAME_OVERHEAD;
  if (room < 0) return `.${random}`;
  let stem = name;
  if (Buffer.byteLength(stem, "utf8") > room) {
    stem = Buffer.from(stem, "utf8")
      .subarray(0, room)
      .toString("utf8")
      .replace(/\uFFFD+$/, "");
    while (Buffer.byteLength(stem, "utf8") > room) stem = stem.slice(0, -1);
  }
  return `.${stem}.${random}.toolhost-tmp`;
}

/**
 * Writes `data` to `real` atomically: a temp file in the same directory, fsync, chmod to `mode` (the replaced
 * file's permission bits; new files get 0o666 minus the umask), then rename over the target.
 * Creates missing parent directories only when `createDirectories`; else throws NotFoundError. `check` runs on the
 * temp file as soon as it is open (openedFileRefusal: a directory on the way swapped for a link since the path was
 * checked puts it elsewhere); its error removes the temp file and is thrown. With `createOnly` the file must still
 * be new: what another process created at `real` since the caller looked is left alone (see linkInPlace).
 */
export async function atomicWrite(
  real: string,
  data: Uint8Array | string,
  options: {
    mode?: number;
    createDirectories?: boolean;
    input: string;
    check?: OpenedCheck;
    /** A new file: refused with this error if something appeared at `real` meanwhile (never replaced). */
    createOnly?: () => Error;
  },
): Promise<void> {
  const dir = dirname(real);
  const parent = await lstatOrUndefined(dir).catch((error: unknown) => {
    throw pathSystemError(error, options.input);
  });
  if (!parent) {
    if (!options.createDirectories) {
      throw new NotFoundError(
        `The parent directory of "${clip(options.input)}" does not exist. Pass createDirectories: true to create it.`,
        { path: clip(options.input), rule: "parent_missing" },
      );
    }
    await makeDirectories(dir).catch((error: unknown) => {
      throw pathSystemError(error, options.input);
    });
  } else if (!parent.isDirectory()) {
    throw new ToolArgumentError(
      `The parent of "${clip(options.input)}" is not a directory (it is a file or another kind of entry); write to a path inside a directory.`,
      { path: clip(options.input), rule: "not_a_directory" },
    );
  }
  const temp = join(dir, tempName(basename(real), Buffer.byteLength(dir, "utf8")));
  const handle = await open(
    temp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
    options.mode ?? 0o666,
  ).catch((error: unknown) => {
    throw pathSystemError(error, options.input);
  });
  try {
    const refusal = options.check?.(handle.fd, await handle.stat());
    if (refusal) {
      // Removed where it really lies (a link on the way led elsewhere), not through the swapped path.
      await rm(descriptorLocation(handle.fd) ?? temp, { force: true });
      throw refusal;
    }
    await handle.writeFile(data);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    if (options.mode !== undefined) await chmod(temp, options.mode & 0o7777);
    if (options.createOnly) await linkInPlace(temp, real, options.createOnly);
    else await rename(temp, real);
  } catch (error) {
    await rm(temp, { force: true });
    throw pathSystemError(error, options.input);
  }
}

/**
 * Puts the finished temp file at `real` only if nothing is there: a hard link, which fails when the name exists
 * (a rename would replace a file someone created since the write was planned), then the temp name is removed.
 * Throws `exists()` when the name is taken. A file system without hard links falls back to the rename.
 */
async function linkInPlace(temp: string, real: string, exists: () => Error): Promise<void> {
  try {
    await link(temp, real);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw exists();
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "EMLINK") throw error;
    await rename(temp, real);
    return;
  }
  await rm(temp, { force: true });
}
