/**
 * The spill area: where the full output of a tool call goes when its result is cut for the model.
 *
 * Every spill has a stable virtual name, `spill:<id>` (`id`: 24 lower-case hex digits, random), which is all a
 * user or model ever sees: read_file and grep accept it as a path (see path-policy.ts), and a name that is missing,
 * expired, or another user's (or another chat's) answers exactly alike. No server path is ever shown.
 *
 * Where the bytes live:
 * - With a {@link SpillStore} (the server and CLI: the database, see app/sql-spill-store.ts) the bytes are stored
 *   there, so every instance on one database reads every spill; the store keeps the per-user quota atomically (in
 *   the transaction that adds a spill) and one instance at a time removes expired spills. The local directory holds
 *   only streams being written and a cache of spills read on this instance.
 * - Without one (library use), the bytes are local files and this area keeps the expiry and quota itself.
 *
 * Local layout: `<dataDir>/spill/<user key>/<chat key>/<id>.txt`, where the keys are sha256-derived (a user id or
 * chat id never becomes a path by itself). Directories are created 0700, files 0600. Only the owning user's chat
 * may read its directory: the path policy's protection of the data directory makes an exception for exactly
 * `ToolContext.spillDirectory` (reads only).
 *
 * Spills expire after `ttlMs` (default 7 days) and each user's spills are kept within `quotaBytes` (default 256
 * MiB), oldest removed first; `cleanup()` runs at start and every `intervalMs` (default 1 hour). One spill holds at
 * most `maxFileBytes` (default 64 MiB); a longer stream is recorded up to there and marked incomplete.
 */

import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { readConfig } from "./config.js";

/** Options of a SpillArea (every one has a default). */
export interface SpillAreaOptions {
  /** Lifetime of a spill in ms (default 7 days; `TOOLHOST_SPILL_TTL_DAYS`). */
  ttlMs?: number;
  /** Most bytes of spills per user (default 256 MiB; `TOOLHOST_SPILL_QUOTA_MB`). */
  quotaBytes?: number;
  /** Most bytes in one spill (default 64 MiB). */
  maxFileBytes?: number;
  /** Interval of the periodic cleanup in ms (default 1 hour). */
  intervalMs?: number;
  /**
   * Where spills are kept (the database, shared by every instance); absent: local files in `<dataDir>/spill`.
   */
  store?: SpillStore;
}

/** One spill handed to a {@link SpillStore}. */
export interface SpillRecord {
  /** The spill's id (24 lower-case hex digits): its virtual name is `spill:<id>`. */
  id: string;
  userId: string;
  chatId: string | null;
  tool: string;
  field: string;
  /** The stored bytes (at most the area's maxFileBytes). */
  bytes: Buffer;
  /** False when `bytes` is only the first part of the output (it reached the size limit). */
  complete: boolean;
}

/**
 * Shared storage of spills (the database-backed one is app/sql-spill-store.ts). Ownership is the pair (user, chat):
 * `get` and `has` answer undefined/false for a spill of another user or another chat exactly as for a missing one.
 */
export interface SpillStore {
  /**
   * Stores `record`, then, in the same transaction (so instances sharing the store count one total), removes the
   * user's expired spills and the oldest ones until the user's spills total at most `limits.quotaBytes`. Throws the
   * storage error.
   */
  put(record: SpillRecord, limits: { quotaBytes: number; ttlMs: number }): Promise<void>;
  /** The bytes of the spill `id` of this user's chat (`chatId` null: calls outside a chat), or undefined. */
  get(userId: string, chatId: string | null, id: string): Promise<Buffer | undefined>;
  /** Whether `get` would find it (without reading the bytes). */
  has(userId: string, chatId: string | null, id: string): Promise<boolean>;
  /**
   * Removes spills older than `ttlMs` (created before `now - ttlMs`); one instance at a time does it (another
   * running cleanup makes this call return 0 at once). Returns how many were removed.
   */
  cleanup(now: number, ttlMs: number): Promise<number>;
}

/** The virtual name of a spill: `spill:` and 24 lower-case hex digits. */
export const SPILL_NAME_PATTERN = /^spill:([0-9a-f]{24})$/;

/** Whether `path` is written as a spill name (`spill:…`, valid or not): such a path never names a file. */
export function isSpillName(path: string): boolean {
  return path.startsWith("spill:");
}

/** The local file name of a spill id, and back. */
const FILE_PATTERN = /^([0-9a-f]{24})\.txt$/;

