/**
 * The tool runtime: resolves a user's settings, offers the enabled tools, and executes calls.
 *
 * A ToolRuntime binds a registry to its storage (settings store, freshness ledger, audit sink), so that the
 * server, the CLI and library users run tools through one code path. Every call goes through one pipeline of named
 * stages, each its own module under ./execution/: check (tool enabled, arguments parsed) → approve (the caller's
 * approval stage, when it gives one) → run (time budget, cancellation, full-output capture) → cap (the output cap)
 * → audit. Tracing and metrics observe the stages (./execution/observe.ts). The free functions `executeTool` and
 * `getEnabledToolRuntime` use a process-wide default runtime (in-memory storage unless configured).
 */
import type { ArgumentDecoding } from "./arg-parsing.js";
import { providerConfigPath } from "./credentials.js";
import { resolveDataDir } from "./data-dir.js";
import { NotFoundError, ToolAbortedError, ToolError, type ToolRefusal, toToolError } from "./errors.js";
import { type CallRecord, recordCall } from "./execution/audit.js";
import { CallToolContext, type LazyAbort } from "./execution/call-context.js";
import { capLimitsOf, capStage } from "./execution/cap.js";
import { type CheckedCall, checkCall, EffectiveSettingsCache, type RefusedCall } from "./execution/check.js";
import { observeCall } from "./execution/observe.js";
import { type RunEnvironment, type RunTracking, runStage, withResultJson } from "./execution/run.js";
import type { EnabledToolRuntime, InspectedCall, ToolCallContext, ToolCallOutcome } from "./execution/types.js";
import { SpillArea } from "./output-spill.js";
import { installationPaths } from "./package-root.js";
import { defaultRegistry, type ToolRegistryStore } from "./registry.js";
import type { SpillReaders } from "./result-cap.js";
import { getSafeEffectiveToolSettings, getToolDefinition } from "./settings-policy.js";
import {
  createLogger,
  MemoryAuditSink,
  MemoryFreshnessLedger,
  MemoryToolSettingsStore,
  type ToolSettingsStore,
} from "./stores.js";
import type {
  AuditEntry,
  AuditSink,
  EffectiveToolSettings,
  FreshnessLedger,
  Logger,
  RegisteredTool,
  SpillReader,
  ToolContext,
  ToolDefinition,
} from "./types.js";

export type {
  ApprovalVerdict,
  ApproveStage,
  CallApproval,
  EnabledToolRuntime,
  InspectedCall,
  ToolCallContext,
  ToolCallOutcome,
} from "./execution/types.js";

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
  /**
   * Paths no tool may touch (context.protectedPaths); default: the data directory, the config file (provider keys)
   * and Toolhost's installed code.
   */
  protectedPaths?: string[];
  /**
   * Where the full output of cut results goes (default: `<dataDir>/spill`, 7-day expiry, 256 MiB per user; cleaned
   * now and hourly). Results are capped either way; without an area (`false`) nothing is saved.
   */
  spill?: SpillArea | false;
  /**
   * Registers the tools that read spills (RegisteredTool.spillReader) in the registry, asked each time a result is
   * cut, before its reading hint is chosen: a process that loaded only the tool it runs (a one-tool `toolhost call`)
   * loads the readers then, instead of at start. Default: none (the registry holds what it holds).
   */
  loadSpillReaders?: (registry: ToolRegistryStore) => Promise<void>;
}

export { installationPaths };

/** Default time (ms) {@link ToolRuntime.shutdown} waits for cancelled calls to stop and record their audit line. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** How long (ms) a cancelled call's audit line waits for the tool to stop before it is recorded anyway. */
const STOPPING_AUDIT_WAIT_MS = 60_000;

/** The reason every running call gets when the runtime shuts down. */
const shuttingDown = () =>
  new ToolAbortedError("Toolhost is shutting down, so the call was cancelled. Send it again once it runs.", {
    rule: "shutdown",
  });

const unknownTool = (name: string) =>
  new NotFoundError(`Unknown tool "${name}". Call one of the tools you were given.`, { tool: name });

