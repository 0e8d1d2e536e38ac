/**
 * The tool runtime: settings resolution and execution (000_6d817c25d4590fa9.txt, "Tool Lifecycle" steps 2, 5, 6).
 *
 * A ToolRuntime binds a registry to its storage (settings store, freshness ledger, audit sink), so that the
 * server, the CLI and library users run tools through one code path. The free functions `executeTool` and
 * `getEnabledToolRuntime` use a process-wide default runtime (in-memory storage unless configured).
 */
import { join, resolve } from "node:path";
import { parseToolArguments } from "./arg-parsing.js";
import { resolveDataDir } from "./data-dir.js";
import {
  AccessDeniedError,
  NotFoundError,
  type SerializedToolError,
  ToolAbortedError,
  ToolError,
  ToolExecutionError,
  ToolTimeoutError,
  toToolError,
} from "./errors.js";
import { withToolMetrics } from "./metrics.js";
import { packageRoot } from "./package-root.js";
import { defaultRegistry, type ToolRegistryStore } from "./registry.js";
import { integerSetting } from "./settings-declaration.js";
import { DEFAULT_TOOL_TIMEOUT_MS, getSafeEffectiveToolSettings, getToolDefinition } from "./settings-policy.js";
import {
  createLogger,
  MemoryAuditSink,
  MemoryFreshnessLedger,
  MemoryToolSettingsStore,
  type ToolSettingsStore,
} from "./stores.js";
import type {
  AuditSink,
  EffectiveToolSettings,
  FreshnessLedger,
  Logger,
  RegisteredTool,
  ToolContext,
  ToolDefinition,
  ToolProgressEvent,
} from "./types.js";

/** What the caller of executeTool provides about the call. */
export interface ToolCallContext {
  userId: string;
  /** The chat the call belongs to (freshness ledger scope); null or absent for one-off calls. */
  chatId?: string | null;
  /** The chat's bound working directory (absolute, or resolved against process.cwd()); null when none. */
  workingDirectory?: string | null;
  /** Caller's cancel signal (user cancel, stream teardown). */
  signal?: AbortSignal;
  /** Receives progress events the tool emits. */
  onProgress?: (event: ToolProgressEvent) => void;
  /** Host services for tools that need them (e.g. a model runner for sub-agents). */
  services?: Record<string, unknown>;
  /**
   * When true, a tool that is off only by default (the user never saved a choice) may run: used by the
   * function-id API (`trigger`), where the host application itself, not a model, chooses the tool.
   * A tool the user explicitly disabled stays refused.
   */
  allowDefaultDisabled?: boolean;
}

/** The outcome of one tool call: a result or a classified error, with its duration in milliseconds. */
export type ToolCallOutcome =
  | { ok: true; result: unknown; durationMs: number }
  | { ok: false; error: SerializedToolError; durationMs: number };

/** The enabled tools of a user with their effective settings and model-facing definitions. */
export interface EnabledToolRuntime {
  tools: RegisteredTool[];
  settings: Map<string, EffectiveToolSettings>;
  definitions: ToolDefinition[];
}

/** Dependencies of a ToolRuntime; every one has an in-memory default. */
export interface ToolRuntimeOptions {
  registry?: ToolRegistryStore;
  store?: ToolSettingsStore;
  ledger?: FreshnessLedger;
  audit?: AuditSink;
  logger?: Logger;
  /** Directory for artefacts (generated images); default resolveDataDir() (`$TOOLHOST_DATA_DIR`, else the XDG data directory). */
  dataDir?: string;
  /** Host services every call receives in `context.services` (a call's own services override them). */
  services?: Record<string, unknown>;
  /** Paths no tool may touch (context.protectedPaths); default: the data directory and Toolhost's installed code. */
  protectedPaths?: string[];
}

/** Toolhost's own installed code (dist/, node_modules/, package.json of this package), which tools never touch. */
export function installationPaths(): string[] {
  const root = packageRoot();
  return [join(root, "dist"), join(root, "node_modules"), join(root, "package.json")];
}

/** Extra time (ms) given past the budget of a tool that manages its own timeout before the backstop fires. */
const OWN_TIMEOUT_GRACE_MS = 5_000;

