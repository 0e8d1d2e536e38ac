/**
 * Repositories over the database: tool settings (tool-settings-repository), API tokens, chats and their
 * messages, and the security audit log (the freshness ledger: freshness-ledger.ts). Each implements a core interface where one exists,
 * so the core never sees SQL.
 */
import { randomUUID } from "node:crypto";
import type { Insertable, Kysely } from "kysely";
import { currentCallSurface } from "../core/call-surface.js";
import { BrandedError, errorBrand } from "../core/errors.js";
import type { AuditEntry, AuditEvent, AuditSink } from "../core/types.js";
import { runCompiledOnce } from "./compiled-once.js";
import type { AuditLogTable, ChatMessagesTable, ChatsTable, DatabaseSchema } from "./database.js";
import { inTransaction } from "./transaction.js";
import { WriteBehind } from "./write-behind.js";

export { SETTINGS_CACHE_MS, SqlToolSettingsStore } from "./tool-settings-repository.js";

const now = () => new Date().toISOString();

/** Most tool-call lines one INSERT of the audit log writes. */
const AUDIT_BATCH_ROWS = 200;
/** How long (ms) the first queued audit line waits for others to share its INSERT. */
const AUDIT_BATCH_MS = 20;

/** An audit log line as stored: a tool call (shell ones with their command and exit) or a settings change. */
export interface StoredAuditEntry {
  id: string;
  createdAt: string;
  /** "tool_call" or "settings_change" ("tool_call" for lines written before every call was audited). */
  kind: string;
  /** Whose call or whose settings. */
  userId: string;
  /** Who acted (for settings changes: the changer). */
  actor: string | null;
  chatId: string | null;
  tool: string;
  /** Redacted arguments of a call. */
  arguments: unknown;
  /** The shell command (argv or string) of a shell call, else null. */
  command: unknown;
  cwd: string | null;
  outcome: string | null;
  errorCode: string | null;
  exitCode: number | null;
  termination: string;
  durationMs: number;
  approval: string | null;
  approvedBy: string | null;
  sandboxed: boolean | null;
  /**
   * Settings changes: `{ old, new }` with secrets redacted. Tool calls made through a framework adapter:
   * `{ surface }` (`ai-sdk`, `openai-agents`); otherwise null.
   */
  details: unknown;
}

/** Filters of the audit listing. */
export interface AuditQuery {
  userId?: string;
  tool?: string;
  kind?: "tool_call" | "settings_change";
  /** ISO-8601 lower bound (inclusive) of the entry time. */
  since?: string;
  /** ISO-8601 upper bound (exclusive). */
  until?: string;
  /** 1–1000, default 100. */
  limit?: number;
}

function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Tool-call lines written by one INSERT, and the promise they share. */
interface AuditBatch {
  rows: Insertable<AuditLogTable>[];
  done: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** The audit log in `audit_log`: every tool call and every settings change. */
export class SqlAuditLog implements AuditSink {
  /**
   * Tool-call lines waiting to be written, in batches of at most {@link AUDIT_BATCH_ROWS}; the lines of a batch share
   * one promise (a promise per line, kept until its batch was written, was a good part of a call's garbage).
   */
  #queue: AuditBatch[] = [];
  /**
   * Writes the queued tool-call lines {@link AUDIT_BATCH_MS} after the first of them (after the answer the call was
   * made for has been sent), as one multi-row INSERT per batch of at most {@link AUDIT_BATCH_ROWS}: a client's
   * back-to-back calls share one write. Lines recorded while a batch is written form the next one. `flush` (and
   * `list`) write at once.
   */
  readonly #writer = new WriteBehind(() => this.#drain(), AUDIT_BATCH_MS);

  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  async #drain(): Promise<void> {
    for (let batch = this.#queue.shift(); batch; batch = this.#queue.shift()) {
      const rows = batch.rows;
      try {
        // Compiled once per batch size: building and compiling a multi-row INSERT costs more than running it.
        // Every row has the same columns in the same order (see recordEvent), so its values are the parameters.
        await runCompiledOnce(
          this.db,
          `audit_log.insert_tool_calls.${rows.length}`,
          rows.flatMap((row) => Object.values(row)),
          () => this.db.insertInto("audit_log").values(rows),
        );
        batch.resolve();
      } catch (error) {
        batch.reject(error);
      }
    }
  }

