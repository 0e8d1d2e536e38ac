/**
 * `user_tool_settings` as a ToolSettingsStore: rows read through a short per-process cache (every tool call reads
 * its row), written in one transaction per change (see {@link SqlToolSettingsStore.modify}).
 */
import type { Kysely } from "kysely";
import type { ToolSettingsStore, ToolSettingsWrite, VersionedToolSettings } from "../core/stores.js";
import { runCompiledOnce } from "./compiled-once.js";
import type { DatabaseSchema } from "./database.js";
import { inTransaction } from "./transaction.js";

const now = () => new Date().toISOString();

/** Freezes a JSON value and everything in it; returns it. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

function parseJsonObject(text: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

function toSaved(r: {
  enabled: number | null;
  parameters: string;
  locked: string;
  version: number;
}): VersionedToolSettings {
  let locked: string[] = [];
  try {
    const value = JSON.parse(r.locked);
    if (Array.isArray(value)) locked = value.filter((k): k is string => typeof k === "string");
  } catch {
    // corrupt: no locks (admins can set them again)
  }
  // Only 0 and 1 are a stored choice; anything else is corrupt and reads as unset (the tool's default applies),
  // never as "off". A version that is no count reads as 0 (the next write stores 1).
  const enabled = Number(r.enabled);
  const version = Number(r.version);
  return {
    enabled: r.enabled === null || (enabled !== 0 && enabled !== 1) ? null : enabled === 1,
    parameters: parseJsonObject(r.parameters),
    locked,
    version: Number.isSafeInteger(version) && version >= 0 ? version : 0,
  };
}

/** Most rows a SqlToolSettingsStore keeps for reuse (beyond it, the oldest are forgotten). */
const REUSED_ROWS_LIMIT = 10_000;

type SettingsRow = { tool_name: string; enabled: number | null; parameters: string; locked: string; version: number };

/**
 * How long (ms) a settings row read by {@link SqlToolSettingsStore.get} serves later reads of the same process
 * before it is read again. A write made through the store (this process) takes effect at once, as does
 * `invalidate` (a change signal from another instance); one made by another process (the CLI, another server
 * instance) is seen within this time.
 */
export const SETTINGS_CACHE_MS = 1_000;

/**
 * `user_tool_settings` as a ToolSettingsStore. Corrupt JSON reads back as null parameters (defaults apply).
 *
 * `get` (every tool call reads its row) is served from a per-process cache for at most {@link SETTINGS_CACHE_MS};
 * `getAll` always reads the database (and refreshes the cache). A row that reads exactly as last time (version,
 * enabled, parameters and locks) is returned as the same frozen object as last time, so the runtime's cache of
 * effective settings per row object hits and a call resolves no settings again.
 */