/** Registry + storage: resolves settings and executes tools. */
export class ToolRuntime {
  readonly registry: ToolRegistryStore;
  readonly store: ToolSettingsStore;
  readonly ledger: FreshnessLedger;
  readonly audit: AuditSink;
  readonly logger: Logger;
  readonly dataDir: string;
  readonly services: Record<string, unknown>;
  readonly protectedPaths: readonly string[];
  /**
   * Whether a user's calls with no bound working directory may fall back to the process working directory
   * (context.processCwdFallback). Everyone by default; the HTTP service limits it to admins.
   */
  processCwdFallback: (userId: string) => boolean = () => true;

  constructor(options: ToolRuntimeOptions = {}) {
    this.registry = options.registry ?? defaultRegistry;
    this.store = options.store ?? new MemoryToolSettingsStore();
    this.ledger = options.ledger ?? new MemoryFreshnessLedger();
    this.audit = options.audit ?? new MemoryAuditSink();
    this.logger = options.logger ?? createLogger();
    this.dataDir = resolveDataDir(options.dataDir);
    this.services = options.services ?? {};
    this.protectedPaths = options.protectedPaths ?? [this.dataDir, ...installationPaths()];
  }

  /** Effective settings of one tool for a user; corrupt saved settings fall back to defaults (logged). */
  async getEffectiveSettings(userId: string, tool: RegisteredTool): Promise<EffectiveToolSettings> {
    const saved = await this.store.get(userId, tool.definition.name);
    return getSafeEffectiveToolSettings(tool, saved, this.logger);
  }

  /**
   * Loads the user's saved settings, merges defaults < saved, and yields the enabled tools with their
   * definitions (built through buildDefinition where a tool has one). 000: getEnabledToolRuntime. Enabled tools
   * that cannot work on this host (RegisteredTool.unavailableReason) are left out.
   */
  async getEnabledToolRuntime(userId: string): Promise<EnabledToolRuntime> {
    const saved = await this.store.getAll(userId);
    const tools: RegisteredTool[] = [];
    const settings = new Map<string, EffectiveToolSettings>();
    const definitions: ToolDefinition[] = [];
    for (const tool of this.registry.list()) {
      const effective = getSafeEffectiveToolSettings(tool, saved.get(tool.definition.name), this.logger);
      if (!effective.enabled) continue;
      // A tool that cannot work here (e.g. no provider key) is not offered: the model would only meet errors.
      const unavailable = tool.unavailableReason?.(this.services);
      if (unavailable) {
        this.logger.debug({ tool: tool.definition.name, reason: unavailable }, "enabled tool not offered");
        continue;
      }
      tools.push(tool);
      settings.set(tool.definition.name, effective);
      definitions.push(getToolDefinition(tool, effective));
    }
    return { tools, settings, definitions };
  }