  /** The batch a new line joins: the last queued one while it has room, else a new one. */
  #batch(): AuditBatch {
    const last = this.#queue.at(-1);
    if (last && last.rows.length < AUDIT_BATCH_ROWS) return last;
    let resolve: () => void = () => {};
    let reject: (error: unknown) => void = () => {};
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // Every line's writer hears a failure through `done`; this keeps a batch nobody waits on from being reported as
    // an unhandled rejection.
    done.catch(() => {});
    const batch = { rows: [], done, resolve, reject };
    this.#queue.push(batch);
    return batch;
  }

  /** Resolves once every line recorded so far is written (failures are reported to their writers). */
  async flush(): Promise<void> {
    while (this.#queue.length > 0 || this.#writer.busy) await this.#writer.now();
  }

  /** A tool's own entry recorded outside a call the runtime audits (kept as a tool_call line). */
  async record(entry: AuditEntry): Promise<void> {
    await this.db
      .insertInto("audit_log")
      .values({
        id: randomUUID(),
        kind: "tool_call",
        user_id: entry.userId,
        actor: entry.userId,
        chat_id: entry.chatId,
        tool: entry.tool,
        command: JSON.stringify(entry.command),
        cwd: entry.cwd,
        exit_code: entry.exitCode,
        termination: entry.termination,
        duration_ms: Math.round(entry.durationMs),
        sandboxed: entry.sandboxed === undefined ? null : entry.sandboxed ? 1 : 0,
        created_at: now(),
      })
      .execute();
  }

  /**
   * Records one event: a settings change is written at once; a tool call joins the next batch (see #writer), and
   * the promise (shared by the batch's lines) settles once it is written.
   */
  recordEvent(event: AuditEvent): Promise<void> {
    if (event.kind === "settings_change") return this.#recordSettingsChange(event);
    const t = event.toolEntry;
    // A call made through a framework adapter names the framework (core/call-surface.ts), read now, while the
    // call's async context is current.
    const surface = currentCallSurface();
    const row = {
      id: randomUUID(),
      created_at: now(),
      kind: "tool_call",
      user_id: event.userId,
      actor: event.userId,
      chat_id: event.chatId,
      tool: event.tool,
      command: JSON.stringify(t?.command ?? null),
      arguments: JSON.stringify(event.arguments ?? null),
      cwd: event.cwd,
      exit_code: t?.exitCode ?? null,
      termination: t?.termination ?? event.outcome,
      duration_ms: Math.round(event.durationMs),
      outcome: event.outcome,
      error_code: event.errorCode,
      approval: event.approval,
      approved_by: event.approvedBy,
      sandboxed: t?.sandboxed === undefined ? null : t.sandboxed ? 1 : 0,
      // Every row of a batch has the same columns in the same order (one multi-row INSERT, compiled once).
      details: surface ? JSON.stringify({ surface }) : null,
    };
    const batch = this.#batch();
    batch.rows.push(row);
    // A full batch is written at once: calls that never yield to the timers (a library loop whose tools finish in
    // microtasks) would otherwise queue lines without bound until the loop ends.
    if (batch.rows.length >= AUDIT_BATCH_ROWS) void this.#writer.now().catch(() => {});
    else this.#writer.soon();
    return batch.done;
  }

  async #recordSettingsChange(event: AuditEvent & { kind: "settings_change" }): Promise<void> {
    const row = {
      id: randomUUID(),
      created_at: now(),
      kind: "settings_change",
      user_id: event.userId,
      actor: event.actor,
      chat_id: null,
      tool: event.tool,
      command: "null",
      cwd: null,
      exit_code: null,
      termination: "settings_change",
      duration_ms: 0,
      details: JSON.stringify({ old: event.old, new: event.new }),
    };
    // Every settings write ends here: the statement is compiled once (the columns are the row's keys, in order).
    await runCompiledOnce(this.db, "audit_log.insert_settings_change", Object.values(row), () =>
      this.db.insertInto("audit_log").values(row),
    );
  }

  /** The newest entries first, filtered by user, tool, kind and time (lines still queued are written first). */
  async list(options: AuditQuery = {}): Promise<StoredAuditEntry[]> {
    await this.flush();
    let query = this.db.selectFrom("audit_log").selectAll().orderBy("created_at", "desc").orderBy("id");
    if (options.userId) query = query.where("user_id", "=", options.userId);
    if (options.tool) query = query.where("tool", "=", options.tool);
    if (options.kind === "settings_change") query = query.where("kind", "=", "settings_change");
    else if (options.kind === "tool_call")
      query = query.where((eb) => eb.or([eb("kind", "=", "tool_call"), eb("kind", "is", null)]));
    if (options.since) query = query.where("created_at", ">=", options.since);
    if (options.until) query = query.where("created_at", "<", options.until);
    const rows = await query.limit(Math.min(1000, Math.max(1, options.limit ?? 100))).execute();
    return rows.map((r) => ({
      id: r.id,
      createdAt: r.created_at,
      kind: r.kind ?? "tool_call",
      userId: r.user_id,
      actor: r.actor,
      chatId: r.chat_id,
      tool: r.tool,
      arguments: parseJson(r.arguments),
      command: parseJson(r.command),
      cwd: r.cwd,
      outcome: r.outcome,
      errorCode: r.error_code,
      exitCode: r.exit_code,
      termination: r.termination,
      durationMs: r.duration_ms,
      approval: r.approval,
      approvedBy: r.approved_by,
      sandboxed: r.sandboxed === null ? null : r.sandboxed === 1,
      details: parseJson(r.details),
    }));
  }
}

