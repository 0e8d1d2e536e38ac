/**
 * The spill area: where the full output of a tool call goes when its result is cut for the model.
 *
 * Layout: `<dataDir>/spill/<user key>/<chat key>/<time>-<tool>-<field>-<random>.txt`, where the keys are
 * sha256-derived (a user id or chat id never becomes a path by itself). Directories are created 0700, files 0600.
 * Only the owning user's chat may read its directory: the path policy's protection of the data directory makes an
 * exception for exactly `ToolContext.spillDirectory` (reads only).
 *
 * Files expire after `ttlMs` (default 7 days) and each user's area is kept within `quotaBytes` (default 256 MiB),
 * oldest files removed first; `cleanup()` runs at start and every `intervalMs` (default 1 hour). One spill file
 * holds at most `maxFileBytes` (default 64 MiB); a longer stream is recorded up to there and marked incomplete.
 */
import { createHash, randomBytes } from "node:crypto";
import { closeSync, openSync, writeSync } from "node:fs";
import { readdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeDirectoriesSync } from "./make-directory.js";

/** Options of a SpillArea (every one has a default). */
export interface SpillAreaOptions {
  /** Lifetime of a spill file in ms (default 7 days; `TOOLHOST_SPILL_TTL_DAYS`). */
  ttlMs?: number;
  /** Most bytes of spill files per user (default 256 MiB; `TOOLHOST_SPILL_QUOTA_MB`). */
  quotaBytes?: number;
  /** Most bytes in one spill file (default 64 MiB). */
  maxFileBytes?: number;
  /** Interval of the periodic cleanup in ms (default 1 hour). */
  intervalMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const MIB = 1024 * 1024;

function positiveFromEnv(name: string, scale: number): number | undefined {
  const raw = process.env[name];
  if (!raw) return undefined;
  const n = Number(raw);
  return Number.isFinite(n) && n > 0 ? n * scale : undefined;
}

function key(prefix: string, id: string): string {
  return `${prefix}${createHash("sha256").update(id, "utf8").digest("hex").slice(0, 32)}`;
}

function safeName(text: string): string {
  return text.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 40) || "out";
}

/** The periodic cleanups running in this process, by spill root. */
const janitors = new Map<string, NodeJS.Timeout>();

/** A file being written as output streams in (see SpillArea.openStream). */
export interface SpillStream {
  /** Adds bytes (kept in memory up to the threshold, then written to the file). Never throws. */
  write(chunk: Buffer): void;
  /** Bytes seen in total (also those past maxFileBytes, which are counted but not stored). */
  readonly totalBytes: number;
  /** Lines seen in total (newlines, plus one for a last line without a newline). */
  readonly totalLines: number;
  /**
   * Makes sure everything kept so far is in the file and closes it: returns the path and whether the file holds
   * the whole stream. Idempotent.
   */
  persist(): Promise<{ path: string; complete: boolean; bytes: number }>;
  /** Closes and removes the file (the output was not cut after all). Idempotent; never throws. */
  discard(): Promise<void>;
}

/** Per-user, per-chat spill directories with expiry and quota. */
export class SpillArea {
  readonly root: string;
  readonly ttlMs: number;
  readonly quotaBytes: number;
  readonly maxFileBytes: number;
  readonly intervalMs: number;
  #timer: NodeJS.Timeout | undefined;

  /** `dataDir` is the instance's data directory; spills live in `<dataDir>/spill`. */
  constructor(dataDir: string, options: SpillAreaOptions = {}) {
    this.root = join(dataDir, "spill");
    this.ttlMs = options.ttlMs ?? positiveFromEnv("TOOLHOST_SPILL_TTL_DAYS", DAY_MS) ?? 7 * DAY_MS;
    this.quotaBytes = options.quotaBytes ?? positiveFromEnv("TOOLHOST_SPILL_QUOTA_MB", MIB) ?? 256 * MIB;
    this.maxFileBytes = Math.min(options.maxFileBytes ?? 64 * MIB, this.quotaBytes);
    this.intervalMs = options.intervalMs ?? 60 * 60 * 1000;
  }

  /** The directory holding one user's spill files. */
  userDirectory(userId: string): string {
    return join(this.root, key("u", userId));
  }