  /**
   * Executes a tool for a user (000: executeTool). Never throws for tool failures: the outcome carries either the
   * serializable result or a classified error (`not_found` for an unknown tool, `access_denied` for a disabled
   * one, `validation_failed` for bad arguments, `timeout`, `aborted`, `execution_failed`, or the tool's own).
   * `args` is the raw model output: a JSON string or a decoded object.
   */
  async executeTool(name: string, args: unknown, call: ToolCallContext): Promise<ToolCallOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const tool = this.registry.get(name);
    if (!tool) {
      const error = new NotFoundError(`Unknown tool "${name}". Call one of the tools you were given.`, { tool: name });
      return { ok: false, error: error.toJSON(), durationMs: elapsed() };
    }
    return withToolMetrics(
      name,
      async (): Promise<ToolCallOutcome> => {
        try {
          const result = await this.#run(tool, args, call);
          return { ok: true, result, durationMs: elapsed() };
        } catch (thrown) {
          const error = toToolError(thrown);
          if (!(thrown instanceof ToolError)) {
            this.logger.warn(
              { tool: name, err: (thrown as Error)?.stack ?? String(thrown) },
              "tool threw an unclassified error",
            );
          }
          return { ok: false, error: error.toJSON(), durationMs: elapsed() };
        }
      },
      (outcome) => !outcome.ok,
    );
  }

  async #run(tool: RegisteredTool, rawArgs: unknown, call: ToolCallContext): Promise<unknown> {
    const name = tool.definition.name;
    const saved = await this.store.get(call.userId, name);
    const settings = getSafeEffectiveToolSettings(tool, saved, this.logger);
    const explicitlySaved = typeof saved?.enabled === "boolean";
    if (!settings.enabled && !(call.allowDefaultDisabled && !explicitlySaved)) {
      throw new AccessDeniedError(
        `Tool "${name}" is disabled for this user. Enable it in the tool settings (PUT /api/settings/tools/${name} or \`toolhost settings set ${name} --enable\`).`,
        { tool: name, rule: "disabled" },
      );
    }
    const definition = getToolDefinition(tool, settings);
    const args = parseToolArguments(definition.parameters, rawArgs);

    const budgetMs = this.#budgetMs(tool, args, settings);
    const controller = new AbortController();
    const parent = call.signal;
    if (parent?.aborted) throw new ToolAbortedError();
    const onParentAbort = () => controller.abort(new ToolAbortedError());
    parent?.addEventListener("abort", onParentAbort, { once: true });
    const backstopMs = tool.managesOwnTimeout ? budgetMs + OWN_TIMEOUT_GRACE_MS : budgetMs;
    const timer = setTimeout(() => {
      controller.abort(
        new ToolTimeoutError(
          `Tool "${name}" did not finish within its ${Math.round(budgetMs / 1000)}s budget and was cancelled. Narrow the request, or raise timeoutSeconds in the tool settings.`,
          { tool: name, budgetMs },
        ),
      );
    }, backstopMs);
    timer.unref?.();

    const context: ToolContext = {
      userId: call.userId,
      chatId: call.chatId ?? null,
      workingDirectory: call.workingDirectory ? resolve(call.workingDirectory) : null,
      signal: controller.signal,
      settings,
      dataDir: this.dataDir,
      ledger: this.ledger,
      audit: this.audit,
      logger: this.logger,
      emitProgress: (event) => {
        try {
          call.onProgress?.(event);
        } catch (error) {
          this.logger.warn({ tool: name, err: String(error) }, "progress listener threw");
        }
      },
      services: { ...this.services, ...call.services },
      protectedPaths: this.protectedPaths,
      processCwdFallback: this.processCwdFallback(call.userId),
    };

    try {
      const aborted = new Promise<never>((_, reject) => {
        const fail = () => reject(controller.signal.reason);
        if (controller.signal.aborted) fail();
        else controller.signal.addEventListener("abort", fail, { once: true });
      });
      aborted.catch(() => {});
      const result = await Promise.race([tool.execute(args, context), aborted]);
      return toSerializable(name, result);
    } catch (error) {
      // A tool that throws after the signal fired (e.g. its fetch rejected with AbortError) is reported by the
      // signal's reason, so timeout and cancel stay distinguishable.
      if (controller.signal.aborted && !(error instanceof ToolError && error.code !== "execution_failed")) {
        throw controller.signal.reason;
      }
      throw error;
    } finally {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onParentAbort);
    }
  }

  #budgetMs(tool: RegisteredTool, args: Record<string, unknown>, settings: EffectiveToolSettings): number {
    if (tool.timeoutMs) return tool.timeoutMs(args, settings);
    const d = tool.settings.parameterDescriptors.find((p) => p.name === "timeoutSeconds");
    if (d && typeof d.default === "number") return integerSetting(settings.parameters, d) * 1000;
    const seconds = settings.parameters.timeoutSeconds;
    return typeof seconds === "number" && seconds > 0 ? seconds * 1000 : DEFAULT_TOOL_TIMEOUT_MS;
  }
}

function toSerializable(tool: string, value: unknown): unknown {
  if (value === undefined) return null;
  try {
    return JSON.parse(JSON.stringify(value));
  } catch (error) {
    throw new ToolExecutionError(
      `Tool "${tool}" returned a value that is not JSON-serializable: ${(error as Error).message}`,
    );
  }
}

let defaultRuntime: ToolRuntime | undefined;

/** The process-wide runtime behind the free functions (in-memory storage unless configured). */
export function getDefaultRuntime(): ToolRuntime {
  defaultRuntime ??= new ToolRuntime();
  return defaultRuntime;
}

/** Replaces the process-wide runtime (e.g. with one backed by the database). */
export function configureDefaultRuntime(runtime: ToolRuntime): void {
  defaultRuntime = runtime;
}

/** executeTool on the default runtime. See ToolRuntime.executeTool. */
export function executeTool(name: string, args: unknown, call: ToolCallContext): Promise<ToolCallOutcome> {
  return getDefaultRuntime().executeTool(name, args, call);
}

/** getEnabledToolRuntime on the default runtime. See ToolRuntime.getEnabledToolRuntime. */
export function getEnabledToolRuntime(userId: string): Promise<EnabledToolRuntime> {
  return getDefaultRuntime().getEnabledToolRuntime(userId);
}
