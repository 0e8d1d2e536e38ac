/**
 * Who is an admin: the users named in TOOLHOST_ADMIN_USERS (comma-separated; default "local", the user the server
 * creates on first start). Read once when the application context is created; every surface asks the context.
 */

/** The admin rule of one application context. */
export interface AdminRule {
  /** Whether `userId` is an admin. */
  isAdmin(userId: string): boolean;
  /** The admin user ids, for diagnostics (`toolhost doctor`). */
  readonly users: ReadonlySet<string>;
}

/** Parses a TOOLHOST_ADMIN_USERS value (comma-separated, blanks ignored); undefined means the default "local". */
export function parseAdminUsers(value: string | undefined): Set<string> {
  return new Set(
    (value ?? "local")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
}

/** An AdminRule over a fixed set of user ids (default: TOOLHOST_ADMIN_USERS of `env`, read now). */
export function adminRule(users: Iterable<string> = parseAdminUsers(process.env.TOOLHOST_ADMIN_USERS)): AdminRule {
  const set = new Set(users);
  return { users: set, isAdmin: (userId) => set.has(userId) };
}
