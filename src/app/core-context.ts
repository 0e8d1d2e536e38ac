/**
 * The part of the application context every surface shares: the database, the tool runtime backed by it (settings
 * store, audit log, freshness ledger, protected paths), the settings and approval services, the working-directory
 * binder and the ordered shutdown. It loads no tool, no agent service and no provider: ./context.ts adds those for
 * the server, chats and MCP. A one-off tool call (`toolhost call`) opens just this part with the one tool it runs,
 * so a short process does not load and wire what it never uses.
 */

import { setMaxListeners } from "node:events";
import { readConfig, type ToolhostConfig } from "../core/config.js";
import { providerConfigPath } from "../core/credentials.js";
import { chooseDataDir, type DataDirSource } from "../core/data-dir.js";
import { SpillArea } from "../core/output-spill.js";
import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";
import {
  configureDefaultRuntime,
  installationPaths,
  releaseDefaultRuntime,
  SHUTDOWN_GRACE_MS,
  ToolRuntime,
} from "../core/runtime.js";
import { createLogger } from "../core/stores.js";
import type { Logger } from "../core/types.js";
import { ApprovalRepository } from "../storage/approvals.js";
import { DataSourceRepository } from "../storage/data-source-repository.js";
import { openDatabase, type ToolhostDatabase } from "../storage/database.js";
import { SqlFreshnessLedger } from "../storage/freshness-ledger.js";
import { ChatRepository, SqlAuditLog, SqlToolSettingsStore, TokenRepository } from "../storage/repositories.js";
import { ServerSecretRepository } from "../storage/server-secrets.js";
import { SqlSpillStore } from "../storage/spill-repository.js";
import { DataSourceCatalog } from "../tools/data/sources.js";
import { type AdminRule, adminRule } from "./admin.js";
import { ApprovalService } from "./approvals/service.js";
import { SqlImageStore } from "./sql-image-store.js";
import { ToolSettingsService } from "./tool-settings-service.js";
import { WorkingDirectoryBinder } from "./working-directory.js";

/** The shared part of the application context, wired to one database (see {@link openCoreContext}). */
export interface CoreContext {
  /** The configuration read from the environment when the context was created (core/config.ts). */
  config: ToolhostConfig;
  /** The data directory (absolute): SQLite file, images, spilled outputs. */
  dataDir: string;
  /** Why it is that directory: an option, TOOLHOST_DATA_DIR, XDG_DATA_HOME, or the home default. */
  dataDirSource: DataDirSource;
  database: ToolhostDatabase;
  runtime: ToolRuntime;
  settings: ToolSettingsService;
  tokens: TokenRepository;
  chats: ChatRepository;
  audit: SqlAuditLog;
  /** Approval asks, answers and suspended turns (the gate in front of every tool call). */
  approvals: ApprovalService;
  logger: Logger;
  /**
   * The declared data sources of the SQL tools (config file `dataSources` and stored ones) and their connection
   * pools, closed with the context. Handed to tools as the `dataSources` service.
   */
  dataSources: DataSourceCatalog;
  /** Who is an admin (TOOLHOST_ADMIN_USERS, read once when the context is created). */
  admins: AdminRule;
  /** The one working-directory binder of every surface (TOOLHOST_CHAT_ROOTS, read once). */
  binder: WorkingDirectoryBinder;
  /** Registers work to run (in reverse order of registration) when the context closes, before the database. */
  onClose(hook: () => Promise<void> | void): void;
  /**
   * Fires when {@link close} begins: long-running work (a chat turn streaming to a client) links its own abort to it
   * and stops.
   */
  shutdownSignal: AbortSignal;
  /**
   * Keeps `work` (a chat turn, a background resume) open until it settles: {@link close} waits for it (bounded)
   * before closing the database, so what it stores is not lost. Returns `work`.
   */
  track<T>(work: Promise<T>): Promise<T>;
  /**
   * Shuts down in order: fires {@link shutdownSignal}; cancels running tool calls (shell tools kill their process
   * groups) and waits for their audit lines; runs the stop steps (sub-agents); waits for tracked work; runs the close
   * hooks; closes the database. Every wait is bounded (about 10 s in all when something hangs). Idempotent: a second
   * call returns the first one's promise.
   */
  close(): Promise<void>;
}