/** The spill id of a local spill file name (`<id>.txt`), or undefined. */
export function spillIdOfFileName(name: string): string | undefined {
  return FILE_PATTERN.exec(name)?.[1];
}

const DAY_MS = 24 * 60 * 60 * 1000;
const MIB = 1024 * 1024;
/** How long a spill read from the store stays cached on this instance. */
const CACHE_MS = 60 * 60 * 1000;

function key(prefix: string, id: string): string {
  return `${prefix}${createHash("sha256").update(id, "utf8").digest("hex").slice(0, 32)}`;
}

function newId(): string {
  return randomBytes(12).toString("hex");
}

/** The periodic cleanups running in this process, by spill root. */
const janitors = new Map<string, NodeJS.Timeout>();

/** Where a spill went: its virtual name (`path`, the only name shown), whether it is whole, and its stored size. */
export interface SavedSpill {
  /** The spill's virtual name, `spill:<id>` (never a server path). */
  path: string;
  complete: boolean;
  bytes: number;
}

/** A spill being written as output streams in (see SpillArea.openStream). */
export interface SpillStream {
  /** Adds bytes (kept in memory up to the threshold, then written to a local file). Never throws. */
  write(chunk: Buffer): void;
  /** Bytes seen in total (also those past maxFileBytes, which are counted but not stored). */
  readonly totalBytes: number;
  /** Lines seen in total (newlines, plus one for a last line without a newline). */
  readonly totalLines: number;
  /**
   * Makes sure everything kept so far is stored (in the store when the area has one) and returns the spill's name
   * and whether it holds the whole stream. Idempotent.
   */
  persist(): Promise<SavedSpill>;
  /** Closes and removes what was written (the output was not cut after all). Idempotent; never throws. */
  discard(): Promise<void>;
}

/** Per-user, per-chat spills with expiry and quota, named `spill:<id>`. */
export class SpillArea {
  readonly root: string;
  readonly ttlMs: number;
  readonly quotaBytes: number;
  readonly maxFileBytes: number;
  readonly intervalMs: number;
  /** The shared store, or undefined: local files only. */
  readonly store: SpillStore | undefined;
  #timer: NodeJS.Timeout | undefined;
  #first: NodeJS.Timeout | undefined;

  /** `dataDir` is the instance's data directory; local files live in `<dataDir>/spill`. */
  constructor(dataDir: string, options: SpillAreaOptions = {}) {
    this.root = join(dataDir, "spill");
    const config = options.ttlMs === undefined || options.quotaBytes === undefined ? readConfig() : undefined;
    this.ttlMs = options.ttlMs ?? config?.spillTtlMs ?? 7 * DAY_MS;
    this.quotaBytes = options.quotaBytes ?? config?.spillQuotaBytes ?? 256 * MIB;
    this.maxFileBytes = Math.min(options.maxFileBytes ?? 64 * MIB, this.quotaBytes);
    this.intervalMs = options.intervalMs ?? 60 * 60 * 1000;
    this.store = options.store;
  }

  /** The directory holding one user's local spill files. */
  userDirectory(userId: string): string {
    return join(this.root, key("u", userId));
  }

  /** Recently computed chat directories (every tool call asks for its own; hashing twice per call showed up). */
  readonly #directories = new Map<string, string>();

  /** The local directory of one user's chat (chatless calls share one directory per user). */
  directoryFor(userId: string, chatId: string | null): string {
    const cacheKey = `${userId}\0${chatId ?? ""}`;
    let dir = this.#directories.get(cacheKey);
    if (dir === undefined) {
      dir = join(this.userDirectory(userId), chatId ? key("c", chatId) : "nochat");
      if (this.#directories.size >= 1000) this.#directories.clear();
      this.#directories.set(cacheKey, dir);
    }
    return dir;
  }

  /** A new id and its local file (the directory created). */
  #newFile(userId: string, chatId: string | null): { id: string; file: string } {
    const dir = this.directoryFor(userId, chatId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const id = newId();
    // With a store the local file is only the stream's buffer: a name no reader resolves.
    return { id, file: join(dir, this.store ? `.${id}.part` : `${id}.txt`) };
  }

  /** Hands `bytes` to the store (with a store); returns the saved spill. */
  async #stored(
    id: string,
    userId: string,
    chatId: string | null,
    tool: string,
    field: string,
    bytes: Buffer,
    complete: boolean,
  ): Promise<SavedSpill> {
    if (this.store) {
      await this.store.put(
        { id, userId, chatId, tool, field, bytes, complete },
        { quotaBytes: this.quotaBytes, ttlMs: this.ttlMs },
      );
    }
    return { path: `spill:${id}`, complete, bytes: bytes.length };
  }

