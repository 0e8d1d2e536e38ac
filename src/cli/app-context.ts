/**
 * The application context for CLI commands, loaded when a command first needs it: the context pulls in storage,
 * the tool registry and every built-in, which `toolhost --version` or `--help` must not pay for.
 */
import type { AppContext, AppContextOptions } from "../app/context.js";
import type { CoreContext } from "../app/core-context.js";

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

/**
 * Runs `fn` with the context a one-off call of the tool `toolName` needs, and closes it afterwards (also on error).
 * For a built-in tool that is the core context (app/core-context.ts: database, runtime, settings, approvals, audit,
 * binder) with that tool's module alone loaded, and `app` is undefined: a short process (`toolhost call
 * get_current_datetime`) neither loads nor wires every other tool, the agent service and the providers (the tools
 * that read spills load when a result is cut, so its reading hint names them). For any other name (a tool imported
 * from an MCP server, a name no tool has) it is the full application context, also passed as `app`.
 */
export async function withToolCallContext<T>(
  toolName: string,
  fn: (ctx: CoreContext, app: AppContext | undefined) => Promise<T>,
): Promise<T> {
  const { loadBuiltinTool, loadSpillReaderTools } = await import("../app/builtin-tools.js");
  let ctx: CoreContext;
  let app: AppContext | undefined;
  if (await loadBuiltinTool(toolName)) {
    const { openCoreContext } = await import("../app/core-context.js");
    // The tools that read spills load only when a result is cut, for its reading hint.
    ctx = (await openCoreContext({ loadSpillReaders: loadSpillReaderTools })).context;
  } else {
    app = await createAppContext();
    ctx = app;
  }
  try {
    return await fn(ctx, app);
  } finally {
    await ctx.close();
  }
}