export { hashToken, type TokenInfo, TokenRepository } from "./token-repository.js";

/** A chat as the application sees it. */
export interface Chat {
  id: string;
  userId: string;
  title: string | null;
  workingDirectory: string | null;
  provider: string | null;
  model: string | null;
  createdAt: string;
  updatedAt: string;
}

/** One page of a user's chats; pass `nextCursor` back for the next page (null: this was the last). */
export interface ChatPage {
  chats: Chat[];
  nextCursor: string | null;
}

/** A chat-list cursor that this server did not produce (or that was altered). */
export class ChatCursorError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ChatCursorError");
  readonly code = "bad_request";
  constructor() {
    super("Invalid cursor: pass the nextCursor of the previous page unchanged, or omit it for the first page.");
  }
}

function encodeChatCursor(position: { updatedAt: string; id: string }): string {
  return Buffer.from(JSON.stringify([position.updatedAt, position.id]), "utf8").toString("base64url");
}

function decodeChatCursor(cursor: string): { updatedAt: string; id: string } {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(value) && typeof value[0] === "string" && typeof value[1] === "string" && value.length === 2) {
      return { updatedAt: value[0], id: value[1] };
    }
  } catch {
    // fall through
  }
  throw new ChatCursorError();
}

/** A stored chat message; `content` is the provider-neutral JSON the loop writes. */
export interface ChatMessage {
  id: string;
  chatId: string;
  seq: number;
  role: string;
  content: unknown;
  createdAt: string;
}

