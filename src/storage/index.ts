/**
 * `toolhost/storage`: the database behind the application context — SQLite (a file in the data directory, the
 * default) or PostgreSQL (a `postgres://` URL), migrated on open — and the errors its operations throw.
 */
export { openDatabase, type ToolhostDatabase } from "./database.js";
export { MigrationError, SchemaDamageError } from "./migrate.js";
export type { ChatRepository, SqlAuditLog } from "./repositories.js";
export type { TokenRepository } from "./token-repository.js";
export { TransactionContentionError } from "./transaction.js";
