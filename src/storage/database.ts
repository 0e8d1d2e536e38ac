/**
 * Database access: one Kysely schema and one set of migrations for both dialects. Embedded SQLite (a file under the
 * data directory) is the default; a `postgres://` URL selects PostgreSQL (for several instances sharing one database).
 */

import { chmodSync, existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import Database from "better-sqlite3";
import { type Generated, Kysely, PostgresDialect, type SqliteDatabase, SqliteDialect } from "kysely";
import { readConfig } from "../core/config.js";
import { resolveDataDir } from "../core/data-dir.js";
import { makeDirectoriesSync } from "../core/make-directory.js";
import { MigrationError, migrateToLatest, SchemaDamageError } from "./migrate.js";
import { migrations } from "./migrations.js";
import { type ChannelListener, type ChannelListenerHandlers, listenPostgres } from "./pg-listener.js";
import {
  registerSqliteTransactions,
  SQLITE_BEGIN_WAIT_MS,
  SQLITE_BUSY_TIMEOUT_MS,
  type SqliteTransactions,
} from "./transaction.js";

/** Row of `user_tool_settings`: one user's saved settings for one tool. `enabled` is 0/1, or null when unset. */
export interface UserToolSettingsTable {
  user_id: string;
  tool_name: string;
  enabled: number | null;
  /** JSON object of saved parameter values. */
  parameters: string;
  /** JSON array of keys an admin set for this user ("enabled", parameter names); only an admin may change them. */
  locked: string;
  /** ISO-8601 UTC timestamp. */
  updated_at: string;
  /** 0 for a row never written through a versioned write; +1 on every committed write (the API's ETag). */
  version: Generated<number>;
}

/** Row of `api_tokens`: a bearer token, stored as its sha256 hex digest only. */
export interface ApiTokensTable {
  id: string;
  user_id: string;
  token_hash: string;
  label: string | null;
  created_at: string;
  last_used_at: string | null;
  /** When the token stops working (ISO-8601 UTC); null: never. */
  expires_at: string | null;
  /** The token's first characters (`th_` and 6 more), shown in listings; null for tokens issued before. */
  prefix: string | null;
}

/** Row of `chats`: a conversation bound to a working directory, a provider and a model. */
export interface ChatsTable {
  id: string;
  user_id: string;
  title: string | null;
  working_directory: string | null;
  provider: string | null;
  model: string | null;
  created_at: string;
  updated_at: string;
}

/** Row of `chat_messages`: one message (user, assistant with tool calls, tool results) as provider-neutral JSON. */
export interface ChatMessagesTable {
  id: string;
  chat_id: string;
  seq: number;
  role: string;
  /** JSON of the message's content (see loop/ for its shape). */
  content: string;
  created_at: string;
}

/** Row of `file_reads`: the freshness ledger (which content hash a chat last saw for a path). */
export interface FileReadsTable {
  chat_id: string;
  path: string;
  sha256: string;
  read_at: string;
}

/** Row of `audit_log`: a security-relevant execution (shell commands). */
export interface AuditLogTable {
  id: string;
  user_id: string;
  chat_id: string | null;
  tool: string;
  /** JSON: argv array or command string. */
  command: string;
  cwd: string | null;
  exit_code: number | null;
  termination: string;
  duration_ms: number;
  created_at: string;
  /** "tool_call" (every call, shell ones included) or "settings_change"; null on rows written before 0006. */
  kind: string | null;
  /** Who acted: the user who changed a setting, or who called (equal to user_id for calls). */
  actor: string | null;
  /** JSON of the call's arguments, secrets redacted. */
  arguments: string | null;
  /** "ok", "error" or "denied". */
  outcome: string | null;
  error_code: string | null;
  /** The approval decision: allow (by policy), allow_once, allow_always, deny, expired. */
  approval: string | null;
  /** Who made the approval decision: "policy" or the deciding user/surface. */
  approved_by: string | null;
  /** 1 when a shell command ran inside the sandbox, 0 when not, null when not a shell call. */
  sandboxed: number | null;
  /** JSON of further facts (settings changes: old and new values). */
  details: string | null;
}

/** Row of `approvals`: one ask of the approval policy, bound to its call by an HMAC. */
export interface ApprovalsTable {
  id: string;
  user_id: string;
  chat_id: string | null;
  /** The suspended chat turn this call belongs to (approval_turns.id), or null for one-off calls. */
  turn_id: string | null;
  tool_call_id: string;
  tool: string;
  /** sha256 hex of the canonical JSON of the call's arguments. */
  args_hash: string;
  /** Redacted, size-limited preview of the arguments shown to the person asked. */
  preview: string;
  /** JSON of the matching rule, or null when the approval setting decided. */
  rule: string | null;
  reason: string;
  /** JSON array of the patterns an allow_always answer stores as allow rules (see ApprovalVerdict.candidates). */
  candidates: string;
  /** Why an allow_always answer could not make this call run unasked next time (migration 0012); null: it can. */
  always_refusal?: string | null;
  /** The sub-agent's path of the call (agent ids joined with `/`), or null for the chat's own calls. */
  agent_path: string | null;
  working_directory: string | null;
  /** pending, allowed, denied, expired, cancelled or used (an allowed one-off approval that ran). */
  status: string;
  decision: string | null;
  message: string | null;
  decided_by: string | null;
  decided_at: string | null;
  created_at: string;
  expires_at: string;
  /** hex HMAC-SHA256 over id, tool call id, tool, arguments hash and user, with the server key. */
  hmac: string;
}

/** Row of `approval_turns`: the loop state a chat turn waiting for approvals needs to resume after a restart. */
export interface ApprovalTurnsTable {
  id: string;
  chat_id: string;
  user_id: string;
  /** JSON of the suspended turn (user message, completed steps, the step's calls and results so far). */
  state: string;
  /** live (a process is running it), resuming (claimed to resume) or done. */
  status: string;
  /** The process instance running it. */
  owner: string;
  /** When the owner last showed it was alive (ISO-8601). */
  heartbeat_at: string;
  created_at: string;
  updated_at: string;
}

/**
 * Row of `images`: a generated image, served to its owner. Its bytes are in `data` (every instance on the database
 * serves it); rows written before migration 0009 have `data` null and name a file under the data directory in `path`.
 */
export interface ImagesTable {
  id: string;
  user_id: string;
  chat_id: string | null;
  /** Path relative to the data directory ("" when the bytes are in `data`). */
  path: string;
  mime_type: string;
  prompt: string;
  model: string | null;
  created_at: string;
  /** The image's bytes (null for an image stored as a file before migration 0009). */
  data: Buffer | null;
}

/** Row of `spills`: the full output behind a cut tool result, named `spill:<id>`, read by its user's chat only. */
export interface SpillsTable {
  /** 24 lower-case hex digits. */
  id: string;
  user_id: string;
  /** The chat whose call made it (null: a call outside a chat); only that chat reads it. */
  chat_id: string | null;
  tool: string;
  field: string;
  /** Bytes in `data`. */
  size: number;
  /** 1 when `data` is the whole output, 0 when it stopped at the size limit. */
  complete: number;
  data: Buffer;
  /** ISO-8601; expiry counts from here. */
  created_at: string;
}

/** Row of `server_secrets`: a secret every instance on the database shares (the approval key), hex. */
export interface ServerSecretsTable {
  name: string;
  value: string;
  created_at: string;
}

/**
 * Row of `agents`: one agent of a tree. A tree's root is the chat turn's own agent (depth 0, `kind` "root"); its
 * row also holds the tree's counters (agents spawned, agents running, tokens used). Lineage (`parent_id`,
 * `root_id`, `depth`, `path`) is written by the server at spawn time and never taken from a model.
 */
export interface AgentsTable {
  id: string;
  user_id: string;
  chat_id: string | null;
  kind: string;
  root_id: string;
  parent_id: string | null;
  depth: number;
  /** Ids from the root down to this agent, joined by "/". */
  path: string;
  template: string;
  provider: string | null;
  model: string | null;
  status: string;
  /** The first message the agent was given. */
  task: string;
  /** The latest answer (partial while running or after a cut-off run). */
  result: string | null;
  note: string | null;
  /** JSON array of provider-neutral messages (the agent's conversation). */
  transcript: string;
  input_tokens: number;
  output_tokens: number;
  turns: number;
  tool_calls: number;
  duration_ms: number;
  children_count: number;
  /** Root rows: agents spawned in the tree, agents of the tree running now, tokens the tree used. */
  tree_count: number;
  active_count: number;
  tree_tokens: number;
  /** Unread messages addressed to this agent. */
  queue_depth: number;
  max_turns: number;
  time_ms: number;
  /** The server instance running it, and when that instance last said it still is. */
  instance_id: string | null;
  heartbeat_at: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** Row of `agent_messages`: a message queued from one agent to another; `consumed_at` set once delivered. */
export interface AgentMessagesTable {
  id: string;
  user_id: string;
  root_id: string;
  sender_id: string;
  target_id: string;
  body: string;
  created_at: string;
  consumed_at: string | null;
  /** Position in the target's queue (per target, increasing in the order messages were queued). */
  seq: number;
  /** 1 for a woken agent's answer to the messages that woke it (never answered in turn), else 0. */
  reply: number;
}

/** Row of `agent_sends`: one send of an ordered pair (the sliding window of the pair rate limit), ms since epoch. */
export interface AgentSendsTable {
  sender_id: string;
  target_id: string;
  sent_ms: number;
}

/** The whole schema, as Kysely sees it. */
export interface DatabaseSchema {
  user_tool_settings: UserToolSettingsTable;
  api_tokens: ApiTokensTable;
  chats: ChatsTable;
  chat_messages: ChatMessagesTable;
  file_reads: FileReadsTable;
  audit_log: AuditLogTable;
  images: ImagesTable;
  spills: SpillsTable;
  server_secrets: ServerSecretsTable;
  approvals: ApprovalsTable;
  approval_turns: ApprovalTurnsTable;
  agents: AgentsTable;
  agent_messages: AgentMessagesTable;
  agent_sends: AgentSendsTable;
}

/** An open database with its dialect. */
export interface ToolhostDatabase {
  db: Kysely<DatabaseSchema>;
  dialect: "sqlite" | "postgres";
  /** Where it lives: the SQLite file path, or the PostgreSQL URL without its password. */
  location: string;
  /**
   * The files holding its data on this host: the SQLite file and its `-wal`, `-shm` and `-journal` siblings
   * (whether or not they exist yet); empty for PostgreSQL. Tools never touch them (they are protected paths).
   */
  files: string[];
  /**
   * PostgreSQL only: LISTENs on `channel` over a dedicated connection that reconnects by itself (see
   * storage/pg-listener.ts). Absent on SQLite.
   */
  listen?: (channel: string, handlers: ChannelListenerHandlers) => ChannelListener;
  close(): Promise<void>;
}

/** The SQLite file `file` and the siblings SQLite keeps beside it (write-ahead log, shared memory, rollback journal). */
export function sqliteFiles(file: string): string[] {
  return [file, `${file}-wal`, `${file}-shm`, `${file}-journal`];
}

/** Options of openDatabase. */
export interface OpenDatabaseOptions {
  /** Data directory; the SQLite file is `<dataDir>/toolhost.db`. Default: resolveDataDir() (`$TOOLHOST_DATA_DIR`, else the XDG data directory). */
  dataDir?: string;
  /** `postgres://…` selects PostgreSQL; `sqlite:PATH` or a plain path selects that SQLite file. Default: env `TOOLHOST_DATABASE_URL`. */
  url?: string;
}

export { chooseDataDir, resolveDataDir } from "../core/data-dir.js";

/** Most prepared statements kept per SQLite connection (least recently used dropped first). */
const STATEMENT_CACHE_SIZE = 256;

/**
 * The connection as Kysely sees it, with prepared statements reused by SQL text: Kysely prepares every query
 * afresh, and on hot reads (the settings list, token checks) preparing cost as much as running. A statement that
 * is still iterating a result is never handed out twice; SQLite re-prepares cached statements itself after a
 * schema change.
 */
function withStatementCache(sqlite: Database.Database): SqliteDatabase {
  const cache = new Map<string, Database.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      const hit = cache.get(sql);
      if (hit && !hit.busy) {
        cache.delete(sql);
        cache.set(sql, hit);
        return hit;
      }
      const statement = sqlite.prepare(sql);
      if (!hit) {
        cache.set(sql, statement);
        if (cache.size > STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
      }
      return statement;
    },
  } as SqliteDatabase;
}

/** The prepared statements of inTransaction's direct control of `sqlite` (see SqliteTransactions). */
function sqliteTransactionControl(sqlite: Database.Database): SqliteTransactions {
  const shortWait = sqlite.prepare(`PRAGMA busy_timeout = ${SQLITE_BEGIN_WAIT_MS}`);
  const usualWait = sqlite.prepare(`PRAGMA busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  const begin = sqlite.prepare("BEGIN IMMEDIATE");
  const commit = sqlite.prepare("COMMIT");
  const rollback = sqlite.prepare("ROLLBACK");
  return {
    beginImmediate() {
      shortWait.get();
      try {
        begin.run();
      } finally {
        usualWait.get();
      }
    },
    commit: () => void commit.run(),
    rollback() {
      if (sqlite.inTransaction) rollback.run();
    },
  };
}

let addonPath: string | null | undefined;

/**
 * The path of better-sqlite3's native addon in its usual place (`build/Release` of the installed package), or null
 * when it is not there. Handed to the constructor, it spares better-sqlite3 its own search through the `bindings`
 * package (a dozen candidate paths, each a failed require with a stack trace) on every process start; with null the
 * constructor searches as usual.
 */
function sqliteAddonPath(): string | null {
  if (addonPath === undefined) {
    try {
      const require = createRequire(import.meta.url);
      const main = require.resolve("better-sqlite3");
      addonPath = require.resolve(join(dirname(main), "..", "build", "Release", "better_sqlite3.node"));
    } catch {
      addonPath = null;
    }
  }
  return addonPath;
}

/**
 * Why a SQLite file could not be opened or created, naming it (or its data directory) and the variable that chooses
 * it: an ancestor that is a file, or the system's reason.
 */
function sqliteOpenError(file: string, fromUrl: boolean, error: unknown): Error {
  let reason = (error as Error)?.message ?? String(error);
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    if (existsSync(dir)) {
      if (!statSync(dir).isDirectory()) reason = `${dir} is not a directory`;
      break;
    }
    if (dirname(dir) === dir) break;
  }
  return new Error(
    fromUrl
      ? `Cannot open the SQLite database ${file}: ${reason}. Set TOOLHOST_DATABASE_URL to a sqlite: file this user can create or write (or leave it unset for the data directory).`
      : `Cannot open the SQLite database in the data directory ${dirname(file)}: ${reason}. Set TOOLHOST_DATA_DIR to a directory this user can create or write.`,
    { cause: error },
  );
}

/**
 * Opens (creating when needed) the database and brings its schema up to date. Throws Error when a migration
 * fails, naming it.
 */
export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<ToolhostDatabase> {
  const url = options.url ?? readConfig().databaseUrl;
  let database: ToolhostDatabase;
  if (url && /^[a-z][a-z0-9+.-]*:\/\//i.test(url) && !/^postgres(ql)?:\/\//i.test(url)) {
    throw new Error(
      `Unsupported database URL "${url.replace(/:[^:@/]*@/, ":***@")}": use postgres://… for PostgreSQL, or sqlite:/path/to/file.db (or leave TOOLHOST_DATABASE_URL unset for SQLite in the data directory).`,
    );
  }
  if (url && /^postgres(ql)?:\/\//i.test(url)) {
    // pg is loaded only for PostgreSQL, so SQLite processes (the CLI, the default server) never parse it.
    const { default: pg } = await import("pg");
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    // A connection the server ends (a PostgreSQL restart, a failover, an idle timeout) emits "error": on the pool
    // while it is idle, on the client itself while checked out (between the statements of a transaction, say).
    // Unhandled, either event would end the process. Both are dropped here: the statement running at that moment
    // fails with its own error, the pool discards the broken connection when it comes back (pg-pool checks
    // `_queryable`) and opens a new one for the next query, so the instance reconnects on its own.
    pool.on("error", () => {});
    pool.on("connect", (client) => {
      client.on("error", () => {});
    });
    const db = new Kysely<DatabaseSchema>({ dialect: new PostgresDialect({ pool }) });
    database = {
      db,
      dialect: "postgres",
      location: url.replace(/:[^:@/]*@/, ":***@"),
      files: [],
      listen: (channel, handlers) => listenPostgres(url, channel, handlers),
      close: () => db.destroy(),
    };
  } else {
    const file = url ? resolve(url.replace(/^sqlite:/, "")) : join(resolveDataDir(options.dataDir), "toolhost.db");
    const created = !existsSync(file);
    let sqlite: Database.Database;
    try {
      makeDirectoriesSync(resolve(file, ".."), 0o700);
      const addon = sqliteAddonPath();
      sqlite = new Database(file, addon ? { nativeBinding: addon } : {});
    } catch (error) {
      throw sqliteOpenError(file, Boolean(url), error);
    }
    // A new file is private to its owner (it holds tokens and credentials), wherever TOOLHOST_DATABASE_URL puts it;
    // SQLite gives the -wal/-shm/-journal files it creates later the main file's mode.
    if (created) chmodSync(file, 0o600);
    // The busy timeout first: switching a fresh file to WAL takes a lock another starting process may hold.
    sqlite.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
    sqlite.pragma("journal_mode = WAL");
    // WAL's recommended durability: a commit is not synced to disk on its own (the WAL is at checkpoints), so a
    // write costs no fsync on the event loop; the database stays consistent through a crash of the process or the
    // machine, and only the last commits may be lost if the machine itself loses power.
    sqlite.pragma("synchronous = NORMAL");
    sqlite.pragma("foreign_keys = ON");
    const db = new Kysely<DatabaseSchema>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
    registerSqliteTransactions(db, sqliteTransactionControl(sqlite));
    database = { db, dialect: "sqlite", location: file, files: sqliteFiles(file), close: () => db.destroy() };
  }
  try {
    await migrateToLatest(database.db, migrations, { location: database.location });
  } catch (error) {
    await database.close().catch(() => {});
    if (error instanceof MigrationError || error instanceof SchemaDamageError) throw error;
    throw new Error(
      `Cannot open the ${database.dialect} database at ${database.location}: ${(error as Error)?.message ?? String(error)}${database.dialect === "postgres" ? ". Check that the PostgreSQL server is running and accepts this user, and that TOOLHOST_DATABASE_URL is right." : ""}`,
      { cause: error },
    );
  }
  return database;
}
