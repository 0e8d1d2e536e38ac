/**
 * Who is an admin: the users named in TOOLHOST_ADMIN_USERS (comma-separated; default "local", the user the server
 * creates on first start). Read once when the application context is created; every surface asks the context.
 */
import { readConfig } from "../core/config.js";

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