/** What one call carries between its stages: the tool's own audit entries, what parsing decoded, its promise. */
interface CallState extends ArgumentDecoding, RunTracking {
  toolEntries: AuditEntry[];
}

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
  /** The spill area of cut results (null: none, cut output is lost). */
  readonly spill: SpillArea | null;
  /**
   * Whether a user's calls with no bound working directory may fall back to the process working directory
   * (context.processCwdFallback). Everyone by default; the HTTP service limits it to admins.
   */
  processCwdFallback: (userId: string) => boolean = () => true;
  /** executeTool calls in flight (until their outcome is settled): what shutdown waits for, with #writes. */
  readonly #calls = new InFlight();
  /**
   * Audit writes not yet done (and lines waiting for a cancelled call to stop): what shutdown and flushAudit wait
   * for. A count, not a set of promises: adding and deleting a set entry per call cost more than the rest of the
   * audit stage of a call.
   */
  readonly #writes = new InFlight();
  /** The write tracked last: the lines of one audit batch share their promise, so consecutive lines count it once. */
  #lastWrite: Promise<unknown> | undefined;
  readonly #writeSettled = (): void => this.#writes.done();
  /** Aborted by {@link shutdown}: every running call is cancelled, and a new one ends as `aborted` at once. */
  readonly #closing = new AbortController();
  /** Resolved when shutdown's grace is over: audit lines stop waiting for calls that ignore cancellation. */
  #graceOver: () => void = noop;
  readonly #graceOverPromise = new Promise<void>((resolve) => {
    this.#graceOver = resolve;
  });
  readonly #settings: EffectiveSettingsCache;
  /** The cancellation of every call running now: shutdown aborts them (cheaper than a listener per call). */
  readonly #running = new Set<LazyAbort>();
  /** What the run stage sees of the runtime. */
  readonly #runEnvironment: RunEnvironment;
  readonly #loadSpillReaders: ((registry: ToolRegistryStore) => Promise<void>) | undefined;

  constructor(options: ToolRuntimeOptions = {}) {
    this.registry = options.registry ?? defaultRegistry;
    this.store = options.store ?? new MemoryToolSettingsStore();
    this.ledger = options.ledger ?? new MemoryFreshnessLedger();
    this.audit = options.audit ?? new MemoryAuditSink();
    this.logger = options.logger ?? createLogger();
    this.dataDir = resolveDataDir(options.dataDir);
    this.services = options.services ?? {};
    this.protectedPaths = options.protectedPaths ?? [this.dataDir, providerConfigPath(), ...installationPaths()];
    this.spill = options.spill === false ? null : (options.spill ?? new SpillArea(this.dataDir));
    this.spill?.start();
    this.#settings = new EffectiveSettingsCache(this.logger);
    this.#runEnvironment = { closing: this.#closing.signal, running: this.#running, spill: this.spill };
    this.#loadSpillReaders = options.loadSpillReaders;
  }

  /** Effective settings of one tool for a user; corrupt saved settings fall back to defaults (logged). */
  async getEffectiveSettings(userId: string, tool: RegisteredTool): Promise<EffectiveToolSettings> {
    const saved = await this.store.get(userId, tool.definition.name);
    return getSafeEffectiveToolSettings(tool, saved, this.logger);
  }

  /**
   * Loads the user's saved settings, merges defaults < saved, and yields the enabled tools with their
   * definitions (built through buildDefinition where a tool has one). Enabled tools that cannot work on this host
   * (RegisteredTool.unavailableReason) are left out.
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
   * Executes a tool for a user (executeTool). Never throws for tool failures: the outcome carries either the
   * serializable result or a classified error (`not_found` for an unknown tool, `access_denied` for a disabled
   * one, `validation_failed` for bad arguments, `timeout`, `aborted`, `execution_failed`, or the tool's own, or the
   * refusal of the call's approval stage). `args` is the raw model output: a JSON string or a decoded object. The
   * outcome does not wait for the call's audit line to be written; {@link shutdown} and {@link flushAudit} do.
   */
  async executeTool(name: string, args: unknown, call: ToolCallContext): Promise<ToolCallOutcome> {
    // Counted from here until the outcome is settled: what shutdown waits for.
    this.#calls.add();
    try {
      const started = performance.now();
      const tool = this.registry.get(name);
      if (!tool) {
        const outcome = failure(unknownTool(name), started);
        this.#audit({ name, args, call, outcome });
        return outcome;
      }
      const state: CallState = { toolEntries: [] };
      const clock = { started, executed: true };
      let approved = call;
      const outcome = await observeCall(name, { callId: call.toolCallId, args }, clock, async () => {
        try {
          // check
          const checked = await this.#check(tool, args, call, state);
          if (checked.refusal) return failure(checked.refusal, clock.started);
          // approve (the wait for an answer is not execution time)
          if (call.approve) {
            const asked = performance.now();
            const verdict = await call.approve(this.#inspected(tool, checked, call));
            if (!verdict.run) {
              clock.executed = false;
              return verdict.outcome;
            }
            clock.started += performance.now() - asked;
            approved = { ...call, approval: verdict.approval };
          }
          // run, cap
          const ran = await runStage(this.#runEnvironment, this.#runRequest(tool, checked, approved, state), state);
          const result = await capStage(ran, {
            tool,
            limits: capLimitsOf(checked.settings),
            area: this.spill,
            userId: call.userId,
            chatId: call.chatId ?? null,
            readers: () => this.#spillReaders(call.userId),
          });
          const done = { ok: true as const, result, durationMs: Math.round(performance.now() - clock.started) };
          // An uncut result keeps the JSON text the run stage made (resultJsonText): a surface need not make it again.
          return result === ran.value ? withResultJson(done, ran.json) : done;
        } catch (thrown) {
          return this.#failed(name, thrown, clock.started);
        }
      });
      // audit (an approval stage's refusal was recorded by the approver)
      if (clock.executed) {
        this.#audit({ name, args, call: approved, outcome, toolEntries: state.toolEntries, decoding: state }, state);
      }
      return outcome;
    } finally {
      this.#calls.done();
    }
  }

  /** Whether {@link shutdown} has begun (new calls end as `aborted`). */
  get closing(): boolean {
    return this.#closing.signal.aborted;
  }

  /** The check stage: the user's saved row, the effective settings, the checks of ./execution/check.ts. */
  async #check(
    tool: RegisteredTool,
    rawArgs: unknown,
    call: ToolCallContext,
    decoding?: ArgumentDecoding,
  ): Promise<CheckedCall | RefusedCall> {
    const saved = await this.store.get(call.userId, tool.definition.name);
    const settings = this.#settings.resolve(tool, saved);
    return checkCall(tool, settings, typeof saved?.enabled === "boolean", rawArgs, call.allowDefaultDisabled, decoding);
  }

  #inspected(tool: RegisteredTool, checked: CheckedCall, call: ToolCallContext): InspectedCall {
    const signal = call.signal ?? new AbortController().signal;
    return {
      tool,
      settings: checked.settings,
      args: checked.args,
      context: this.#context(call, checked.settings, signal, []),
    };
  }

  #runRequest(tool: RegisteredTool, checked: CheckedCall, call: ToolCallContext, state: CallState) {
    return {
      tool,
      settings: checked.settings,
      args: checked.args,
      userId: call.userId,
      chatId: call.chatId ?? null,
      signal: call.signal,
      maxBytes: capLimitsOf(checked.settings).maxBytes,
      context: (signal: () => AbortSignal) => this.#context(call, checked.settings, signal, state.toolEntries),
    };
  }

  /** The context a tool runs with; `signal` may be a function that makes the signal when the tool first reads it. */
  #context(
    call: ToolCallContext,
    settings: EffectiveToolSettings,
    signal: AbortSignal | (() => AbortSignal),
    toolEntries: AuditEntry[],
  ): ToolContext {
    const context = new CallToolContext({
      userId: call.userId,
      chatId: call.chatId ?? null,
      workingDirectory: call.workingDirectory,
      settings,
      signal,
      dataDir: this.dataDir,
      ledger: this.ledger,
      // The tool's own entries are folded into the call's audit event once the call ends.
      audit: {
        record: async (entry) => {
          toolEntries.push(entry);
        },
      },
      logger: this.logger,
      emitProgress: (event) => {
        try {
          call.onProgress?.(event);
        } catch (error) {
          this.logger.warn({ err: String(error) }, "progress listener threw");
        }
      },
      // The runtime's services object itself when the call adds none (one object fewer per call).
      services: call.services ? { ...this.services, ...call.services } : this.services,
      protectedPaths: this.protectedPaths,
      processCwdFallback: call.processCwdFallback === false ? false : this.processCwdFallback(call.userId),
    });
    if (call.approval) context.approval = { decision: call.approval.decision, decidedBy: call.approval.decidedBy };
    if (call.toolCallId !== undefined) context.toolCallId = call.toolCallId;
    return context;
  }

  /** The outcome of a call that threw `thrown` (an unclassified error is logged, and becomes execution_failed). */
  #failed(name: string, thrown: unknown, started: number): ToolCallOutcome {
    if (!(thrown instanceof ToolError)) {
      this.logger.warn(
        { tool: name, err: (thrown as Error)?.stack ?? String(thrown) },
        "tool threw an unclassified error",
      );
    }
    return failure(toToolError(thrown), started);
  }

  /**
   * The audit stage: starts the call's audit line and tracks it (shutdown and flushAudit wait for it). A tool
   * cancelled or timed out may still be stopping (a shell kills its process group) and record its own entry
   * afterwards: the line then waits for it, at most a minute or until shutdown's grace is over.
   */
  #audit(record: CallRecord, tracking?: RunTracking): void {
    const { outcome } = record;
    const stopping = tracking?.promise;
    if (
      !outcome.ok &&
      stopping &&
      !tracking.done &&
      (outcome.error.code === "aborted" || outcome.error.code === "timeout")
    ) {
      const cap = new Promise<void>((resolve) => setTimeout(resolve, STOPPING_AUDIT_WAIT_MS).unref?.());
      this.#track(
        Promise.race([stopping.then(noop, noop), cap, this.#graceOverPromise]).then(() =>
          recordCall(this.audit, this.logger, record),
        ),
      );
      return;
    }
    this.#track(recordCall(this.audit, this.logger, record));
  }

  /**
   * Records one call in the audit outside executeTool (an approval gate's refusal): who, tool, redacted arguments,
   * working directory, outcome and error code, duration, approval decision, the tool's own entries folded in.
   * Never throws: a failing audit is logged. Resolves once the line is written.
   */
  async auditCall(
    name: string,
    args: unknown,
    call: ToolCallContext,
    outcome: ToolCallOutcome,
    toolEntries: AuditEntry[] = [],
  ): Promise<void> {
    await this.#track(recordCall(this.audit, this.logger, { name, args, call, outcome, toolEntries }));
  }

  /** Resolves once every audit line started so far is written (or failed, logged). */
  async flushAudit(): Promise<void> {
    while (this.#writes.count > 0) await this.#writes.idle();
  }

  /**
   * Looks a call up and checks it the way executeTool would before running it: the tool exists and is enabled for
   * the user, the arguments parse against its schema and pass the tool's own validateArguments. Returns the parsed
   * call, or the classified error the call would end with (so a gate need not ask about a call that cannot run).
   */
  async inspectCall(
    name: string,
    rawArgs: unknown,
    call: ToolCallContext,
  ): Promise<{ ok: true; call: InspectedCall } | { ok: false; error: ToolError }> {
    try {
      const tool = this.registry.get(name);
      if (!tool) throw unknownTool(name);
      const checked = await this.#check(tool, rawArgs, call);
      // A refusal is made into its error by what it is (an Error already, or a refusal's data): a tool built against
      // another copy of this package returns a ToolRefusal of that copy, which `instanceof ToolRefusal` would miss.
      if (checked.refusal) throw refusalError(checked.refusal);
      return { ok: true, call: this.#inspected(tool, checked, call) };
    } catch (error) {
      return { ok: false, error: toToolError(error) };
    }
  }

  /**
   * The registered tools that read spill files, best first: those enabled for `userId`, and all their names. Asked
   * only when a result is cut; the readers not yet registered are loaded first (ToolRuntimeOptions.loadSpillReaders).
   */
  async #spillReaders(userId: string): Promise<SpillReaders> {
    await this.#loadSpillReaders?.(this.registry);
    const all = this.registry
      .list()
      .flatMap((tool) => (tool.spillReader ? [tool.spillReader] : []))
      .sort((a, b) => a.rank - b.rank);
    const enabled: SpillReader[] = [];
    for (const reader of all) if (await this.#enabled(userId, reader.tool)) enabled.push(reader);
    return { enabled, names: all.map((reader) => reader.tool) };
  }

  async #enabled(userId: string, toolName: string): Promise<boolean> {
    const tool = this.registry.get(toolName);
    if (!tool) return false;
    try {
      return (await this.getEffectiveSettings(userId, tool)).enabled;
    } catch {
      return false;
    }
  }

  /**
   * Shuts the runtime down: cancels every running call (its signal fires with an `aborted` error; shell tools kill
   * their process groups), makes new calls end as `aborted`, and waits until the calls stopped and their audit lines
   * are recorded, at most `graceMs` (default {@link SHUTDOWN_GRACE_MS}). A call that ignores cancellation past the
   * grace gets its audit line anyway (what is known by then). Resolves true when everything finished in time, false
   * when something was still running (logged). Idempotent; run it before closing the audit sink's database.
   */
  async shutdown(options: { graceMs?: number } = {}): Promise<boolean> {
    if (!this.#closing.signal.aborted) {
      this.#closing.abort(shuttingDown());
      for (const cancel of this.#running) cancel.abort(this.#closing.signal.reason);
      this.spill?.stop();
    }
    const inTime = await this.#settle(options.graceMs ?? SHUTDOWN_GRACE_MS);
    if (inTime) return true;
    // Past the grace: record what is known of calls that still run, briefly waiting for those writes.
    this.#graceOver();
    await this.#settle(2_000);
    this.logger.warn(
      { running: this.#calls.count + this.#writes.count },
      "tool calls were still running when the shutdown grace ended; their audit lines were recorded as cancelled",
    );
    return false;
  }

  /** Waits until nothing is pending (work added meanwhile included), at most `ms`; true when idle in time. */
  async #settle(ms: number): Promise<boolean> {
    if (this.#calls.count === 0 && this.#writes.count === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
      timer.unref?.();
    });
    try {
      while (this.#calls.count > 0 || this.#writes.count > 0) {
        const idle = Promise.all([this.#writes.idle(), this.#calls.idle()]).then(() => true as const);
        if (!(await Promise.race([idle, expired]))) return false;
      }
      return true;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Counts `work` among the pending writes until it settles. */
  #track<T>(work: Promise<T>): Promise<T> {
    // Consecutive lines of one audit batch share their promise: counted once (counting it again would be as correct,
    // each count being undone by its own settlement, only costlier).
    if (work === this.#lastWrite) return work;
    this.#lastWrite = work;
    this.#writes.add();
    work.then(this.#writeSettled, this.#writeSettled);
    return work;
  }
}

function noop(): void {}

/** A count of things in flight, and a promise for the moment it drops to 0. */
class InFlight {
  count = 0;
  /** Made when someone waits; resolved and dropped when the count reaches 0. */
  #idle: { promise: Promise<void>; resolve: () => void } | undefined;

  add(): void {
    this.count++;
  }

  done(): void {
    if (--this.count === 0 && this.#idle) {
      this.#idle.resolve();
      this.#idle = undefined;
    }
  }

  /** Resolves once the count is 0 (at once when it is). */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    if (!this.#idle) {
      let resolve = noop;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.#idle = { promise, resolve };
    }
    return this.#idle.promise;
  }
}

/** A failed outcome with the duration since `started`. */
function failure(error: ToolError | ToolRefusal, started: number): ToolCallOutcome {
  return { ok: false, error: error.toJSON(), durationMs: Math.round(performance.now() - started) };
}

function refusalError(refusal: ToolError | ToolRefusal): Error {
  return refusal instanceof Error ? refusal : refusal.toError();
}

let defaultRuntime: ToolRuntime | undefined;

/** The process-wide runtime behind the free functions (in-memory storage unless configured). */
export function getDefaultRuntime(): ToolRuntime {
  defaultRuntime ??= new ToolRuntime();
  return defaultRuntime;
}

/**
 * Replaces the process-wide runtime behind executeTool, getEnabledToolRuntime and trigger. createAppContext does
 * this with its database-backed runtime, so library calls made after it see the users' stored settings.
 */
export function configureDefaultRuntime(runtime: ToolRuntime): void {
  defaultRuntime = runtime;
}

/**
 * Puts back the process-wide runtime `runtime` replaced: when `runtime` is still the default, the next
 * executeTool/trigger gets a fresh in-memory one. A closing application context calls this for its own runtime.
 */
export function releaseDefaultRuntime(runtime: ToolRuntime): void {
  if (defaultRuntime === runtime) defaultRuntime = undefined;
}

/** executeTool on the default runtime. See ToolRuntime.executeTool. */
export function executeTool(name: string, args: unknown, call: ToolCallContext): Promise<ToolCallOutcome> {
  return getDefaultRuntime().executeTool(name, args, call);
}

/** getEnabledToolRuntime on the default runtime. See ToolRuntime.getEnabledToolRuntime. */
export function getEnabledToolRuntime(userId: string): Promise<EnabledToolRuntime> {
  return getDefaultRuntime().getEnabledToolRuntime(userId);
}
