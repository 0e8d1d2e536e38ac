/**
 * The application context shared by the HTTP server and the CLI: the core context (./core-context.ts: the database,
 * the tool runtime backed by it, the settings and approval services) with every built-in tool registered, the
 * provider table as the source of provider keys, and the sub-agent service. Both front ends open the same data
 * directory, so a setting made in one is seen by the other.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { AgentService } from "../agents/service.js";
import { AgentTemplateCatalog, loadAgentTemplates, summarizeTemplate } from "../agents/templates.js";
import { setAgentTemplateCatalog } from "../core/agents.js";
import { readConfig } from "../core/config.js";
import { newInstanceId } from "../core/instance.js";
import { defaultRegistry, type ToolRegistryStore } from "../core/registry.js";
import { providerConfigPath } from "../providers/index.js";
import { tableCredentialSource } from "../providers/table.js";
import { AgentRepository } from "../storage/agent-repository.js";
import { TurnLeaseRepository } from "../storage/turn-leases.js";
import { registerBuiltinTools } from "../tools/index.js";
import { CHAT_PROVIDERS } from "./chat-types.js";
import { type CoreContext, type CoreContextOptions, openCoreContext } from "./core-context.js";
import { SignalBus } from "./signals.js";
import { DEFAULT_TURN_LEASE_MS, TurnCoordinator } from "./turn-coordinator.js";

/** Everything a front end needs, wired to one database: the core context plus the sub-agent service. */
export interface AppContext extends CoreContext {
  /** Sub-agent trees: templates, running agents, their records. */
  agents: AgentService;
  /** Signals between the instances sharing the database (NOTIFY on PostgreSQL, in-process plus a poll on SQLite). */
  signals: SignalBus;
  /** Ownership of chat turns across instances: leases, cancel, stored events, takeover, handover. */
  turns: TurnCoordinator;
}

/**
 * Options of createAppContext; defaults come from the environment (TOOLHOST_DATA_DIR, else the XDG data
 * directory; TOOLHOST_DATABASE_URL; TOOLHOST_ADMIN_USERS; TOOLHOST_CHAT_ROOTS).
 */
export interface AppContextOptions extends Omit<CoreContextOptions, "services"> {
  /** Where agent templates come from; default the config file's `agents` map and TOOLHOST_AGENT_TEMPLATES_DIR. */
  agentTemplates?: AgentTemplateCatalog;
  /** Options of the agent service (heartbeat, staleness, grace turn), mainly for tests. */
  agentOptions?: { heartbeatMs?: number; staleAfterMs?: number; graceTurnMs?: number; instanceId?: string };
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
    const directory = readConfig(env).agentTemplatesDir ?? join(dirname(file), "agents");
    return loadAgentTemplates(
      { config: { file, agents }, directory },
      { providers: CHAT_PROVIDERS, tools: new Set(registry.list().map((t) => t.definition.name)) },
    );
  });
}

/**
 * Opens the database (migrating it), wires the runtime and services, and marks `interrupted` the agents a stopped
 * process left running. Process-wide effects: the built-in tools are registered in the process-wide registry (once;
 * see registerBuiltinTools), the context's runtime becomes the default one (executeTool, trigger and
 * getEnabledToolRuntime use it) and its agent templates the catalog agent_spawn lists. Throws when the database
 * cannot open, MigrationError when a migration fails and SchemaDamageError when the schema was changed by hand.
 * Close it with `close()`.
 */
export async function createAppContext(options: AppContextOptions = {}): Promise<AppContext> {
  registerBuiltinTools();
  const {
    context: core,
    addStopStep,
    addFirstStep,
  } = await openCoreContext({
    ...options,
    services: { providerCredentials: tableCredentialSource },
  });
  try {
    const registry = options.registry ?? defaultRegistry;
    const templates = options.agentTemplates ?? agentTemplateCatalogFromEnv(registry, options.env);
    const templateError = templates.error;
    if (templateError) core.logger.error({ err: templateError.message }, "agent templates failed to load");
    core.onClose(setAgentTemplateCatalog(() => templates.list().map(summarizeTemplate)));
    const instanceId = options.agentOptions?.instanceId ?? newInstanceId();
    const leases = new TurnLeaseRepository(core.database.db);
    const signals = new SignalBus({ repository: leases, database: core.database, logger: core.logger });
    const turns = new TurnCoordinator({
      repository: leases,
      signals,
      logger: core.logger,
      instanceId,
      leaseMs: core.config.turnLeaseMs ?? DEFAULT_TURN_LEASE_MS,
    });
    const agents = new AgentService({
      repository: new AgentRepository(core.database.db),
      runtime: core.runtime,
      templates,
      logger: core.logger,
      signals,
      ...options.agentOptions,
      instanceId,
    });
    addFirstStep(() => turns.handOver());
    addStopStep(() => agents.shutdown());
    core.onClose(() => signals.stop());
    await signals.start();
    await agents.start();
    turns.start();
    // Approval answers given on another instance reach the waiting turn here within a second.
    core.approvals.setSignals(signals);
    // Tool-list changes (settings, imported tools) reach the MCP sessions of every instance. Only changes made
    // here are relayed (a relayed one is "remote"), so two instances never echo a change back and forth, even when
    // several contexts of one process share the registry. Coalesced over 50 ms: a burst of settings writes costs
    // one signal per user.
    const changed = new Set<string>();
    let relayTimer: NodeJS.Timeout | undefined;
    const unrelay = registry.changes.subscribe((userId, origin) => {
      if (origin === "remote") return;
      changed.add(userId ?? "*");
      relayTimer ??= setTimeout(() => {
        relayTimer = undefined;
        const users = changed.has("*") ? ["*"] : [...changed];
        changed.clear();
        for (const user of users) void signals.publish("tools_changed", user);
      }, 50);
    });
    signals.subscribe((signal) => {
      if (signal.kind !== "tools_changed" || signal.local) return;
      registry.changes.emit(signal.target === "*" ? null : signal.target, "remote");
    });
    core.onClose(() => {
      unrelay();
      clearTimeout(relayTimer);
    });
    // The SQL tools' descriptions name the declared data sources: list them once now (each call lists them again).
    await core.dataSources
      .load()
      .catch((error: unknown) => core.logger.warn({ err: String(error) }, "data sources failed to load"));
    return Object.assign(core, { agents, signals, turns });
  } catch (error) {
    await core.close().catch(() => {});
    throw error;
  }
}
