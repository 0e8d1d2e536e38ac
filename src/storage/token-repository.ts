/**
 * API bearer tokens (`api_tokens`): created with a label, listed with their last use, revoked and rotated.
 * Only the sha256 digest of a token is stored; the plaintext is returned once, when it is created or rotated.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import { BrandedError, errorBrand } from "../core/errors.js";
import type { ApiTokensTable, DatabaseSchema } from "./database.js";
import { inTransaction, type TransactionContext } from "./transaction.js";

/** sha256 hex digest of a token; only this is stored. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** A stored token as listed: never the token itself nor its hash. Times are ISO-8601 UTC. */
export interface TokenInfo {
  id: string;
  userId: string;
  label: string | null;
  createdAt: string;
  /** When a request last authenticated with it (updated at most once a minute), or null if never. */
  lastUsedAt: string | null;
}

/** A newly issued token: its id and the plaintext, shown only this once. */
export interface IssuedToken {
  id: string;
  token: string;
}

/** How often (ms) a token's last-used time is written at most: reads stay cheap under many requests. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * How long (ms) a successful token check is reused without asking the database. A revocation or rotation made
 * through this process takes effect at once (it clears the cache); one made by another process (the CLI, another
 * server instance) within this time.
 */
export const TOKEN_CACHE_MS = 1_000;

/** Most tokens whose check is cached (least recently used dropped first). */
const TOKEN_CACHE_SIZE = 10_000;

const now = () => new Date().toISOString();

function toInfo(r: ApiTokensTable): TokenInfo {
  return { id: r.id, userId: r.user_id, label: r.label, createdAt: r.created_at, lastUsedAt: r.last_used_at };
}

/** Thrown when a token id (or id prefix) names no token, or more than one. */
export class TokenLookupError extends BrandedError {
  static override readonly brand: symbol = errorBrand("TokenLookupError");
  constructor(
    message: string,
    readonly reason: "not_found" | "ambiguous",
  ) {
    super(message);
  }
}