/**
 * Options of openCoreContext; defaults come from the environment (TOOLHOST_DATA_DIR, else the XDG data directory;
 * TOOLHOST_DATABASE_URL; TOOLHOST_ADMIN_USERS; TOOLHOST_CHAT_ROOTS).
 */
export interface CoreContextOptions {
  /** The environment the configuration is read from (default process.env); see core/config.ts. */
  env?: NodeJS.ProcessEnv;
  dataDir?: string;
  databaseUrl?: string;
  logger?: Logger;
  /** The tools the runtime runs (default: the process-wide registry, holding the tools whose modules loaded). */
  registry?: ToolRegistryStore;
  /**
   * Registers the tools that read spills when a result is cut (ToolRuntimeOptions.loadSpillReaders): for a process
   * that loaded only the tool it runs. Default: none.
   */
  loadSpillReaders?: (registry: ToolRegistryStore) => Promise<void>;
  /** Admin user ids; default TOOLHOST_ADMIN_USERS (comma-separated), else "local". */
  adminUsers?: Iterable<string>;
  /** Chat roots (`{user}` templates allowed); default TOOLHOST_CHAT_ROOTS; null: none. */
  chatRoots?: string[] | null;
  /**
   * Host services handed to every tool call beside the image store (e.g. `providerCredentials`); without one, tools
   * use the process-wide defaults (core/credentials.ts).
   */
  services?: Record<string, unknown>;
}

/** The core context plus the hook by which ./context.ts adds its own shutdown step. */
export interface CoreWiring {
  context: CoreContext;
  /**
   * Adds a step that close() runs after it has begun cancelling the running tool calls and before it waits for
   * them and for tracked work (the agent service stops its agents here).
   */
  addStopStep(step: () => Promise<void>): void;
  /**
   * Adds a step that close() runs first, before it fires the shutdown signal (the turn coordinator hands its turns
   * over here, so that cancelling them does not store them as ended).
   */
  addFirstStep(step: () => Promise<void>): void;
}

/**
 * Opens the database (migrating it) and wires the runtime and the shared services. Process-wide effect: the
 * runtime becomes the default one (executeTool, trigger and getEnabledToolRuntime use it). Throws when the database
 * cannot open, MigrationError when a migration fails, SchemaDamageError when the schema was changed by hand and
 * ApprovalKeyMismatchError when this data directory's approval key file disagrees with the database's key.
 * Close it with `context.close()`.
 */
