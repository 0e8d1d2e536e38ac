/** Who is an admin: the users named in TOOLHOST_ADMIN_USERS (comma-separated; default "local"). */

/** The admin user ids from the environment (TOOLHOST_ADMIN_USERS, default "local"). */
export function adminUsers(env: NodeJS.ProcessEnv = process.env): Set<string> {
  return new Set(
    (env.TOOLHOST_ADMIN_USERS ?? "local")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
}