export class SqlToolSettingsStore implements ToolSettingsStore {
  readonly #rows = new Map<string, { row: SettingsRow; saved: VersionedToolSettings }>();
  /** Recent reads of get: the row (undefined: none saved) and until when (Date.now() ms) it may be served. */
  readonly #recent = new Map<string, { saved: VersionedToolSettings | undefined; until: number }>();
  /** Bumped by every invalidation: a read that began before one does not fill the cache. */
  #generation = 0;

  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /**
   * Forgets the cached rows of `userId` (every user when null or absent): the next reads go to the database. Cheap;
   * meant for change signals from other instances.
   */
  invalidate(userId?: string | null): void {
    this.#generation++;
    if (userId == null) {
      this.#recent.clear();
      return;
    }
    const prefix = `${userId}\u0000`;
    for (const key of this.#recent.keys()) if (key.startsWith(prefix)) this.#recent.delete(key);
  }

  async getAll(userId: string): Promise<Map<string, VersionedToolSettings>> {
    const generation = this.#generation;
    const asked = Date.now();
    const rows = await this.db.selectFrom("user_tool_settings").selectAll().where("user_id", "=", userId).execute();
    const all = new Map(rows.map((r) => [r.tool_name, this.#saved(userId, r)]));
    if (generation === this.#generation) {
      for (const [tool, saved] of all) this.#remember(`${userId}\u0000${tool}`, saved, asked);
    }
    return all;
  }

  async get(userId: string, toolName: string): Promise<VersionedToolSettings | undefined> {
    const key = `${userId}\u0000${toolName}`;
    const recent = this.#recent.get(key);
    const asked = Date.now();
    if (recent && recent.until > asked) return recent.saved;
    const generation = this.#generation;
    const { rows } = await runCompiledOnce(this.db, "user_tool_settings.select_one", [userId, toolName], () =>
      this.db
        .selectFrom("user_tool_settings")
        .selectAll()
        .where("user_id", "=", userId)
        .where("tool_name", "=", toolName),
    );
    const r = rows[0];
    const saved = r ? this.#saved(userId, r) : undefined;
    if (generation === this.#generation) this.#remember(key, saved, asked);
    return saved;
  }

  /**
   * Keeps `saved` for reads until SETTINGS_CACHE_MS after `asked`, when the read was asked for (not when it
   * answered): a slow read never stretches how long a row another instance replaced is served.
   */
  #remember(key: string, saved: VersionedToolSettings | undefined, asked: number): void {
    this.#recent.delete(key);
    this.#recent.set(key, { saved, until: asked + SETTINGS_CACHE_MS });
    if (this.#recent.size > REUSED_ROWS_LIMIT) this.#recent.delete(this.#recent.keys().next().value as string);
  }

  /** The row as settings: the object handed out last time when the row reads the same, else a new frozen one. */
  #saved(userId: string, r: SettingsRow): VersionedToolSettings {
    const key = `${userId}\u0000${r.tool_name}`;
    const last = this.#rows.get(key);
    if (
      last &&
      last.row.version === r.version &&
      last.row.enabled === r.enabled &&
      last.row.parameters === r.parameters &&
      last.row.locked === r.locked
    ) {
      return last.saved;
    }
    const saved = deepFreeze(toSaved(r));
    if (this.#rows.size >= REUSED_ROWS_LIMIT) this.#rows.delete(this.#rows.keys().next().value as string);
    this.#rows.set(key, {
      row: {
        tool_name: r.tool_name,
        enabled: r.enabled,
        parameters: r.parameters,
        locked: r.locked,
        version: r.version,
      },
      saved,
    });
    return saved;
  }

  /** Replaces the row as a whole (no read): last write wins for the whole row. Prefer {@link modify}. */
  async save(
    userId: string,
    toolName: string,
    settings: { enabled: boolean | null; parameters: Record<string, unknown>; locked?: string[] },
  ): Promise<void> {
    await this.modify(userId, toolName, () => settings);
  }

  /**
   * Read-modify-write of one row in one transaction (inTransaction): the row is created empty when missing
   * (`INSERT … ON CONFLICT DO NOTHING`), then read with `FOR UPDATE` on PostgreSQL (SQLite holds the write lock),
   * changed and written back with `version + 1`.
   */
  async modify(
    userId: string,
    toolName: string,
    change: (current: VersionedToolSettings | undefined) => ToolSettingsWrite,
  ): Promise<VersionedToolSettings> {
    // Reads from now on wait for the database (before the write, so a read racing it cannot cache the old row; after
    // it, so the new row is read).
    this.invalidate(userId);
    try {
      return await this.#modify(userId, toolName, change);
    } finally {
      this.invalidate(userId);
    }
  }

  async #modify(
    userId: string,
    toolName: string,
    change: (current: VersionedToolSettings | undefined) => ToolSettingsWrite,
  ): Promise<VersionedToolSettings> {
    // The statements of every settings write are compiled once (see compiled-once.ts); each runs with the
    // parameters its builder below names, in order.
    return inTransaction(this.db, async (trx, tx) => {
      const lockRow = async () =>
        (
          await runCompiledOnce(trx, "user_tool_settings.select_for_update", [userId, toolName], () =>
            tx.forUpdate(
              trx
                .selectFrom("user_tool_settings")
                .selectAll()
                .where("user_id", "=", userId)
                .where("tool_name", "=", toolName),
            ),
          )
        ).rows[0];
      const existing = await lockRow();
      let current = existing;
      if (!current) {
        // Create the row first so that two first writers (other processes) queue on its lock instead of racing
        // two INSERTs; a concurrent creator makes DO NOTHING wait for it, and the FOR UPDATE below sees its row.
        const empty = {
          user_id: userId,
          tool_name: toolName,
          enabled: null,
          parameters: "{}",
          locked: "[]",
          updated_at: now(),
          version: 0,
        };
        await runCompiledOnce(trx, "user_tool_settings.insert_empty", Object.values(empty), () =>
          trx
            .insertInto("user_tool_settings")
            .values(empty)
            .onConflict((oc) => oc.columns(["user_id", "tool_name"]).doNothing()),
        );
        current = await lockRow();
        if (!current) throw new Error(`The settings row of ${userId}/${toolName} vanished inside its transaction.`);
      }
      const before = toSaved(current);
      const next = change(existing || before.version > 0 ? before : undefined);
      const written = {
        enabled: next.enabled === null ? null : next.enabled ? 1 : 0,
        parameters: JSON.stringify(next.parameters),
        locked: JSON.stringify(next.locked ?? []),
        updated_at: now(),
        version: before.version + 1,
      };
      await runCompiledOnce(trx, "user_tool_settings.update", [...Object.values(written), userId, toolName], () =>
        trx
          .updateTable("user_tool_settings")
          .set(written)
          .where("user_id", "=", userId)
          .where("tool_name", "=", toolName),
      );
      return toSaved(written);
    });
  }
}
