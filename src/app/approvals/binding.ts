/**
 * What binds an approval to its call: the fields its HMAC covers, the canonical form of the arguments hashed into
 * it, and the errors and store of the signing key every instance shares.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { BrandedError, errorBrand } from "../../core/errors.js";
import { makeDirectoriesSync } from "../../core/make-directory.js";

/**
 * The approval key file in this instance's data directory differs from the key stored in the database that every
 * instance shares: approvals signed by one would be refused by the other, so the instance refuses to start. The
 * message says what to do.
 */
export class ApprovalKeyMismatchError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ApprovalKeyMismatchError");
  override readonly name = "ApprovalKeyMismatchError";
  readonly code = "approval_key_mismatch";
  constructor(readonly keyFile: string) {
    super(
      `The approval signing key in ${keyFile} differs from the one stored in the database, which every instance on that database shares; approvals signed with one would be refused with the other. Remove ${keyFile} to use the database's key (asks still pending under the local key must then be asked again), or set TOOLHOST_DATABASE_URL to the database this data directory belongs to.`,
    );
  }
}

/** Reads and first-writes a secret shared through the database (storage's ServerSecretRepository). */
export interface SharedSecrets {
  adopt(name: string, candidate: string): Promise<string>;
}

/** The fields an approval's HMAC covers. */
export interface ApprovalBinding {
  approvalId: string;
  toolCallId: string;
  tool: string;
  argsHash: string;
  userId: string;
  /** The resolved working directory the call runs in (null: the server's own). */
  workingDirectory: string | null;
  /** The chat the call belongs to (null: none). */
  chatId: string | null;
}

/** The working directory as an approval binds it: resolved to an absolute path, or null for none. */
export function boundDirectory(workingDirectory: string | null | undefined): string | null {
  return workingDirectory ? resolve(workingDirectory) : null;
}

/** JSON with object keys sorted at every level (the canonical form hashed for approvals). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** sha256 hex of a call's canonical arguments (raw JSON text is decoded first; text that is not JSON is hashed as is). */
export function argumentsHash(args: unknown): string {
  let value = args;
  if (typeof args === "string") {
    try {
      value = JSON.parse(args);
    } catch {
      return createHash("sha256").update(`raw:${args}`).digest("hex");
    }
  }
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

/**
 * The HMAC key approvals are signed with, kept by one service: the key every instance shares through the database,
 * or (before that is loaded) the one in the data directory's key file.
 */
export class ApprovalKeyring {
  readonly #file: string;
  #key: Buffer | undefined;

  /** `file`: the data directory's key file (`<dataDir>/approval.key`). */
  constructor(file: string) {
    this.#file = file;
  }

  /**
   * Loads the key every instance shares from the database: the stored one, or, on the first start against this
   * database, this data directory's key file when there is one (so asks pending across an upgrade stay valid), else
   * 32 new random bytes. Throws ApprovalKeyMismatchError when the key file exists and differs from the stored key,
   * Error when the key file is damaged, and the database's error.
   */
  async loadShared(secrets: SharedSecrets): Promise<void> {
    let local: string | undefined;
    try {
      local = readFileSync(this.#file, "utf8").trim().toLowerCase();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    if (local !== undefined && !/^(?:[0-9a-f]{2}){32,}$/.test(local)) {
      throw new Error(`The approval key in ${this.#file} is damaged; remove it to use the database's key.`);
    }
    const shared = await secrets.adopt("approval_key", local ?? randomBytes(32).toString("hex"));
    if (local !== undefined && shared !== local) throw new ApprovalKeyMismatchError(this.#file);
    const key = Buffer.from(shared, "hex");
    if (key.length < 32) throw new Error("The approval key stored in the database is damaged (shorter than 32 bytes).");
    this.#key = key;
  }

  /**
   * The server key: the shared one once {@link loadShared} ran (the application context does, at start), else
   * read from the data directory or created there (32 random bytes, mode 0600).
   */
  key(): Buffer {
    if (this.#key) return this.#key;
    try {
      this.#key = Buffer.from(readFileSync(this.#file, "utf8").trim(), "hex");
    } catch {
      makeDirectoriesSync(join(this.#file, ".."), 0o700);
      try {
        writeFileSync(this.#file, `${randomBytes(32).toString("hex")}\n`, { flag: "wx", mode: 0o600 });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      this.#key = Buffer.from(readFileSync(this.#file, "utf8").trim(), "hex");
    }
    if (this.#key.length < 32)
      throw new Error(`The approval key in ${this.#file} is damaged; remove it to create a new one.`);
    return this.#key;
  }

  /** hex HMAC-SHA256 of a binding with the server key. */
  sign(binding: ApprovalBinding): string {
    return createHmac("sha256", this.key())
      .update(
        JSON.stringify([
          binding.approvalId,
          binding.toolCallId,
          binding.tool,
          binding.argsHash,
          binding.userId,
          binding.workingDirectory,
          binding.chatId,
        ]),
      )
      .digest("hex");
  }
}