export async function openCoreContext(options: CoreContextOptions = {}): Promise<CoreWiring> {
  const env = options.env ?? process.env;
  const config = readConfig(env);
  const { path: dataDir, source: dataDirSource } = chooseDataDir(options.dataDir, env);
  const logger = options.logger ?? createLogger(config.logLevel);
  const database = await openDatabase({ dataDir, url: options.databaseUrl ?? config.databaseUrl });
  const store = new SqlToolSettingsStore(database.db);
  const audit = new SqlAuditLog(database.db);
  const registry = options.registry ?? defaultRegistry;
  const dataSourceRepository = new DataSourceRepository(database.db);
  const dataSources = new DataSourceCatalog({
    loadStored: () => dataSourceRepository.list(),
    onError: (error) => logger.warn({ source: error.name, err: error.message }, "a data source was skipped"),
  });
  const ledger = new SqlFreshnessLedger(database.db, (error) =>
    logger.warn({ err: String(error) }, "storing file reads failed; retrying"),
  );
  const runtime = new ToolRuntime({
    registry,
    store,
    ledger,
    audit,
    logger,
    dataDir,
    // The database file is Toolhost's data even when TOOLHOST_DATABASE_URL puts it outside the data directory; the
    // config file holds provider keys and data-source passwords.
    protectedPaths: [dataDir, ...database.files, providerConfigPath(env), ...installationPaths()],
    services: { ...options.services, imageStore: new SqlImageStore(database.db), dataSources },
    // Spilled outputs live in the database, so every instance on it reads them.
    spill: new SpillArea(dataDir, { store: new SqlSpillStore(database.db) }),
    loadSpillReaders: options.loadSpillReaders,
  });
  configureDefaultRuntime(runtime);
  // A change signal about a user's tools (this process's, or another instance's relayed here) drops their cached rows.
  const unsubscribeStore = registry.changes.subscribe((userId) => store.invalidate(userId));
  // The data sources' pools close last (after every hook), just before the database.
  const closeHooks: (() => Promise<void> | void)[] = [() => dataSources.close()];
  const stopSteps: (() => Promise<void>)[] = [];
  const firstSteps: (() => Promise<void>)[] = [];
  const settings = new ToolSettingsService(registry, store, logger, runtime.services, audit);
  const approvals = new ApprovalService({
    repository: new ApprovalRepository(database.db),
    settings,
    dataDir,
    logger,
    timeoutMs: config.approvalTimeoutMs,
    staleMs: config.approvalStaleMs,
  });
  try {
    await approvals.loadSharedKey(new ServerSecretRepository(database.db));
  } catch (error) {
    unsubscribeStore();
    await runtime.shutdown({ graceMs: 0 }).catch(() => {});
    await database.close().catch(() => {});
    throw error;
  }
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const tracked = new Set<Promise<unknown>>();
  let closing: Promise<void> | undefined;
  const closeInOrder = async () => {
    for (const step of firstSteps) {
      try {
        await step();
      } catch (error) {
        logger.warn({ err: String(error) }, "a shutdown step failed");
      }
    }
    shutdown.abort();
    const stopped = runtime.shutdown();
    for (const step of stopSteps) await step();
    await stopped;
    // Tracked work (chat turns) stops once its tools and model stream are cancelled; it stores what completed.
    await settleWithin(tracked, SHUTDOWN_GRACE_MS);
    for (const hook of closeHooks.splice(0).reverse()) {
      try {
        await hook();
      } catch (error) {
        logger.warn({ err: String(error) }, "a close hook failed");
      }
    }
    // Calls that started meanwhile (a turn's last step) have been refused; their audit lines are written now.
    await runtime.shutdown({ graceMs: 2_000 });
    unsubscribeStore();
    // Audit lines still queued (settings changes, approvals' own records) are written before the database closes.
    await audit.flush();
    await ledger.flush().catch((error: unknown) => logger.warn({ err: String(error) }, "file reads were not stored"));
    await database.close();
    // What the context set process-wide goes back: executeTool and trigger no longer reach a closed database.
    releaseDefaultRuntime(runtime);
  };
  const context: CoreContext = {
    config,
    dataDir,
    dataDirSource,
    database,
    runtime,
    settings,
    approvals,
    dataSources,
    tokens: new TokenRepository(database.db),
    chats: new ChatRepository(database.db),
    audit,
    logger,
    admins: adminRule(options.adminUsers ?? config.adminUsers),
    binder: new WorkingDirectoryBinder(options.chatRoots === undefined ? config.chatRoots : options.chatRoots),
    onClose: (hook) => {
      closeHooks.push(hook);
    },
    shutdownSignal: shutdown.signal,
    track(work) {
      tracked.add(work);
      const done = () => {
        tracked.delete(work);
      };
      work.then(done, done);
      return work;
    },
    close() {
      closing ??= closeInOrder();
      return closing;
    },
  };
  return {
    context,
    addStopStep: (step) => {
      stopSteps.push(step);
    },
    addFirstStep: (step) => {
      firstSteps.push(step);
    },
  };
}

/** Waits until every promise in `work` (including ones added meanwhile) settled, at most `ms`. */
async function settleWithin(work: Set<Promise<unknown>>, ms: number): Promise<void> {
  if (work.size === 0) return;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    timer.unref?.();
  });
  try {
    while (work.size > 0) {
      if (!(await Promise.race([Promise.allSettled([...work]).then(() => true), expired]))) return;
    }
  } finally {
    clearTimeout(timer);
  }
}