  /** Recently computed chat directories (every tool call asks for its own; hashing twice per call showed up). */
  readonly #directories = new Map<string, string>();

  /** The directory of one user's chat (chatless calls share one directory per user). */
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

  #newPath(userId: string, chatId: string | null, tool: string, field: string): string {
    const dir = this.directoryFor(userId, chatId);
    makeDirectoriesSync(dir, 0o700);
    const stamp = new Date().toISOString().replace(/[:.]/g, "-");
    return join(dir, `${stamp}-${safeName(tool)}-${safeName(field)}-${randomBytes(4).toString("hex")}.txt`);
  }

  /** Writes `content` as a new spill file; returns its path. Throws on I/O failure. */
  async writeFile(userId: string, chatId: string | null, tool: string, field: string, content: string | Buffer) {
    const path = this.#newPath(userId, chatId, tool, field);
    const bytes = typeof content === "string" ? Buffer.from(content, "utf8") : content;
    await writeFile(path, bytes.subarray(0, this.maxFileBytes), { mode: 0o600 });
    return { path, complete: bytes.length <= this.maxFileBytes, bytes: Math.min(bytes.length, this.maxFileBytes) };
  }

  /**
   * Opens a stream for the full output of `field` of one call. Bytes stay in memory up to `memoryBytes`; past
   * that they go to a file (synchronous appends, so order and completeness never depend on back-pressure).
   */
  openStream(userId: string, chatId: string | null, tool: string, field: string, memoryBytes = 64 * 1024): SpillStream {
    const area = this;
    let memory: Buffer[] = [];
    let memoryLength = 0;
    let fd: number | null = null;
    let path: string | null = null;
    let stored = 0;
    let total = 0;
    let failed = false;
    let closed = false;
    let newlines = 0;
    let lastByte = -1;
    const append = (chunk: Buffer) => {
      if (failed || closed) return;
      const room = area.maxFileBytes - stored;
      if (room <= 0) return;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      try {
        if (fd === null) {
          path = area.#newPath(userId, chatId, tool, field);
          fd = openSync(path, "wx", 0o600);
        }
        let offset = 0;
        while (offset < part.length) offset += writeSync(fd, part, offset, part.length - offset);
        stored += part.length;
      } catch {
        failed = true;
      }
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
        if (fd === null && memoryLength + chunk.length <= memoryBytes) {
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
        if (!closed) {
          if (fd === null && path === null) {
            // Nothing written yet: create the file even for empty output.
            try {
              path = area.#newPath(userId, chatId, tool, field);
              fd = openSync(path, "wx", 0o600);
            } catch {
              failed = true;
            }
          }
          flushMemory();
          close();
        }
        if (failed || path === null) throw new Error(`could not write the spill file for ${tool}.${field}`);
        return { path, complete: stored === total, bytes: stored };
      },
      async discard() {
        memory = [];
        close();
        if (path) await rm(path, { force: true }).catch(() => {});
      },
    };
  }

  /**
   * Removes expired spill files, then, per user, the oldest files until the user's total is within the quota.
   * Returns how many files were removed. Never throws (a missing area is empty).
   */
  async cleanup(now = Date.now()): Promise<number> {
    let users: string[];
    try {
      users = await readdir(this.root);
    } catch {
      return 0;
    }
    let removed = 0;
    for (const user of users) removed += await this.#cleanUser(join(this.root, user), now);
    return removed;
  }

  /** cleanup() for one user's area only (run after each spill, so a burst cannot outgrow the quota for long). */
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
          if (now - info.mtimeMs > this.ttlMs) {
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
   * Runs cleanup now and then every `intervalMs` (an unref'd timer). Idempotent, and shared: areas over the same
   * directory in one process (several runtimes) run one periodic cleanup between them.
   */
  start(): void {
    if (this.#timer || janitors.has(this.root)) return;
    void this.cleanup();
    this.#timer = setInterval(() => void this.cleanup(), this.intervalMs);
    this.#timer.unref?.();
    janitors.set(this.root, this.#timer);
  }

  /** Stops the periodic cleanup this area started. */
  stop(): void {
    if (!this.#timer) return;
    clearInterval(this.#timer);
    if (janitors.get(this.root) === this.#timer) janitors.delete(this.root);
    this.#timer = undefined;
  }
}
