/**
 * The application context for CLI commands, loaded when a command first needs it: the context pulls in storage,
 * the tool registry and every built-in, which `toolhost --version` or `--help` must not pay for.
 */
import type { AppContext, AppContextOptions } from "../app/context.js";

/** Opens the application context (see app/context.ts createAppContext); the module loads on the first call. */
export async function createAppContext(options?: AppContextOptions): Promise<AppContext> {
  const { createAppContext: open } = await import("../app/context.js");
  return open(options);
}

/** Runs `fn` with an application context opened for it, and closes the context afterwards (also on error). */
export async function withContext<T>(fn: (ctx: AppContext) => Promise<T>): Promise<T> {
  const ctx = await createAppContext();
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}
