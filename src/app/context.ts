/**
 * The application context shared by the HTTP server and the CLI: the database, the tool runtime backed by it,
 * and the application services. Both front ends open the same data directory, so a setting made in one is seen
 * by the other.
 */
import "../tools/index.js";
import { setMaxListeners } from "node:events";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { AgentTemplateCatalog, loadAgentTemplates, summarizeTemplate } from "../agents/templates.js";
import { setAgentTemplateCatalog } from "../core/agents.js";
import { chooseDataDir, type DataDirSource } from "../core/data-dir.js";
import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";
import { configureDefaultRuntime, installationPaths, SHUTDOWN_GRACE_MS, ToolRuntime } from "../core/runtime.js";
import { createLogger } from "../core/stores.js";
import type { Logger } from "../core/types.js";
import { providerConfigPath } from "../providers/index.js";
import { tableCredentialSource } from "../providers/table.js";
import { AgentRepository } from "../storage/agent-repository.js";
import { ApprovalRepository } from "../storage/approvals.js";
import { openDatabase, type ToolhostDatabase } from "../storage/database.js";
import {
  ChatRepository,
  SqlAuditLog,
  SqlFreshnessLedger,
  SqlToolSettingsStore,
  TokenRepository,
} from "../storage/repositories.js";
import { type AdminRule, adminRule, parseAdminUsers } from "./admin.js";
import { AgentService } from "./agent-service.js";
import { ApprovalService } from "./approvals/service.js";
import { CHAT_PROVIDERS } from "./chat-service.js";
import { SqlImageStore } from "./sql-image-store.js";
import { ToolSettingsService } from "./tool-settings-service.js";
import { parseChatRoots, WorkingDirectoryBinder } from "./working-directory.js";

/** Everything a front end needs, wired to one database. */
export interface AppContext {
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
  /** Sub-agent trees: templates, running agents, their records. */
  agents: AgentService;
  logger: Logger;
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
   * groups) and waits for their audit lines; stops sub-agents; waits for tracked work; runs the close hooks; closes
   * the database. Every wait is bounded (about 10 s in all when something hangs). Idempotent: a second call returns
   * the first one's promise.
   */
  close(): Promise<void>;
}

/**
 * Options of createAppContext; defaults come from the environment (TOOLHOST_DATA_DIR, else the XDG data
 * directory; TOOLHOST_DATABASE_URL; TOOLHOST_ADMIN_USERS; TOOLHOST_CHAT_ROOTS).
 */
export interface AppContextOptions {
  dataDir?: string;
  databaseUrl?: string;
  logger?: Logger;
  registry?: ToolRegistryStore;
  /** Where agent templates come from; default the config file's `agents` map and TOOLHOST_AGENT_TEMPLATES_DIR. */
  agentTemplates?: AgentTemplateCatalog;
  /** Options of the agent service (heartbeat, staleness, grace turn), mainly for tests. */
  agentOptions?: { heartbeatMs?: number; staleAfterMs?: number; graceTurnMs?: number; instanceId?: string };
  /** Environment for the template sources (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Admin user ids; default TOOLHOST_ADMIN_USERS (comma-separated), else "local". */
  adminUsers?: Iterable<string>;
  /** Chat roots (`{user}` templates allowed); default TOOLHOST_CHAT_ROOTS; null: none. */
  chatRoots?: string[] | null;
}

/**
 * The template catalog of this installation: `general`, the config file's `agents` map (TOOLHOST_CONFIG or
 * ~/.config/toolhost/config.json), then the Markdown files in TOOLHOST_AGENT_TEMPLATES_DIR (default the `agents`
 * directory beside the config file).
 */
export function agentTemplateCatalogFromEnv(
  registry: ToolRegistryStore,
  env: NodeJS.ProcessEnv = process.env,
): AgentTemplateCatalog {
  return new AgentTemplateCatalog(() => {
    const file = providerConfigPath(env);
    let agents: unknown;
    let text: string | undefined;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      text = undefined;
    }
    if (text !== undefined) {
      try {
        agents = (JSON.parse(text) as { agents?: unknown } | null)?.agents;
      } catch (error) {
        throw new Error(`The config file ${file} is not valid JSON: ${(error as Error).message}`);
      }
    }
    const directory = env.TOOLHOST_AGENT_TEMPLATES_DIR
      ? resolve(env.TOOLHOST_AGENT_TEMPLATES_DIR)
      : join(dirname(file), "agents");
    return loadAgentTemplates(
      { config: { file, agents }, directory },
      { providers: CHAT_PROVIDERS, tools: new Set(registry.list().map((t) => t.definition.name)) },
    );
  });
}

/**
 * Opens the database (migrating it), wires the runtime and services, and marks `interrupted` the agents a stopped
 * process left running. Process-wide effects: the context's runtime becomes the default one (executeTool, trigger and
 * getEnabledToolRuntime use it) and its agent templates the catalog agent_spawn lists. Throws when the database
 * cannot open, MigrationError when a migration fails and SchemaDamageError when the schema was changed by hand.
 * Close it with `close()`.
 */
export async function createAppContext(options: AppContextOptions = {}): Promise<AppContext> {
  const { path: dataDir, source: dataDirSource } = chooseDataDir(options.dataDir);
  const logger = options.logger ?? createLogger();
  const database = await openDatabase({ dataDir, url: options.databaseUrl });
  const store = new SqlToolSettingsStore(database.db);
  const audit = new SqlAuditLog(database.db);
  const registry = options.registry ?? defaultRegistry;
  const runtime = new ToolRuntime({
    registry,
    store,
    ledger: new SqlFreshnessLedger(database.db),
    audit,
    logger,
    dataDir,
    // The database file is Toolhost's data even when TOOLHOST_DATABASE_URL puts it outside the data directory.
    protectedPaths: [dataDir, ...database.files, ...installationPaths()],
    services: { imageStore: new SqlImageStore(database.db, dataDir), providerCredentials: tableCredentialSource },
  });
  configureDefaultRuntime(runtime);
  const closeHooks: (() => Promise<void> | void)[] = [];
  const settings = new ToolSettingsService(registry, store, logger, runtime.services, audit);
  const approvals = new ApprovalService({
    repository: new ApprovalRepository(database.db),
    settings,
    dataDir,
    logger,
  });
  const templates = options.agentTemplates ?? agentTemplateCatalogFromEnv(registry, options.env);
  const templateError = templates.error;
  if (templateError) logger.error({ err: templateError.message }, "agent templates failed to load");
  setAgentTemplateCatalog(() => templates.list().map(summarizeTemplate));
  const agents = new AgentService({
    repository: new AgentRepository(database.db),
    runtime,
    templates,
    logger,
    ...options.agentOptions,
  });
  await agents.start();
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const tracked = new Set<Promise<unknown>>();
  let closing: Promise<void> | undefined;
  const closeInOrder = async () => {
    shutdown.abort();
    const stopped = runtime.shutdown();
    await agents.shutdown();
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
    await database.close();
  };
  return {
    dataDir,
    dataDirSource,
    database,
    runtime,
    settings,
    approvals,
    tokens: new TokenRepository(database.db),
    chats: new ChatRepository(database.db),
    audit,
    agents,
    logger,
    admins: adminRule(options.adminUsers ?? parseAdminUsers(process.env.TOOLHOST_ADMIN_USERS)),
    binder: new WorkingDirectoryBinder(
      options.chatRoots === undefined ? parseChatRoots(process.env.TOOLHOST_CHAT_ROOTS) : options.chatRoots,
    ),
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
