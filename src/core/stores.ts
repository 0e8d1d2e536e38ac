/**
 * Storage interfaces the core depends on, with in-memory implementations for library use and tests.
 * The server and CLI plug in the database-backed ones (src/storage/).
 */
import { pino } from "pino";
import type { AuditEntry, AuditEvent, AuditSink, FreshnessLedger, Logger, SavedToolSettings } from "./types.js";

/** Per-user saved tool settings (000: the `user_tool_settings` repository). */
export interface ToolSettingsStore {
  /** Every saved settings row of the user, keyed by tool name. */
  getAll(userId: string): Promise<Map<string, SavedToolSettings>>;
  /** One saved row, or undefined. */
  get(userId: string, toolName: string): Promise<SavedToolSettings | undefined>;
  /** Creates or replaces the user's row for the tool. */
  save(
    userId: string,
    toolName: string,
    settings: { enabled: boolean | null; parameters: Record<string, unknown>; locked?: string[] },
  ): Promise<void>;
}

/** Settings kept in process memory; lost on exit. */
export class MemoryToolSettingsStore implements ToolSettingsStore {
  readonly #rows = new Map<string, Map<string, SavedToolSettings>>();

  async getAll(userId: string): Promise<Map<string, SavedToolSettings>> {
    return new Map(this.#rows.get(userId) ?? []);
  }

  async get(userId: string, toolName: string): Promise<SavedToolSettings | undefined> {
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
    user.set(toolName, structuredClone(settings));
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

/** Audit sink that keeps entries in an array (tests, library use without a database). */
export class MemoryAuditSink implements AuditSink {
  readonly entries: AuditEntry[] = [];
  readonly events: AuditEvent[] = [];

  async record(entry: AuditEntry): Promise<void> {
    this.entries.push(entry);
  }

  async recordEvent(event: AuditEvent): Promise<void> {
    this.events.push(event);
    if (event.kind === "tool_call" && event.toolEntry) this.entries.push(event.toolEntry);
  }
}

/**
 * The default logger: pino writing JSON lines to stderr, level from TOOLHOST_LOG_LEVEL (default "warn"), so
 * stdout stays clean for the CLI's JSON output.
 */
export function createLogger(level = process.env.TOOLHOST_LOG_LEVEL ?? "warn"): Logger {
  const levels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
  if (!levels.includes(level)) {
    throw new Error(`TOOLHOST_LOG_LEVEL must be one of ${levels.join(", ")}; got ${JSON.stringify(level)}.`);
  }
  return pino({ level, base: undefined }, pino.destination(2)) as unknown as Logger;
}