/** Bearer tokens mapped to users, stored hashed. */
export class TokenRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /** token → its row's id and user, and until when (epoch ms) the check may be reused. */
  readonly #checked = new Map<string, { id: string; userId: string; until: number }>();

  /** Creates a token for the user; returns the plaintext token (shown once) and its id. */
  async create(userId: string, label: string | null = null): Promise<IssuedToken> {
    const token = newToken();
    const id = randomUUID();
    await this.db
      .insertInto("api_tokens")
      .values({ id, user_id: userId, token_hash: hashToken(token), label, created_at: now(), last_used_at: null })
      .execute();
    return { id, token };
  }

  /**
   * The user id the token belongs to, or undefined for an unknown (or revoked) token. Records the time of use,
   * at most once a minute per token (one conditional UPDATE, no read-modify-write).
   */
  async authenticate(token: string): Promise<string | undefined> {
    const cached = this.#checked.get(token);
    if (cached && cached.until > Date.now()) return cached.userId;
    const row = await this.db
      .selectFrom("api_tokens")
      .select(["id", "user_id", "last_used_at"])
      .where("token_hash", "=", hashToken(token))
      .executeTakeFirst();
    if (!row) {
      this.#checked.delete(token);
      return undefined;
    }
    const at = new Date();
    const stale = new Date(at.getTime() - LAST_USED_RESOLUTION_MS).toISOString();
    if (row.last_used_at === null || row.last_used_at < stale) {
      await this.db
        .updateTable("api_tokens")
        .set({ last_used_at: at.toISOString() })
        .where("id", "=", row.id)
        .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", stale)]))
        .execute();
    }
    this.#checked.delete(token);
    this.#checked.set(token, { id: row.id, userId: row.user_id, until: at.getTime() + TOKEN_CACHE_MS });
    if (this.#checked.size > TOKEN_CACHE_SIZE) this.#checked.delete(this.#checked.keys().next().value as string);
    return row.user_id;
  }

  /** Forgets cached checks of the token with this row id (after it was revoked or rotated). */
  #forget(id: string): void {
    for (const [token, entry] of this.#checked) if (entry.id === id) this.#checked.delete(token);
  }

  /** Tokens, oldest first; `userId` restricts to one user's. */
  async list(userId?: string): Promise<TokenInfo[]> {
    let query = this.db.selectFrom("api_tokens").selectAll().orderBy("created_at").orderBy("id");
    if (userId) query = query.where("user_id", "=", userId);
    return (await query.execute()).map(toInfo);
  }

  /**
   * The token whose id is `idOrPrefix`, or whose id starts with it (at least 6 characters, so the short ids a
   * listing shows work). `userId` restricts the search to one user's tokens. Throws TokenLookupError when none
   * or several match.
   */
  async find(idOrPrefix: string, userId?: string): Promise<TokenInfo> {
    return findIn(this.db, idOrPrefix, userId);
  }

  /** Revokes (deletes) a token; returns what was revoked. Throws TokenLookupError like find(). */
  async revoke(idOrPrefix: string, userId?: string): Promise<TokenInfo> {
    return inTransaction(this.db, async (trx, tx) => {
      const found = await findIn(trx, idOrPrefix, userId, tx);
      await trx.deleteFrom("api_tokens").where("id", "=", found.id).execute();
      this.#forget(found.id);
      return found;
    });
  }

  /**
   * Replaces a token by a new one for the same user and label, in one transaction: the old token stops working
   * the moment the new one exists. Returns the new plaintext token (shown once) with the old token's info.
   */
  async rotate(idOrPrefix: string, userId?: string): Promise<IssuedToken & { replaced: TokenInfo }> {
    return inTransaction(this.db, async (trx, tx) => {
      const found = await findIn(trx, idOrPrefix, userId, tx);
      const token = newToken();
      const id = randomUUID();
      await trx.deleteFrom("api_tokens").where("id", "=", found.id).execute();
      this.#forget(found.id);
      await trx
        .insertInto("api_tokens")
        .values({
          id,
          user_id: found.userId,
          token_hash: hashToken(token),
          label: found.label,
          created_at: now(),
          last_used_at: null,
        })
        .execute();
      return { id, token, replaced: found };
    });
  }

  /** How many tokens exist (any user). */
  async count(): Promise<number> {
    const row = await this.db
      .selectFrom("api_tokens")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}

function newToken(): string {
  return `th_${randomBytes(32).toString("base64url")}`;
}

async function findIn(
  db: Kysely<DatabaseSchema>,
  idOrPrefix: string,
  userId?: string,
  tx?: TransactionContext,
): Promise<TokenInfo> {
  const key = idOrPrefix.trim().toLowerCase();
  if (!/^[0-9a-f-]{6,36}$/.test(key)) {
    throw new TokenLookupError(
      `"${idOrPrefix}" is not a token id: use the id (or its first 6+ characters) that \`toolhost token list\` shows.`,
      "not_found",
    );
  }
  let query = db
    .selectFrom("api_tokens")
    .selectAll()
    .where((eb) => eb.or([eb("id", "=", key), eb("id", "like", `${key}%`)]))
    .limit(2);
  if (userId) query = query.where("user_id", "=", userId);
  // Inside a revoke or rotate, the row stays locked (PostgreSQL) until the transaction ends.
  const rows = await (tx ? tx.forUpdate(query) : query).execute();
  const exact = rows.find((r) => r.id === key);
  if (exact) return toInfo(exact);
  if (rows.length === 0) {
    throw new TokenLookupError(
      `No token with id "${idOrPrefix}"${userId ? ` for user "${userId}"` : ""}. List them with \`toolhost token list\`.`,
      "not_found",
    );
  }
  if (rows.length > 1) {
    throw new TokenLookupError(
      `Token id prefix "${idOrPrefix}" matches several tokens; give more of the id.`,
      "ambiguous",
    );
  }
  return toInfo(rows[0]!);
}
