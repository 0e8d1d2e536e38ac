/**
 * Schema migrations, written with Kysely's schema builder so that one set serves SQLite and PostgreSQL.
 * Add a new entry (never edit a landed one); names sort in the order they run.
 */
import type { Kysely, Migration } from "kysely";
import { dialectOf } from "./transaction.js";

export const migrations: Record<string, Migration> = {
  "0001_initial": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("user_tool_settings")
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("tool_name", "text", (c) => c.notNull())
        .addColumn("enabled", "integer")
        .addColumn("parameters", "text", (c) => c.notNull().defaultTo("{}"))
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("user_tool_settings_pk", ["user_id", "tool_name"])
        .execute();

      await db.schema
        .createTable("api_tokens")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("label", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("last_used_at", "text")
        .execute();

      await db.schema
        .createTable("chats")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("title", "text")
        .addColumn("working_directory", "text")
        .addColumn("provider", "text")
        .addColumn("model", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("chats_user_idx").on("chats").column("user_id").execute();

      await db.schema
        .createTable("chat_messages")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("chat_id", "text", (c) => c.notNull().references("chats.id").onDelete("cascade"))
        .addColumn("seq", "integer", (c) => c.notNull())
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("content", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addUniqueConstraint("chat_messages_chat_seq", ["chat_id", "seq"])
        .execute();

      await db.schema
        .createTable("file_reads")
        .addColumn("chat_id", "text", (c) => c.notNull())
        .addColumn("path", "text", (c) => c.notNull())
        .addColumn("sha256", "text", (c) => c.notNull())
        .addColumn("read_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("file_reads_pk", ["chat_id", "path"])
        .execute();

      await db.schema
        .createTable("audit_log")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("chat_id", "text")
        .addColumn("tool", "text", (c) => c.notNull())
        .addColumn("command", "text", (c) => c.notNull())
        .addColumn("cwd", "text")
        .addColumn("exit_code", "integer")
        .addColumn("termination", "text", (c) => c.notNull())
        .addColumn("duration_ms", "integer", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("audit_log_created_idx").on("audit_log").column("created_at").execute();

      await db.schema
        .createTable("images")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("chat_id", "text")
        .addColumn("path", "text", (c) => c.notNull())
        .addColumn("mime_type", "text", (c) => c.notNull())
        .addColumn("prompt", "text", (c) => c.notNull())
        .addColumn("model", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<any>) {
      for (const table of [
        "images",
        "audit_log",
        "file_reads",
        "chat_messages",
        "chats",
        "api_tokens",
        "user_tool_settings",
      ]) {
        await db.schema.dropTable(table).ifExists().execute();
      }
    },
  },
  "0002_admin_locked_settings": {
    async up(db: Kysely<any>) {
      await db.schema
        .alterTable("user_tool_settings")
        .addColumn("locked", "text", (c) => c.notNull().defaultTo("[]"))
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("user_tool_settings").dropColumn("locked").execute();
    },
  },
  "0005_agents": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("agents")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("chat_id", "text")
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("root_id", "text", (c) => c.notNull())
        .addColumn("parent_id", "text")
        .addColumn("depth", "integer", (c) => c.notNull())
        .addColumn("path", "text", (c) => c.notNull())
        .addColumn("template", "text", (c) => c.notNull())
        .addColumn("provider", "text")
        .addColumn("model", "text")
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("task", "text", (c) => c.notNull())
        .addColumn("result", "text")
        .addColumn("note", "text")
        .addColumn("transcript", "text", (c) => c.notNull().defaultTo("[]"))
        .addColumn("input_tokens", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("output_tokens", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("turns", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("tool_calls", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("duration_ms", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("children_count", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("tree_count", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("active_count", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("tree_tokens", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("queue_depth", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("max_turns", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("time_ms", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("instance_id", "text")
        .addColumn("heartbeat_at", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("finished_at", "text")
        .execute();
      await db.schema.createIndex("agents_user_idx").on("agents").columns(["user_id", "created_at"]).execute();
      await db.schema.createIndex("agents_root_idx").on("agents").column("root_id").execute();
      await db.schema.createIndex("agents_parent_idx").on("agents").column("parent_id").execute();
      await db.schema.createIndex("agents_status_idx").on("agents").column("status").execute();

      await db.schema
        .createTable("agent_messages")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("root_id", "text", (c) => c.notNull())
        .addColumn("sender_id", "text", (c) => c.notNull())
        .addColumn("target_id", "text", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("consumed_at", "text")
        .execute();
      await db.schema
        .createIndex("agent_messages_target_idx")
        .on("agent_messages")
        .columns(["target_id", "consumed_at", "created_at"])
        .execute();

      await db.schema
        .createTable("agent_sends")
        .addColumn("sender_id", "text", (c) => c.notNull())
        .addColumn("target_id", "text", (c) => c.notNull())
        .addColumn("sent_ms", "bigint", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("agent_sends_pair_idx")
        .on("agent_sends")
        .columns(["sender_id", "target_id", "sent_ms"])
        .execute();
    },
    async down(db: Kysely<any>) {
      for (const table of ["agent_sends", "agent_messages", "agents"]) {
        await db.schema.dropTable(table).ifExists().execute();
      }
    },
  },
  "0005b_agent_message_order": {
    async up(db: Kysely<any>) {
      // Messages to one agent are delivered in the order they were queued, also when several arrive in the same
      // millisecond: a per-target sequence number taken under the target's row lock.
      await db.schema
        .alterTable("agent_messages")
        .addColumn("seq", "bigint", (c) => c.notNull().defaultTo(0))
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("agent_messages").dropColumn("seq").execute();
    },
  },
  "0007_mcp_servers": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("mcp_servers")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("config", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("mcp_servers").ifExists().execute();
    },
  },
  "0009_shared_bytes": {
    async up(db: Kysely<any>) {
      // Bytes every instance on one database reads: spilled outputs, generated images, the approval key.
      const blob = dialectOf(db) === "postgres" ? "bytea" : "blob";
      await db.schema
        .createTable("spills")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("chat_id", "text")
        .addColumn("tool", "text", (c) => c.notNull())
        .addColumn("field", "text", (c) => c.notNull())
        .addColumn("size", "integer", (c) => c.notNull())
        .addColumn("complete", "integer", (c) => c.notNull())
        .addColumn("data", blob, (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("spills_user_created_idx").on("spills").columns(["user_id", "created_at"]).execute();
      await db.schema.createIndex("spills_created_idx").on("spills").column("created_at").execute();
      await db.schema.alterTable("images").addColumn("data", blob).execute();
      await db.schema
        .createTable("server_secrets")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("value", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("server_secrets").ifExists().execute();
      await db.schema.alterTable("images").dropColumn("data").execute();
      await db.schema.dropTable("spills").ifExists().execute();
    },
  },
  "0010_data_sources": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("data_sources")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("config", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("data_sources").ifExists().execute();
    },
  },
  "0012_approval_always_refusal": {
    async up(db: Kysely<any>) {
      // Why "allow always" cannot work for an ask (null: it can): computed when the ask is stored.
      await db.schema.alterTable("approvals").addColumn("always_refusal", "text").execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("approvals").dropColumn("always_refusal").execute();
    },
  },
  "0011_token_expiry_and_prefix": {
    async up(db: Kysely<any>) {
      // When a token stops working (ISO-8601 UTC; null: never), and its first characters, so a holder can tell
      // which listed id is theirs (null for tokens issued before).
      await db.schema.alterTable("api_tokens").addColumn("expires_at", "text").execute();
      await db.schema.alterTable("api_tokens").addColumn("prefix", "text").execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("api_tokens").dropColumn("prefix").execute();
      await db.schema.alterTable("api_tokens").dropColumn("expires_at").execute();
    },
  },
  "0006_approvals_and_audit": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("approvals")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("chat_id", "text")
        .addColumn("turn_id", "text")
        .addColumn("tool_call_id", "text", (c) => c.notNull())
        .addColumn("tool", "text", (c) => c.notNull())
        .addColumn("args_hash", "text", (c) => c.notNull())
        .addColumn("preview", "text", (c) => c.notNull())
        .addColumn("rule", "text")
        .addColumn("reason", "text", (c) => c.notNull())
        .addColumn("candidates", "text", (c) => c.notNull().defaultTo("[]"))
        .addColumn("agent_path", "text")
        .addColumn("working_directory", "text")
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("decision", "text")
        .addColumn("message", "text")
        .addColumn("decided_by", "text")
        .addColumn("decided_at", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .addColumn("hmac", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("approvals_user_status_idx").on("approvals").columns(["user_id", "status"]).execute();
      await db.schema.createIndex("approvals_chat_idx").on("approvals").columns(["chat_id", "status"]).execute();
      await db.schema.createIndex("approvals_turn_idx").on("approvals").columns(["turn_id"]).execute();

      await db.schema
        .createTable("approval_turns")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("chat_id", "text", (c) => c.notNull())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("owner", "text", (c) => c.notNull())
        .addColumn("heartbeat_at", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("approval_turns_chat_idx").on("approval_turns").column("chat_id").execute();

      for (const [column, type] of [
        ["kind", "text"],
        ["actor", "text"],
        ["arguments", "text"],
        ["outcome", "text"],
        ["error_code", "text"],
        ["approval", "text"],
        ["approved_by", "text"],
        ["sandboxed", "integer"],
        ["details", "text"],
      ] as const) {
        await db.schema.alterTable("audit_log").addColumn(column, type).execute();
      }
      await db.schema.createIndex("audit_log_user_idx").on("audit_log").columns(["user_id", "created_at"]).execute();
      await db.schema.createIndex("audit_log_tool_idx").on("audit_log").columns(["tool", "created_at"]).execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropIndex("audit_log_tool_idx").ifExists().execute();
      await db.schema.dropIndex("audit_log_user_idx").ifExists().execute();
      for (const column of [
        "details",
        "sandboxed",
        "approved_by",
        "approval",
        "error_code",
        "outcome",
        "arguments",
        "actor",
        "kind",
      ]) {
        await db.schema.alterTable("audit_log").dropColumn(column).execute();
      }
      await db.schema.dropTable("approval_turns").ifExists().execute();
      await db.schema.dropTable("approvals").ifExists().execute();
    },
  },
  "0008_turn_leases": {
    async up(db: Kysely<any>) {
      // One row per chat that ever ran a turn: who runs its current turn (owner, fencing epoch, lease expiry in ms
      // of the database's clock), a cancel request, and the state another instance needs to take the turn over.
      await db.schema
        .createTable("chat_leases")
        .addColumn("chat_id", "text", (c) => c.primaryKey())
        .addColumn("turn_id", "text")
        .addColumn("user_id", "text")
        .addColumn("owner", "text")
        .addColumn("epoch", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("expires_ms", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("cancel_requested", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("state", "text")
        .execute();
      await db.schema.createIndex("chat_leases_expiry_idx").on("chat_leases").columns(["expires_ms"]).execute();
      // Every SSE event of a chat's turns, numbered per chat (the SSE `id:`).
      await db.schema
        .createTable("turn_events")
        .addColumn("chat_id", "text", (c) => c.notNull())
        .addColumn("seq", "bigint", (c) => c.notNull())
        .addColumn("turn_id", "text", (c) => c.notNull())
        .addColumn("type", "text", (c) => c.notNull())
        .addColumn("data", "text", (c) => c.notNull())
        .addColumn("created_ms", "bigint", (c) => c.notNull())
        .addPrimaryKeyConstraint("turn_events_pk", ["chat_id", "seq"])
        .execute();
      // The journal of a turn's tool calls: recorded before a call runs and when it ends.
      await db.schema
        .createTable("tool_journal")
        .addColumn("turn_id", "text", (c) => c.notNull())
        .addColumn("call_id", "text", (c) => c.notNull())
        .addColumn("tool", "text", (c) => c.notNull())
        .addColumn("epoch", "bigint", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("result", "text")
        .addColumn("started_ms", "bigint", (c) => c.notNull())
        .addColumn("ended_ms", "bigint")
        .addPrimaryKeyConstraint("tool_journal_pk", ["turn_id", "call_id"])
        .execute();
      // Signals between instances (ids only), read by the poll fallback; NOTIFY carries the same row.
      await db.schema
        .createTable("signals")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("target", "text", (c) => c.notNull())
        .addColumn("created_ms", "bigint", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("signals_created_idx").on("signals").columns(["created_ms"]).execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("signals").ifExists().execute();
      await db.schema.dropTable("tool_journal").ifExists().execute();
      await db.schema.dropTable("turn_events").ifExists().execute();
      await db.schema.dropTable("chat_leases").ifExists().execute();
    },
  },
  "0003_settings_version": {
    async up(db: Kysely<any>) {
      await db.schema
        .alterTable("user_tool_settings")
        .addColumn("version", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("user_tool_settings").dropColumn("version").execute();
    },
  },
  "0016_agent_message_reply": {
    // A woken agent's answer to the messages that woke it is marked a reply: it wakes its reader like any message
    // but is not answered in turn (two agents would otherwise answer each other's answers forever).
    async up(db: Kysely<any>) {
      await db.schema
        .alterTable("agent_messages")
        .addColumn("reply", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("agent_messages").dropColumn("reply").execute();
    },
  },
  "0015_allowlist_preset_default": {
    // shell_exec's default allowlist preset was stored as "seed"; it is named "default" now. Stored values are
    // rewritten (settings and admin locks keep their meaning); anything else in the JSON is left as it was.
    async up(db: Kysely<any>) {
      const rows = await db
        .selectFrom("user_tool_settings")
        .select(["user_id", "tool_name", "parameters"])
        .where("tool_name", "=", "shell_exec")
        .where("parameters", "like", '%"seed"%')
        .execute();
      for (const row of rows) {
        let parameters: unknown;
        try {
          parameters = JSON.parse(String(row.parameters));
        } catch {
          continue; // corrupt JSON reads as defaults anyway
        }
        if (!parameters || typeof parameters !== "object" || Array.isArray(parameters)) continue;
        const values = parameters as Record<string, unknown>;
        if (values.allowlistPreset !== "seed") continue;
        values.allowlistPreset = "default";
        await db
          .updateTable("user_tool_settings")
          .set({ parameters: JSON.stringify(values) })
          .where("user_id", "=", row.user_id)
          .where("tool_name", "=", row.tool_name)
          .execute();
      }
    },
  },
};
