/**
 * Who is an admin: the users named in TOOLHOST_ADMIN_USERS (comma-separated; default "local", the user the server
 * creates on first start). Read once when the application context is created; every surface asks the context.
 */
import { LOCAL_USER, readConfig } from "../core/config.js";

/** User ids: 1–128 letters, digits, or `. _ @ -` (the same rule everywhere a user is named: CLI, admin routes). */
export const USER_ID_PATTERN = /^[A-Za-z0-9._@-]{1,128}$/;

/** Whether `value` is a valid user id ({@link USER_ID_PATTERN}, and not only dots). */
export function isUserId(value: string): boolean {
  return USER_ID_PATTERN.test(value) && !/^\.+$/.test(value);
}

/** What a malformed user id is told, wherever it is named (CLI `--user`, the admin routes' `:user` and `?user=`). */
export const USER_ID_RULE = "use 1–128 letters, digits, or . _ @ - (not only dots)";

/** The admin rule of one application context. */
export interface AdminRule {
  /** Whether `userId` is an admin. */
  isAdmin(userId: string): boolean;
  /** The admin user ids, for diagnostics (`toolhost doctor`). */
  readonly users: ReadonlySet<string>;
}

/** An AdminRule over a fixed set of user ids (default: the configured admin users, TOOLHOST_ADMIN_USERS). */
export function adminRule(users: Iterable<string> = readConfig().adminUsers): AdminRule {
  const set = new Set(users);
  return { users: set, isAdmin: (userId) => set.has(userId) };
}

/**
 * Whom the first API token of an empty database is made for (`serve` prints it once): the local user while it is an
 * admin (the default) or nobody is, else the first admin TOOLHOST_ADMIN_USERS names, so that the one token a new
 * server prints can administer it.
 */
export function firstTokenUser(admins: AdminRule): string {
  if (admins.users.size === 0 || admins.isAdmin(LOCAL_USER)) return LOCAL_USER;
  return admins.users.values().next().value as string;
}