  /** Saves `content` as a new spill; returns its name. Throws on a storage failure. */
  async writeFile(
    userId: string,
    chatId: string | null,
    tool: string,
    field: string,
    content: string | Buffer,
  ): Promise<SavedSpill> {
    const all = typeof content === "string" ? Buffer.from(content, "utf8") : content;
    const bytes = all.subarray(0, this.maxFileBytes);
    const complete = all.length <= this.maxFileBytes;
    if (this.store) return this.#stored(newId(), userId, chatId, tool, field, bytes, complete);
    const { id, file } = this.#newFile(userId, chatId);
    await writeFile(file, bytes, { mode: 0o600, flag: "wx" });
    return { path: `spill:${id}`, complete, bytes: bytes.length };
  }

  /**
   * The local file holding spill `name` (`spill:<id>`) of this user's chat, ready to read, or undefined when there
   * is no such spill for them (missing, expired, malformed, another user's or another chat's: all alike). With a
   * store, the bytes are fetched once into this instance's cache (inside the chat's spill directory).
   */
  async open(userId: string, chatId: string | null, name: string): Promise<string | undefined> {
    const id = SPILL_NAME_PATTERN.exec(name)?.[1];
    if (!id) return undefined;
    const dir = this.directoryFor(userId, chatId);
    const file = join(dir, `${id}.txt`);
    if (!this.store) return (await isFile(file)) ? file : undefined;
    if (await isFile(file)) return (await this.store.has(userId, chatId, id)) ? file : undefined;
    const bytes = await this.store.get(userId, chatId, id);
    if (!bytes) return undefined;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const temp = join(dir, `.${id}.${randomBytes(4).toString("hex")}.tmp`);
    await writeFile(temp, bytes, { mode: 0o600, flag: "wx" });
    await rename(temp, file);
    return file;
  }