function toChat(r: ChatsTable): Chat {
  return {
    id: r.id,
    userId: r.user_id,
    title: r.title,
    workingDirectory: r.working_directory,
    provider: r.provider,
    model: r.model,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toMessage(r: ChatMessagesTable): ChatMessage {
  return {
    id: r.id,
    chatId: r.chat_id,
    seq: r.seq,
    role: r.role,
    content: JSON.parse(r.content),
    createdAt: r.created_at,
  };
}

/** Chats and their messages. Every read is scoped by user id: nobody reads another user's chat. */
export class ChatRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /** Creates a chat; `id` may be chosen by the caller (CLI `--chat ID`), else a UUID. */
  async create(input: {
    userId: string;
    id?: string;
    title?: string | null;
    workingDirectory?: string | null;
    provider?: string | null;
    model?: string | null;
  }): Promise<Chat> {
    const at = now();
    const row: ChatsTable = {
      id: input.id ?? randomUUID(),
      user_id: input.userId,
      title: input.title ?? null,
      working_directory: input.workingDirectory ?? null,
      provider: input.provider ?? null,
      model: input.model ?? null,
      created_at: at,
      updated_at: at,
    };
    await this.db.insertInto("chats").values(row).execute();
    return toChat(row);
  }

  /** The chat if it exists and belongs to the user. */
  async get(userId: string, chatId: string): Promise<Chat | undefined> {
    const r = await this.db
      .selectFrom("chats")
      .selectAll()
      .where("id", "=", chatId)
      .where("user_id", "=", userId)
      .executeTakeFirst();
    return r ? toChat(r) : undefined;
  }

  /** Whether any user has a chat with this id (ids are global). */
  async exists(chatId: string): Promise<boolean> {
    return (await this.db.selectFrom("chats").select("id").where("id", "=", chatId).executeTakeFirst()) !== undefined;
  }

  /** The user's chats, most recently active first (at most `limit`, default 100). */
  async list(userId: string, limit = 100): Promise<Chat[]> {
    return (await this.page(userId, { limit })).chats;
  }

  /**
   * One page of the user's chats, most recently active first (`updated_at` desc, then id desc). `limit` 1–1000
   * (default 50); `cursor` is the `nextCursor` of the previous page. `nextCursor` is null on the last page.
   * Throws ChatCursorError for a cursor this method did not produce.
   */
  async page(userId: string, options: { limit?: number; cursor?: string } = {}): Promise<ChatPage> {
    const limit = Math.min(1000, Math.max(1, Math.trunc(options.limit ?? 50)));
    let query = this.db
      .selectFrom("chats")
      .selectAll()
      .where("user_id", "=", userId)
      .orderBy("updated_at", "desc")
      .orderBy("id", "desc")
      .limit(limit + 1);
    if (options.cursor) {
      const after = decodeChatCursor(options.cursor);
      query = query.where((eb) =>
        eb.or([
          eb("updated_at", "<", after.updatedAt),
          eb.and([eb("updated_at", "=", after.updatedAt), eb("id", "<", after.id)]),
        ]),
      );
    }
    const rows = await query.execute();
    const chats = rows.slice(0, limit).map(toChat);
    const last = chats[chats.length - 1];
    return {
      chats,
      nextCursor: rows.length > limit && last ? encodeChatCursor({ updatedAt: last.updatedAt, id: last.id }) : null,
    };
  }

  /**
   * Deletes the user's chat with its messages and its freshness ledger, in one transaction. Returns false when
   * the user has no such chat (another user's chat is never touched). Generated images stay with their owner.
   * `guard` runs in the transaction once the chat's row is locked (on PostgreSQL) and may throw to keep the chat
   * (e.g. a turn holds it: TurnLeaseRepository.assertIdle).
   */
  async delete(
    userId: string,
    chatId: string,
    guard?: (trx: Kysely<DatabaseSchema>) => Promise<void>,
  ): Promise<boolean> {
    return inTransaction(this.db, async (trx, tx) => {
      const found = await tx
        .forUpdate(trx.selectFrom("chats").select("id").where("id", "=", chatId).where("user_id", "=", userId))
        .executeTakeFirst();
      if (!found) return false;
      await guard?.(trx);
      await trx.deleteFrom("chat_messages").where("chat_id", "=", chatId).execute();
      await trx.deleteFrom("file_reads").where("chat_id", "=", chatId).execute();
      await trx.deleteFrom("chats").where("id", "=", chatId).execute();
      return true;
    });
  }

  /** Sets the title of the user's chat (null clears it); returns the updated chat, or undefined when none. */
  async rename(userId: string, chatId: string, title: string | null): Promise<Chat | undefined> {
    const result = await this.db
      .updateTable("chats")
      .set({ title, updated_at: now() })
      .where("id", "=", chatId)
      .where("user_id", "=", userId)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return undefined;
    return this.get(userId, chatId);
  }

  /** Updates provider/model/title of the user's chat. */
  async update(
    userId: string,
    chatId: string,
    fields: { title?: string | null; provider?: string | null; model?: string | null },
  ): Promise<void> {
    await this.db
      .updateTable("chats")
      .set({ ...fields, updated_at: now() })
      .where("id", "=", chatId)
      .where("user_id", "=", userId)
      .execute();
  }

  /** Messages of the chat in order. */
  async messages(chatId: string): Promise<ChatMessage[]> {
    const rows = await this.db
      .selectFrom("chat_messages")
      .selectAll()
      .where("chat_id", "=", chatId)
      .orderBy("seq")
      .execute();
    return rows.map(toMessage);
  }

  /**
   * Appends messages atomically after the chat's last one; returns them as stored. One transaction through
   * `inTransaction` (SQLite `BEGIN IMMEDIATE`, PostgreSQL retried on serialization failures), so two concurrent
   * appends to one chat serialize instead of colliding on `seq`. `guard` runs first inside the transaction (a turn's
   * lease check: throwing from it stores nothing). `within`, the `trx` of a running transaction, joins it (a turn's
   * messages land with the end of its lease).
   */
  async append(
    chatId: string,
    messages: { role: string; content: unknown }[],
    guard?: (trx: Kysely<any>) => Promise<void>,
    within?: Kysely<any>,
  ): Promise<ChatMessage[]> {
    if (messages.length === 0) return [];
    return inTransaction(within ?? this.db, async (trx, tx) => {
      await guard?.(trx);
      // The chat's row lock orders concurrent appends on PostgreSQL (SQLite's BEGIN IMMEDIATE already does).
      await tx.forUpdate(trx.selectFrom("chats").select("id").where("id", "=", chatId)).execute();
      const last = await trx
        .selectFrom("chat_messages")
        .select((eb) => eb.fn.max<number>("seq").as("seq"))
        .where("chat_id", "=", chatId)
        .executeTakeFirst();
      let seq = Number(last?.seq ?? 0);
      const at = now();
      const rows: ChatMessagesTable[] = messages.map((m) => ({
        id: randomUUID(),
        chat_id: chatId,
        seq: ++seq,
        role: m.role,
        content: JSON.stringify(m.content),
        created_at: at,
      }));
      await trx.insertInto("chat_messages").values(rows).execute();
      await trx.updateTable("chats").set({ updated_at: at }).where("id", "=", chatId).execute();
      return rows.map(toMessage);
    });
  }
}
