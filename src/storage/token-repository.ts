/**
 * API bearer tokens (`api_tokens`): created with a label and an optional lifetime, listed with their first
 * characters and last use, revoked and rotated. Only the sha256 digest of a token (and its first characters) is
 * stored; the plaintext is returned once, when it is created or rotated.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { type Kysely, sql } from "kysely";
import { BrandedError, errorBrand, ToolArgumentError } from "../core/errors.js";
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
  /** When it stops working, or null for never. */
  expiresAt: string | null;
  /** Its first characters (`th_` and 6 more), so a holder can match it to its id; null for old tokens. */
  prefix: string | null;
}

/** How many characters of a token (including `th_`) are stored and listed: 6 of its 43 random ones. */
export const TOKEN_PREFIX_LENGTH = 9;

/** Longest lifetime `parseTokenLifetime` accepts: ten years. */
const MAX_LIFETIME_MS = 10 * 365 * 86_400_000;

const LIFETIME_UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/**
 * Parses a token lifetime such as `30d`, `12h`, `90m` or `2w` (a positive integer and one unit: minutes, hours,
 * days, weeks; at most ten years) to milliseconds. Throws ToolArgumentError naming the accepted forms otherwise.
 */
export function parseTokenLifetime(text: string): number {
  const match = /^\s*(\d{1,9})\s*([mhdw])\s*$/.exec(text);
  const ms = match ? Number(match[1]) * (LIFETIME_UNITS[match[2] as string] as number) : Number.NaN;
  if (!(ms > 0) || ms > MAX_LIFETIME_MS) {
    const shown = JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
    throw new ToolArgumentError(
      `Token lifetime ${shown} is not valid: use a number and a unit, m (minutes), h (hours), d (days) or w (weeks), e.g. 30d; at most 10 years.`,
      { argument: "expiresIn" },
    );
  }
  return ms;
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

const now = (): string => new Date().toISOString();

function toInfo(r: ApiTokensTable): TokenInfo {
  return {
    id: r.id,
    userId: r.user_id,
    label: r.label,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
    expiresAt: r.expires_at ?? null,
    prefix: r.prefix ?? null,
  };
}

/** Options of {@link TokenRepository.create}. */
export interface CreateTokenOptions {
  /** A note to remember the token by. */
  label?: string | null;
  /** Lifetime in milliseconds from now (see parseTokenLifetime); absent: the token never expires. */
  expiresInMs?: number;
}

/** How often (ms) a watched token (a streaming turn's) is checked again for a revocation made by another process. */
export const TOKEN_WATCH_MS = 1_000;

/** Thrown when a token id (or id prefix) names no token, or more than one. */
export class TokenLookupError extends BrandedError {
  static override readonly brand: symbol = errorBrand("TokenLookupError");
  constructor(
    message: string,
    readonly reason: "not_found" | "ambiguous",
  ) {
    super(message);
  }

  /** `not_found`, or `ambiguous_id` for an id prefix that matches several tokens. */
  get code(): "not_found" | "ambiguous_id" {
    return this.reason === "ambiguous" ? "ambiguous_id" : "not_found";
  }
}

/** The advisory lock key of the first token (an arbitrary constant: "tokn" in ASCII). */
const FIRST_TOKEN_LOCK = 0x746f6b6e;

/** Bearer tokens mapped to users, stored hashed. */
export class TokenRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  /** token → its row's id and user, and until when (epoch ms) the check may be reused. */
  readonly #checked = new Map<string, { id: string; userId: string; until: number }>();

  /** Token row id → callbacks of the turns streaming under it, told at once when this process revokes it. */
  readonly #watchers = new Map<string, Set<() => void>>();

  /**
   * Creates a token for the user; returns the plaintext token (shown once) and its id. A `string` second
   * argument is the label (the older form).
   */
  async create(userId: string, options: CreateTokenOptions | string | null = {}): Promise<IssuedToken> {
    const { label = null, expiresInMs } =
      typeof options === "object" && options !== null ? options : { label: options };
    const token = newToken();
    const id = randomUUID();
    const createdAt = new Date();
    await this.db
      .insertInto("api_tokens")
      .values({
        id,
        user_id: userId,
        token_hash: hashToken(token),
        label,
        created_at: createdAt.toISOString(),
        last_used_at: null,
        expires_at: expiresInMs === undefined ? null : new Date(createdAt.getTime() + expiresInMs).toISOString(),
        prefix: token.slice(0, TOKEN_PREFIX_LENGTH),
      })
      .execute();
    return { id, token };
  }

  /**
   * The user id the token belongs to, or undefined for an unknown, revoked or expired token. Records the time of
   * use, at most once a minute per token (one conditional UPDATE, no read-modify-write).
   */
  async authenticate(token: string): Promise<string | undefined> {
    const cached = this.#checked.get(token);
    if (cached && cached.until > Date.now()) return cached.userId;
    const row = await this.db
      .selectFrom("api_tokens")
      .select(["id", "user_id", "last_used_at", "expires_at"])
      .where("token_hash", "=", hashToken(token))
      .executeTakeFirst();
    const at = new Date();
    const expiresMs = row?.expires_at ? Date.parse(row.expires_at) : Number.POSITIVE_INFINITY;
    if (!row || !(expiresMs > at.getTime())) {
      this.#checked.delete(token);
      return undefined;
    }
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
    // A cached check never outlives the token's expiry.
    this.#checked.set(token, {
      id: row.id,
      userId: row.user_id,
      until: Math.min(at.getTime() + TOKEN_CACHE_MS, expiresMs),
    });
    if (this.#checked.size > TOKEN_CACHE_SIZE) this.#checked.delete(this.#checked.keys().next().value as string);
    return row.user_id;
  }

  /** Forgets cached checks of the token with this row id (after it was revoked or rotated) and tells its watchers. */
  #forget(id: string): void {
    for (const [token, entry] of this.#checked) if (entry.id === id) this.#checked.delete(token);
    const watchers = this.#watchers.get(id);
    this.#watchers.delete(id);
    for (const stop of watchers ?? []) queueMicrotask(stop);
  }

  /**
   * Watches a token that just authenticated (a streaming chat turn's): `onInvalid` is called once when it stops
   * working — at once when this process revokes or rotates it, within {@link TOKEN_WATCH_MS} plus the check cache
   * when another process does, and when it expires. Returns the function that ends the watch (call it when the
   * turn ends); after `onInvalid` the watch has ended by itself.
   */
  watch(token: string, onInvalid: () => void): () => void {
    let ended = false;
    const id = this.#checked.get(token)?.id;
    const fire = () => {
      if (ended) return;
      end();
      onInvalid();
    };
    if (id !== undefined) {
      const set = this.#watchers.get(id) ?? new Set();
      set.add(fire);
      this.#watchers.set(id, set);
    }
    let checking = false;
    const timer = setInterval(() => {
      if (checking) return;
      checking = true;
      this.authenticate(token)
        .then((userId) => {
          if (userId === undefined) fire();
        })
        .catch(() => {})
        .finally(() => {
          checking = false;
        });
    }, TOKEN_WATCH_MS);
    timer.unref?.();
    const end = () => {
      ended = true;
      clearInterval(timer);
      if (id === undefined) return;
      const set = this.#watchers.get(id);
      set?.delete(fire);
      if (set?.size === 0) this.#watchers.delete(id);
    };
    return end;
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
   * the moment the new one exists. Returns the new plaintext token (shown once) with the old token's info. An
   * expired token is refused (ToolArgumentError): its replacement would keep the expiry and never work.
   */
  async rotate(idOrPrefix: string, userId?: string): Promise<IssuedToken & { replaced: TokenInfo }> {
    return inTransaction(this.db, async (trx, tx) => {
      const found = await findIn(trx, idOrPrefix, userId, tx);
      if (found.expiresAt !== null && found.expiresAt <= now()) {
        throw new ToolArgumentError(
          `Token ${found.id} expired at ${found.expiresAt}, and a rotated token keeps the expiry, so its replacement would not work either. Create a new one with \`toolhost token create --user ${found.userId}\` (with --label and --expires-in as needed), then revoke this one.`,
          { rule: "expired", expiresAt: found.expiresAt },
        );
      }
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
          // The replacement keeps the replaced token's expiry: rotating does not extend a lifetime.
          expires_at: found.expiresAt,
          prefix: token.slice(0, TOKEN_PREFIX_LENGTH),
        })
        .execute();
      return { id, token, replaced: found };
    });
  }

  /** How many tokens exist (any user). */
  /**
   * The first token of an empty table: creates a token for `userId` when no token exists at all and returns it, or
   * returns undefined when one does. Count and insert are one transaction, serialized across processes
   * (PostgreSQL: a transaction-scoped advisory lock; SQLite: `BEGIN IMMEDIATE`), so instances starting together on
   * an empty database create one first token between them, not one each.
   */
  async createFirst(userId: string, label: string): Promise<IssuedToken | undefined> {
    // Every start but the first finds a token: a read answers it without taking the write lock.
    if ((await this.count()) > 0) return undefined;
    return inTransaction(this.db, async (trx, tx) => {
      if (tx.dialect === "postgres") await sql`SELECT pg_advisory_xact_lock(${FIRST_TOKEN_LOCK})`.execute(trx);
      const row = await trx
        .selectFrom("api_tokens")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .executeTakeFirstOrThrow();
      if (Number(row.n) > 0) return undefined;
      return new TokenRepository(trx).create(userId, label);
    });
  }

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