  /**
   * Opens a stream for the full output of `field` of one call. Bytes stay in memory up to `memoryBytes`; past
   * that they go to a local file (synchronous appends, so order and completeness never depend on back-pressure);
   * persist() hands them to the store when the area has one.
   */
  openStream(userId: string, chatId: string | null, tool: string, field: string, memoryBytes = 64 * 1024): SpillStream {
    const area = this;
    let memory: Buffer[] = [];
    let memoryLength = 0;
    let fd: number | null = null;
    let target: { id: string; file: string } | null = null;
    let stored = 0;
    let total = 0;
    let failed = false;
    let closed = false;
    let saved: SavedSpill | null = null;
    let newlines = 0;
    let lastByte = -1;
    const openFile = () => {
      target = area.#newFile(userId, chatId);
      fd = openSync(target.file, "wx", 0o600);
    };
    const append = (chunk: Buffer) => {
      if (failed || closed) return;
      const room = area.maxFileBytes - stored;
      if (room <= 0) return;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      try {
        if (fd === null) openFile();
        let offset = 0;
        while (offset < part.length) offset += writeSync(fd as unknown as number, part, offset, part.length - offset);
        stored += part.length;
      } catch {
        failed = true;
      }
    };
    const keptInMemory = () => {
      const room = area.maxFileBytes;
      const all = Buffer.concat(memory);
      return all.length > room ? all.subarray(0, room) : all;
    };
    const flushMemory = () => {
      const pending = memory;
      memory = [];
      memoryLength = 0;
      for (const chunk of pending) append(chunk);
    };
    const close = () => {
      if (fd !== null) {
        try {
          closeSync(fd);
        } catch {
          // already closed
        }
        fd = null;
      }
      closed = true;
    };
    return {
      write(chunk: Buffer) {
        total += chunk.length;
        if (chunk.length > 0) {
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) newlines++;
          lastByte = chunk[chunk.length - 1] ?? -1;
        }
        if (fd === null && target === null && memoryLength + chunk.length <= memoryBytes) {
          memory.push(Buffer.from(chunk));
          memoryLength += chunk.length;
          return;
        }
        flushMemory();
        append(chunk);
      },
      get totalBytes() {
        return total;
      },
      get totalLines() {
        return newlines + (total > 0 && lastByte !== 10 ? 1 : 0);
      },
      async persist() {
        if (saved) return saved;
        if (failed) throw new Error(`could not write the spill file for ${tool}.${field}`);
        const local = target as { id: string; file: string } | null;
        if (area.store) {
          // Everything goes to the store: from memory, or from the local buffer file.
          let bytes: Buffer;
          if (local === null) {
            bytes = keptInMemory();
            stored = bytes.length;
          } else {
            flushMemory();
            close();
            bytes = await readFile(local.file);
            await rm(local.file, { force: true }).catch(() => {});
          }
          memory = [];
          closed = true;
          saved = await area.#stored(local?.id ?? newId(), userId, chatId, tool, field, bytes, stored === total);
          return saved;
        }
        if (!closed) {
          if (fd === null && local === null) {
            // Nothing written yet: create the file even for empty output.
            try {
              openFile();
            } catch {
              failed = true;
            }
          }
          flushMemory();
          close();
        }
        const done = target as { id: string; file: string } | null;
        if (failed || done === null) throw new Error(`could not write the spill file for ${tool}.${field}`);
        saved = { path: `spill:${done.id}`, complete: stored === total, bytes: stored };
        return saved;
      },
      async discard() {
        memory = [];
        close();
        const local = target as { id: string; file: string } | null;
        if (local && !saved) await rm(local.file, { force: true }).catch(() => {});
      },
    };
  }

  /**
   * Removes expired spills, then, for local files, per user the oldest files until the user's total is within the
   * quota (a store keeps the quota itself when a spill is added; its local cache is kept for an hour). Returns how
   * many spills (and cached copies) were removed. Never throws (a missing area is empty; a store error counts 0).
   */
  async cleanup(now = Date.now()): Promise<number> {
    let removed = 0;
    if (this.store) removed += await this.store.cleanup(now, this.ttlMs).catch(() => 0);
    let users: string[];
    try {
      users = await readdir(this.root);
    } catch {
      return removed;
    }
    for (const user of users) removed += await this.#cleanUser(join(this.root, user), now);
    return removed;
  }

  /** cleanup() for one user's local files only (run after each spill, so a burst cannot outgrow the quota for long). */
  cleanupUser(userId: string, now = Date.now()): Promise<number> {
    return this.#cleanUser(this.userDirectory(userId), now);
  }

  async #cleanUser(userDir: string, now: number): Promise<number> {
    let removed = 0;
    const files: { path: string; mtime: number; size: number }[] = [];
    let chats: string[] = [];
    try {
      chats = await readdir(userDir);
    } catch {
      return 0;
    }
    // A cached copy lives an hour; a stream's buffer file as long as a spill (a call may run long).
    const ttl = this.store ? Math.min(CACHE_MS, this.ttlMs) : this.ttlMs;
    for (const chat of chats) {
      const chatDir = join(userDir, chat);
      let names: string[] = [];
      try {
        names = await readdir(chatDir);
      } catch {
        continue;
      }
      for (const name of names) {
        const path = join(chatDir, name);
        try {
          const info = await stat(path);
          if (!info.isFile()) continue;
          const limit = name.endsWith(".txt") ? ttl : this.ttlMs;
          if (now - info.mtimeMs > limit) {
            await rm(path, { force: true });
            removed++;
          } else {
            files.push({ path, mtime: info.mtimeMs, size: info.size });
          }
        } catch {
          // vanished meanwhile
        }
      }
    }
    let total = files.reduce((sum, f) => sum + f.size, 0);
    files.sort((a, b) => a.mtime - b.mtime || (a.path < b.path ? -1 : 1));
    for (const file of files) {
      if (total <= this.quotaBytes) break;
      await rm(file.path, { force: true }).catch(() => {});
      total -= file.size;
      removed++;
    }
    return removed;
  }

  /**
   * Runs cleanup now (with a store: after a minute, so a short CLI process never writes to the database for it) and
   * then every `intervalMs` (unref'd timers). Idempotent, and shared: areas over the same directory in one process
   * (several runtimes) run one periodic cleanup between them.
   */
  start(): void {
    if (this.#timer || janitors.has(this.root)) return;
    if (this.store) {
      this.#first = setTimeout(() => void this.cleanup(), Math.min(60_000, this.intervalMs));
      this.#first.unref?.();
    } else {
      void this.cleanup();
    }
    this.#timer = setInterval(() => void this.cleanup(), this.intervalMs);
    this.#timer.unref?.();
    janitors.set(this.root, this.#timer);
  }

  /** Stops the periodic cleanup this area started. */
  stop(): void {
    clearTimeout(this.#first);
    this.#first = undefined;
    if (!this.#timer) return;
    clearInterval(this.#timer);
    if (janitors.get(this.root) === this.#timer) janitors.delete(this.root);
    this.#timer = undefined;
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
