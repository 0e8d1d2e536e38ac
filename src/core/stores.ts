/**
 * Storage interfaces the core depends on, with in-memory implementations for library use and tests.
 * The server and CLI plug in the database-backed ones (src/storage/).
 */

import { createRequire } from "node:module";
import type { pino as Pino } from "pino";
import { readConfig } from "./config.js";
import type { AuditEntry, AuditEvent, AuditSink, FreshnessLedger, Logger, SavedToolSettings } from "./types.js";

/** A saved settings row with its version: 0 before the first write, +1 on every committed write. */
export interface VersionedToolSettings extends SavedToolSettings {
  version: number;
}

/** The row a {@link ToolSettingsStore.modify} change writes back (it replaces the stored row as a whole). */
export interface ToolSettingsWrite {
  enabled: boolean | null;
  parameters: Record<string, unknown>;
  locked?: string[];
}

/** JSON text of a value with object keys sorted, so that equal data compares equal whatever the key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}

/**
 * Whether writing `next` over `current` would change nothing: same enabled flag, same parameters (whatever their key
 * order) and same locks. ToolSettingsService.update then writes nothing and keeps the version (the API's ETag).
 */
export function unchangedSettings(current: VersionedToolSettings | undefined, next: ToolSettingsWrite): boolean {
  const enabled = typeof current?.enabled === "boolean" ? current.enabled : null;
  return (
    enabled === next.enabled &&
    canonicalJson([...(current?.locked ?? [])].sort()) === canonicalJson([...(next.locked ?? [])].sort()) &&
    canonicalJson(current?.parameters ?? {}) === canonicalJson(next.parameters)
  );
}

/** Per-user saved tool settings (the `user_tool_settings` repository). */
export interface ToolSettingsStore {
  /** Every saved settings row of the user, keyed by tool name. */
  getAll(userId: string): Promise<Map<string, VersionedToolSettings>>;
  /** One saved row, or undefined. */
  get(userId: string, toolName: string): Promise<VersionedToolSettings | undefined>;
  /** Creates or replaces the user's row for the tool (no read: prefer {@link modify} for a change). */
  save(
    userId: string,
    toolName: string,
    settings: { enabled: boolean | null; parameters: Record<string, unknown>; locked?: string[] },
  ): Promise<void>;
  /**
   * Atomic read-modify-write of one row: reads the current row (undefined when none; its `version` is 0 then)
   * with the row locked against every other writer (other processes included, for the database-backed store),
   * calls `change`, writes what it returns with the version incremented, and resolves to the row as written.
   * `change` may throw to abort without writing (the error propagates) and may run more than once (retries), so
   * it must not have side effects.
   */
  modify(
    userId: string,
    toolName: string,
    change: (current: VersionedToolSettings | undefined) => ToolSettingsWrite,
  ): Promise<VersionedToolSettings>;
}

/** Settings kept in process memory; lost on exit. */
export class MemoryToolSettingsStore implements ToolSettingsStore {
  readonly #rows = new Map<string, Map<string, VersionedToolSettings>>();

  async getAll(userId: string): Promise<Map<string, VersionedToolSettings>> {
    return new Map(this.#rows.get(userId) ?? []);
  }

  async get(userId: string, toolName: string): Promise<VersionedToolSettings | undefined> {
    return this.#rows.get(userId)?.get(toolName);
  }

  async save(
    userId: string,
    toolName: string,
    settings: { enabled: boolean | null; parameters: Record<string, unknown>; locked?: string[] },
  ): Promise<void> {
    let user = this.#rows.get(userId);
    if (!user) {
      user = new Map();
      this.#rows.set(userId, user);
    }
    const version = (user.get(toolName)?.version ?? 0) + 1;
    user.set(toolName, { ...structuredClone(settings), version });
  }

  async modify(
    userId: string,
    toolName: string,
    change: (current: VersionedToolSettings | undefined) => ToolSettingsWrite,
  ): Promise<VersionedToolSettings> {
    // Synchronous from read to write: nothing else runs in between on one event loop.
    const current = this.#rows.get(userId)?.get(toolName);
    const next = change(current ? structuredClone(current) : undefined);
    await this.save(userId, toolName, next);
    return structuredClone(this.#rows.get(userId)!.get(toolName)!);
  }
}

/** Freshness ledger kept in process memory. */
export class MemoryFreshnessLedger implements FreshnessLedger {
  readonly #reads = new Map<string, string>();

  async recordRead(chatId: string, absolutePath: string, sha256: string): Promise<void> {
    this.#reads.set(`${chatId}\0${absolutePath}`, sha256);
  }

  async getRead(chatId: string, absolutePath: string): Promise<string | undefined> {
    return this.#reads.get(`${chatId}\0${absolutePath}`);
  }
}

/**
 * Audit sink that keeps the newest entries and events in arrays (tests, library use without a database): at most
 * `limit` of each (default {@link MEMORY_AUDIT_LIMIT}), the oldest dropped first, so a long-running process that
 * uses the default runtime does not grow without bound.
 */
export class MemoryAuditSink implements AuditSink {
  readonly entries: AuditEntry[] = [];
  readonly events: AuditEvent[] = [];
  readonly #limit: number;

  constructor(options: { limit?: number } = {}) {
    this.#limit = Math.max(1, options.limit ?? MEMORY_AUDIT_LIMIT);
  }

  async record(entry: AuditEntry): Promise<void> {
    if (this.entries.push(entry) > this.#limit) this.entries.shift();
  }

  async recordEvent(event: AuditEvent): Promise<void> {
    if (this.events.push(event) > this.#limit) this.events.shift();
    if (event.kind === "tool_call" && event.toolEntry && this.entries.push(event.toolEntry) > this.#limit) {
      this.entries.shift();
    }
  }
}

/** How many entries and events a {@link MemoryAuditSink} keeps by default. */
export const MEMORY_AUDIT_LIMIT = 1000;

/** pino's numeric levels (a message is written when its level is at least the logger's). */
const LOG_LEVELS: Record<string, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: Number.POSITIVE_INFINITY,
};

/**
 * The default logger: pino writing JSON lines to stderr, level from TOOLHOST_LOG_LEVEL (default "warn"), so
 * stdout stays clean for the CLI's JSON output. pino itself loads (synchronously) when the first message at or above
 * the level is written, so a process that logs nothing — most CLI commands — never loads it. Throws Error for an
 * unknown level.
 */
export function createLogger(level = readConfig().logLevel): Logger {
  const threshold = LOG_LEVELS[level];
  if (threshold === undefined) {
    throw new Error(
      `TOOLHOST_LOG_LEVEL must be one of ${Object.keys(LOG_LEVELS).join(", ")}; got ${JSON.stringify(level)}.`,
    );
  }
  let real: Logger | undefined;
  const write =
    (method: keyof Logger, value: number) =>
    (obj: object | string, msg?: string): void => {
      if (value < threshold) return;
      if (!real) {
        // createRequire: bundlers leave it alone, so pino stays out of the CLI's startup chunks.
        const { pino } = createRequire(import.meta.url)("pino") as { pino: typeof Pino };
        real = pino({ level, base: undefined }, pino.destination(2)) as unknown as Logger;
      }
      real[method](obj, msg);
    };
  return { debug: write("debug", 20), info: write("info", 30), warn: write("warn", 40), error: write("error", 50) };
}
