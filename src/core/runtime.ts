/**
 * The tool runtime: resolves a user's settings, offers the enabled tools, and executes calls.
 *
 * A ToolRuntime binds a registry to its storage (settings store, freshness ledger, audit sink), so that the
 * server, the CLI and library users run tools through one code path. The free functions `executeTool` and
 * `getEnabledToolRuntime` use a process-wide default runtime (in-memory storage unless configured).
 */
import { isAbsolute, resolve } from "node:path";
import { type ArgumentDecoding, checkToolArguments } from "./arg-parsing.js";
import { resolveDataDir } from "./data-dir.js";
import {
  AccessDeniedError,
  NotFoundError,
  type SerializedToolError,
  ToolAbortedError,
  ToolError,
  ToolExecutionError,
  ToolRefusal,
  ToolTimeoutError,
  toToolError,
} from "./errors.js";
import { checkValueLimits, scanJsonText, TOOL_ARGUMENT_LIMITS } from "./json-limits.js";
import { recordToolExecution, toolOutputTruncatedTotal } from "./metrics.js";
import { SpillArea, type SpillStream } from "./output-spill.js";
import { installationPaths } from "./package-root.js";
import { redactBounded } from "./redact.js";
import { defaultRegistry, type ToolRegistryStore } from "./registry.js";
import { capToolResult, fitsResultCap, resultCapLimits } from "./result-cap.js";
import { integerSetting } from "./settings-declaration.js";
import { DEFAULT_TOOL_TIMEOUT_MS, getSafeEffectiveToolSettings, getToolDefinition } from "./settings-policy.js";
import {
  createLogger,
  MemoryAuditSink,
  MemoryFreshnessLedger,
  MemoryToolSettingsStore,
  type ToolSettingsStore,
  type VersionedToolSettings,
} from "./stores.js";
import { tracerProviderRegistered, withToolSpan } from "./tracing.js";
import type {
  AuditEntry,
  AuditEvent,
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
  /** The provider's id for this call when a model made it (recorded as `gen_ai.tool.call.id` on the trace span). */
  toolCallId?: string;
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
  /**
   * The approval decision that let this call run, recorded in the audit: `decision` allow (the policy allowed it),
   * allow_once, allow_always; `decidedBy` "policy" or who answered the ask. Absent: no gate ran (library use).
   */
  approval?: { decision: string; decidedBy: string; approvalId?: string };
}

/** A call looked up and checked (tool enabled, arguments parsed) before it runs: what the approval gate needs. */
export interface InspectedCall {
  tool: RegisteredTool;
  settings: EffectiveToolSettings;
  /** Parsed arguments (nulls removed, defaults applied). */
  args: Record<string, unknown>;
  /** The context the tool would run with (its signal is the caller's). */
  context: ToolContext;
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
  /**
   * Where the full output of cut results goes (default: `<dataDir>/spill`, 7-day expiry, 256 MiB per user; cleaned
   * now and hourly). Results are capped either way; without an area (`false`) nothing is saved.
   */
  spill?: SpillArea | false;
}

export { installationPaths };

/** Extra time (ms) given past the budget of a tool that manages its own timeout before the backstop fires. */
const OWN_TIMEOUT_GRACE_MS = 5_000;

/** Default time (ms) {@link ToolRuntime.shutdown} waits for cancelled calls to stop and record their audit line. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** The reason every running call gets when the runtime shuts down. */
const shuttingDown = () =>
  new ToolAbortedError("Toolhost is shutting down, so the call was cancelled. Send it again once it runs.", {
    rule: "shutdown",
  });

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
  /** executeTool calls in flight (until their audit line is recorded): what shutdown waits for, with #pending. */
  #calls = 0;
  /** Resolved when #calls drops to 0 (made when a shutdown waits). */
  #idle: { promise: Promise<void>; resolve: () => void } | undefined;
  /** Audit lines still waiting for a cancelled call to stop: what shutdown waits for, with #calls. */
  readonly #pending = new Set<Promise<unknown>>();
  /** Aborted by {@link shutdown}: every running call is cancelled, and a new one ends as `aborted` at once. */
  readonly #closing = new AbortController();
  /** Resolved when shutdown's grace is over: audit lines stop waiting for calls that ignore cancellation. */
  #graceOver: () => void = noop;
  readonly #graceOverPromise = new Promise<void>((resolve) => {
    this.#graceOver = resolve;
  });
  /** See #settingsFor. */
  readonly #settingsCache = new WeakMap<
    RegisteredTool,
    { none?: EffectiveToolSettings; rows: WeakMap<object, EffectiveToolSettings> }
  >();
  /** The cancellation of every call running now: shutdown aborts them (cheaper than a listener per call). */
  readonly #running = new Set<LazyAbort>();

  constructor(options: ToolRuntimeOptions = {}) {
    this.registry = options.registry ?? defaultRegistry;
    this.store = options.store ?? new MemoryToolSettingsStore();
    this.ledger = options.ledger ?? new MemoryFreshnessLedger();
    this.audit = options.audit ?? new MemoryAuditSink();
    this.logger = options.logger ?? createLogger();
    this.dataDir = resolveDataDir(options.dataDir);
    this.services = options.services ?? {};
    this.protectedPaths = options.protectedPaths ?? [this.dataDir, ...installationPaths()];
    this.spill = options.spill === false ? null : (options.spill ?? new SpillArea(this.dataDir));
    this.spill?.start();
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
   * one, `validation_failed` for bad arguments, `timeout`, `aborted`, `execution_failed`, or the tool's own).
   * `args` is the raw model output: a JSON string or a decoded object.
   */
  executeTool(name: string, args: unknown, call: ToolCallContext): Promise<ToolCallOutcome> {
    return this.#execute(name, args, call);
  }

  /** Whether {@link shutdown} has begun (new calls end as `aborted`). */
  get closing(): boolean {
    return this.#closing.signal.aborted;
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
      { running: this.#calls + this.#pending.size },
      "tool calls were still running when the shutdown grace ended; their audit lines were recorded as cancelled",
    );
    return false;
  }

  /** Waits until nothing is pending (work added meanwhile included), at most `ms`; true when idle in time. */
  async #settle(ms: number): Promise<boolean> {
    if (this.#calls === 0 && this.#pending.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
      timer.unref?.();
    });
    try {
      while (this.#calls > 0 || this.#pending.size > 0) {
        const idle = Promise.allSettled([...this.#pending, this.#callsDone()]).then(() => true as const);
        if (!(await Promise.race([idle, expired]))) return false;
      }
      return true;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Resolves once no executeTool call is in flight (at once when none is). */
  #callsDone(): Promise<void> {
    if (this.#calls === 0) return Promise.resolve();
    if (!this.#idle) {
      let resolve = noop;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.#idle = { promise, resolve };
    }
    return this.#idle.promise;
  }

  /** Keeps `work` in the pending set until it settles. */
  #track<T>(work: Promise<T>): Promise<T> {
    this.#pending.add(work);
    const done = () => {
      this.#pending.delete(work);
    };
    work.then(done, done);
    return work;
  }

  async #execute(name: string, args: unknown, call: ToolCallContext): Promise<ToolCallOutcome> {
    // Counted from here until the outcome and its audit line are settled: what shutdown waits for.
    this.#calls++;
    try {
      const started = performance.now();
      const tool = this.registry.get(name);
      if (!tool) {
        const error = new NotFoundError(`Unknown tool "${name}". Call one of the tools you were given.`, {
          tool: name,
        });
        const outcome: ToolCallOutcome = {
          ok: false,
          error: error.toJSON(),
          durationMs: Math.round(performance.now() - started),
        };
        await this.auditCall(name, args, call, outcome);
        return outcome;
      }
      const state: CallState = { toolEntries: [] };
      // Without a tracer provider the span would not record: the call runs without the span wrapper, and the steps
      // of #measured run here, one async frame fewer (the hot path).
      let outcome: ToolCallOutcome;
      if (tracerProviderRegistered()) {
        outcome = await withToolSpan(
          { tool: name, callId: call.toolCallId, args },
          () => this.#measured(tool, args, call, state, started),
          spanOutcome,
        );
      } else {
        try {
          const saved = await this.store.get(call.userId, name);
          const checked = this.#check(tool, saved, args, call, state);
          outcome = checked.refusal
            ? // Refused before it runs (disabled, bad arguments): no budget, context or signal is made.
              { ok: false, error: checked.refusal.toJSON(), durationMs: Math.round(performance.now() - started) }
            : {
                ok: true,
                result: await this.#run(tool, checked.settings, checked.args, call, state),
                durationMs: Math.round(performance.now() - started),
              };
        } catch (thrown) {
          outcome = this.#failed(name, thrown, started);
        }
        recordToolExecution(name, performance.now() - started, !outcome.ok);
      }
      // A tool cancelled or timed out may still be stopping (a shell kills its process group) and record its own
      // entry afterwards: the call's audit line waits for it (without delaying the outcome), at most a minute.
      const stopping = state.promise;
      if (
        !outcome.ok &&
        stopping &&
        !state.done &&
        (outcome.error.code === "aborted" || outcome.error.code === "timeout")
      ) {
        // A shutdown waits for this line (the runtime tracks it) and ends the wait when its grace is over.
        const cap = new Promise<void>((resolve) => setTimeout(resolve, 60_000).unref?.());
        void this.#track(
          Promise.race([stopping.then(noop, noop), cap, this.#graceOverPromise]).then(() =>
            this.auditCall(name, args, call, outcome, state.toolEntries, state),
          ),
        );
      } else if (state.toolEntries.length === 0 && this.audit.recordEvent) {
        // The common case (no entry of the tool's own to fold in), awaited directly on the sink.
        try {
          await this.audit.recordEvent(this.#callEvent(name, args, call, outcome, undefined, state));
        } catch (error) {
          this.#auditFailed(name, error);
        }
      } else {
        await this.auditCall(name, args, call, outcome, state.toolEntries, state);
      }
      return outcome;
    } finally {
      if (--this.#calls === 0 && this.#idle) {
        this.#idle.resolve();
        this.#idle = undefined;
      }
    }
  }

  /** The outcome of a call that threw `thrown` (an unclassified error is logged, and becomes execution_failed). */
  #failed(name: string, thrown: unknown, started: number): ToolCallOutcome {
    const error = toToolError(thrown);
    if (!(thrown instanceof ToolError)) {
      this.logger.warn(
        { tool: name, err: (thrown as Error)?.stack ?? String(thrown) },
        "tool threw an unclassified error",
      );
    }
    return { ok: false, error: error.toJSON(), durationMs: Math.round(performance.now() - started) };
  }

  /**
   * Runs the call and records it in the execution metrics (duration from `started`, failed or not). Never throws:
   * a failure is the outcome's classified error. (#execute runs the same steps itself when no span is recorded.)
   */
  async #measured(
    tool: RegisteredTool,
    args: unknown,
    call: ToolCallContext,
    state: CallState,
    started: number,
  ): Promise<ToolCallOutcome> {
    const name = tool.definition.name;
    let outcome: ToolCallOutcome;
    try {
      const saved = await this.store.get(call.userId, name);
      const checked = this.#check(tool, saved, args, call, state);
      if (checked.refusal) {
        // Refused before it runs (disabled, bad arguments): no budget, context or signal is made, nothing thrown.
        outcome = { ok: false, error: checked.refusal.toJSON(), durationMs: Math.round(performance.now() - started) };
      } else {
        const result = await this.#run(tool, checked.settings, checked.args, call, state);
        outcome = { ok: true, result, durationMs: Math.round(performance.now() - started) };
      }
    } catch (thrown) {
      outcome = this.#failed(name, thrown, started);
    }
    recordToolExecution(name, performance.now() - started, !outcome.ok);
    return outcome;
  }

  /**
   * Records one tool call in the audit (who, tool, redacted arguments, working directory, outcome and error code,
   * duration, approval decision and who made it), folding in the entry the tool recorded itself (shell command,
   * exit code, sandboxed). Sinks without recordEvent get only the tool's own entries. Never throws: a failing audit
   * is logged.
   */
  async auditCall(
    name: string,
    args: unknown,
    call: ToolCallContext,
    outcome: ToolCallOutcome,
    toolEntries: AuditEntry[] = [],
    state?: CallState,
  ): Promise<void> {
    try {
      if (!this.audit.recordEvent) {
        for (const entry of toolEntries) await this.audit.record(entry);
        return;
      }
      for (let i = 0; i < toolEntries.length - 1; i++) await this.audit.record(toolEntries[i]!);
      await this.audit.recordEvent(this.#callEvent(name, args, call, outcome, toolEntries.at(-1), state));
    } catch (error) {
      this.#auditFailed(name, error);
    }
  }

  /** The audit event of one call (see {@link auditCall}); `toolEntry` is the tool's own last entry, folded in. */
  #callEvent(
    name: string,
    args: unknown,
    call: ToolCallContext,
    outcome: ToolCallOutcome,
    toolEntry: AuditEntry | undefined,
    state: CallState | undefined,
  ): AuditEvent {
    const denied =
      !outcome.ok && (outcome.error.code === "denied_by_user" || outcome.error.code === "denied_by_policy");
    const event: AuditEvent & { toolEntry?: AuditEntry } = {
      kind: "tool_call",
      userId: call.userId,
      chatId: call.chatId ?? null,
      tool: name,
      // A bounded, redacted copy: the audit line says what was asked without storing megabytes.
      arguments: redactBounded(state && "decoded" in state ? state.decoded : decodeArguments(args)),
      cwd: toolEntry?.cwd ?? (call.workingDirectory ? resolveDirectory(call.workingDirectory) : null),
      outcome: outcome.ok ? "ok" : denied ? "denied" : "error",
      errorCode: outcome.ok ? null : outcome.error.code,
      durationMs: outcome.durationMs,
      approval: call.approval?.decision ?? null,
      approvedBy: call.approval?.decidedBy ?? null,
    };
    // Present only when the tool recorded one (set, not spread from an empty object on every call).
    if (toolEntry) event.toolEntry = toolEntry;
    return event;
  }

  #auditFailed(name: string, error: unknown): void {
    this.logger.error({ tool: name, err: String(error) }, "recording the tool call in the audit log failed");
  }

  /**
   * Looks a call up and checks it the way executeTool would before running it: the tool exists and is enabled for
   * the user, the arguments parse against its schema and pass the tool's own validateArguments. Returns the parsed call, or the classified error the
   * call would end with (so a gate need not ask about a call that cannot run).
   */
  async inspectCall(
    name: string,
    rawArgs: unknown,
    call: ToolCallContext,
  ): Promise<{ ok: true; call: InspectedCall } | { ok: false; error: ToolError }> {
    try {
      const tool = this.registry.get(name);
      if (!tool)
        throw new NotFoundError(`Unknown tool "${name}". Call one of the tools you were given.`, { tool: name });
      const { settings, args } = await this.#prepare(tool, rawArgs, call);
      const signal = call.signal ?? new AbortController().signal;
      return { ok: true, call: { tool, settings, args, context: this.#context(tool, call, settings, signal, []) } };
    } catch (error) {
      return { ok: false, error: toToolError(error) };
    }
  }

  async #prepare(
    tool: RegisteredTool,
    rawArgs: unknown,
    call: ToolCallContext,
  ): Promise<{ settings: EffectiveToolSettings; args: Record<string, unknown> }> {
    const saved = await this.store.get(call.userId, tool.definition.name);
    const checked = this.#check(tool, saved, rawArgs, call);
    // A refusal is made into its error by what it is (an Error already, or a refusal's data): a tool built against
    // another copy of this package returns a ToolRefusal of that copy, which `instanceof ToolRefusal` would miss.
    if (checked.refusal) throw checked.refusal instanceof Error ? checked.refusal : checked.refusal.toError();
    return checked;
  }

  /**
   * The checks of a call before it runs, given the user's saved row: the tool is enabled for the user, the
   * arguments parse against its schema and pass the tool's own validateArguments. A refusal is returned, not thrown
   * (bad arguments are ordinary traffic, and a throw costs more than the checks); anything else the tool's
   * validateArguments throws propagates.
   */
  #check(
    tool: RegisteredTool,
    saved: VersionedToolSettings | undefined,
    rawArgs: unknown,
    call: ToolCallContext,
    state?: CallState,
  ):
    | { refusal?: undefined; settings: EffectiveToolSettings; args: Record<string, unknown> }
    | { refusal: ToolError | ToolRefusal } {
    const name = tool.definition.name;
    const settings = this.#settingsFor(tool, saved);
    const explicitlySaved = typeof saved?.enabled === "boolean";
    if (!settings.enabled && !(call.allowDefaultDisabled && !explicitlySaved)) {
      return {
        refusal: new AccessDeniedError(
          `Tool "${name}" is disabled for this user. Enable it in the tool settings (PUT /api/settings/tools/${name} or \`toolhost settings set ${name} --enable\`).`,
          { tool: name, rule: "disabled" },
        ),
      };
    }
    const definition = getToolDefinition(tool, settings);
    const args = checkToolArguments(definition.parameters, rawArgs, state);
    if (args instanceof ToolRefusal) return { refusal: args };
    if (tool.validateArguments) {
      try {
        const refusal = tool.validateArguments(args, settings);
        if (refusal) return { refusal };
      } catch (error) {
        if (error instanceof ToolError) return { refusal: error };
        throw error;
      }
    }
    return { settings, args };
  }

  /**
   * The effective settings of a call, cached per tool and saved row: the defaults when nothing is saved, else per
   * row object (stores that hand out the same object until the row changes, like the in-memory one, hit the cache;
   * a store returning a fresh object per read just recomputes). Cached settings are deep-frozen, since every call
   * of the tool shares them. Corrupt saved values are logged when the row is first resolved.
   */
  #settingsFor(tool: RegisteredTool, saved: VersionedToolSettings | undefined): EffectiveToolSettings {
    let entry = this.#settingsCache.get(tool);
    if (!entry) {
      entry = { rows: new WeakMap() };
      this.#settingsCache.set(tool, entry);
    }
    if (!saved) {
      entry.none ??= deepFreeze(getSafeEffectiveToolSettings(tool, undefined, this.logger));
      return entry.none;
    }
    let settings = entry.rows.get(saved);
    if (!settings) {
      settings = deepFreeze(getSafeEffectiveToolSettings(tool, saved, this.logger));
      entry.rows.set(saved, settings);
    }
    return settings;
  }

  /** The context a tool runs with; `signal` may be a function that makes the signal when the tool first reads it. */
  #context(
    tool: RegisteredTool,
    call: ToolCallContext,
    settings: EffectiveToolSettings,
    signal: AbortSignal | (() => AbortSignal),
    toolEntries: AuditEntry[],
  ): ToolContext {
    const name = tool.definition.name;
    const context = new CallToolContext(
      call,
      settings,
      signal,
      this.dataDir,
      this.ledger,
      // The tool's own entries are folded into the call's audit event once the call ends.
      {
        record: async (entry) => {
          toolEntries.push(entry);
        },
      },
      this.logger,
      (event) => {
        try {
          call.onProgress?.(event);
        } catch (error) {
          this.logger.warn({ tool: name, err: String(error) }, "progress listener threw");
        }
      },
      // The runtime's services object itself when the call adds none (one object fewer per call).
      call.services ? { ...this.services, ...call.services } : this.services,
      this.protectedPaths,
      this.processCwdFallback(call.userId),
    );
    if (call.approval) context.approval = { decision: call.approval.decision, decidedBy: call.approval.decidedBy };
    if (call.toolCallId !== undefined) context.toolCallId = call.toolCallId;
    return context;
  }

  /** Runs a checked call (see #check) within its budget, cancellation and output cap. */
  async #run(
    tool: RegisteredTool,
    settings: EffectiveToolSettings,
    args: Record<string, unknown>,
    call: ToolCallContext,
    state: CallState,
  ): Promise<unknown> {
    const name = tool.definition.name;

    const budgetMs = this.#budgetMs(tool, args, settings);
    const parent = call.signal;
    if (parent?.aborted) throw new ToolAbortedError();
    const closing = this.#closing.signal;
    if (closing.aborted) throw closing.reason;
    // The call's signal is made only if the tool reads it (an AbortController is the costliest object of a call);
    // the race below is rejected directly, so a cancel, timeout or shutdown ends the call either way.
    const cancel = new LazyAbort();
    const onParentAbort = () => cancel.abort(new ToolAbortedError());
    parent?.addEventListener("abort", onParentAbort, { once: true });
    this.#running.add(cancel);
    const backstopMs = tool.managesOwnTimeout ? budgetMs + OWN_TIMEOUT_GRACE_MS : budgetMs;
    const timer = setTimeout(() => {
      cancel.abort(
        new ToolTimeoutError(
          `Tool "${name}" did not finish within its ${Math.round(budgetMs / 1000)}s budget and was cancelled. Narrow the request, or raise timeoutSeconds in the tool settings.`,
          { tool: name, budgetMs },
        ),
      );
    }, backstopMs);
    timer.unref?.();

    const context = this.#context(tool, call, settings, () => cancel.signal, state.toolEntries);
    // The streams of full outputs the tool opened (made on the first one).
    let streams: Map<string, SpillStream> | undefined;
    const spill = this.spill;
    const limits = capLimitsOf(settings);
    const chatId = call.chatId ?? null;
    if (spill) {
      context.spillDirectory = spill.directoryFor(call.userId, chatId);
      context.openSpill = (spillName) => spill.open(call.userId, chatId, spillName);
      context.captureFullOutput = (field) => {
        streams ??= new Map();
        const existing = streams.get(field);
        if (existing) return existing;
        const stream = spill.openStream(call.userId, chatId, name, field, limits.maxBytes);
        streams.set(field, stream);
        return stream;
      };
    }

    try {
      const running = tool.execute(args, context);
      state.promise = running;
      // The tool's result, or the abort reason as soon as the call is cancelled, timed out or shut down.
      const result = await new Promise((resolve, reject) => {
        cancel.onAbort(reject);
        running.then(
          (value) => {
            state.done = true;
            resolve(value);
          },
          (error) => {
            state.done = true;
            reject(error);
          },
        );
      });
      const serialized = toSerializable(name, result);
      // A result within the cap, with no full output captured, is returned as it is (most calls).
      if (streams === undefined && fitsResultCap(serialized.value, serialized.bytes, limits)) return serialized.value;
      return await this.#cap(
        tool,
        serialized.value,
        serialized.bytes,
        limits,
        streams ?? new Map(),
        call.userId,
        chatId,
      );
    } catch (error) {
      if (streams) for (const stream of streams.values()) await stream.discard();
      // A tool that throws after the signal fired (e.g. its fetch rejected with AbortError) is reported by the
      // signal's reason, so timeout and cancel stay distinguishable.
      if (cancel.aborted && !(error instanceof ToolError && error.code !== "execution_failed")) {
        throw cancel.reason;
      }
      throw error;
    } finally {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onParentAbort);
      this.#running.delete(cancel);
    }
  }

  /** Applies the runtime-wide output cap (core/result-cap.ts) and counts cuts per tool. */
  async #cap(
    tool: RegisteredTool,
    result: unknown,
    jsonBytes: number,
    limits: { maxBytes: number; maxLines: number },
    streams: Map<string, SpillStream>,
    userId: string,
    chatId: string | null,
  ): Promise<unknown> {
    const name = tool.definition.name;
    const outcome = await capToolResult(result, {
      tool: name,
      style: tool.outputCapStyle ?? "head",
      ...limits,
      jsonBytes,
      streams,
      area: this.spill,
      userId,
      chatId,
      readers: async () => ({
        readFile: await this.#enabled(userId, "read_file"),
        grep: await this.#enabled(userId, "grep"),
      }),
    });
    if (outcome.truncated) {
      toolOutputTruncatedTotal.inc({ tool: name });
      if (this.spill) void this.spill.cleanupUser(userId).catch(() => {});
    }
    return outcome.result;
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

  #budgetMs(tool: RegisteredTool, args: Record<string, unknown>, settings: EffectiveToolSettings): number {
    if (tool.timeoutMs) return tool.timeoutMs(args, settings);
    const d = tool.settings.parameterDescriptors.find((p) => p.name === "timeoutSeconds");
    if (d && typeof d.default === "number") return integerSetting(settings.parameters, d) * 1000;
    const seconds = settings.parameters.timeoutSeconds;
    return typeof seconds === "number" && seconds > 0 ? seconds * 1000 : DEFAULT_TOOL_TIMEOUT_MS;
  }
}

function noop(): void {}

/**
 * What one executeTool call carries between its steps: the tool's own audit entries, the decoded arguments once
 * argument parsing got them within the limits (the audit records them without decoding or checking again), and the
 * tool's running promise (a cancelled call's audit line waits for it).
 */
interface CallState extends ArgumentDecoding {
  toolEntries: AuditEntry[];
  promise?: Promise<unknown>;
  done?: boolean;
}

let lastDirectory = "";
let lastResolved = "";

/**
 * `resolve(directory)`, remembering the last absolute one (a chat's calls repeat it; an absolute path resolves the
 * same whatever the process's working directory).
 */
function resolveDirectory(directory: string): string {
  if (directory === lastDirectory) return lastResolved;
  const resolved = resolve(directory);
  if (isAbsolute(directory)) {
    lastDirectory = directory;
    lastResolved = resolved;
  }
  return resolved;
}

/** The output cap's limits by effective settings object (cached settings are frozen, so the limits stay true). */
const capLimitsCache = new WeakMap<EffectiveToolSettings, { maxBytes: number; maxLines: number }>();

/** resultCapLimits of a call's settings, read once per frozen settings object. */
function capLimitsOf(settings: EffectiveToolSettings): { maxBytes: number; maxLines: number } {
  if (!Object.isFrozen(settings)) return resultCapLimits(settings.parameters);
  let limits = capLimitsCache.get(settings);
  if (!limits) {
    limits = resultCapLimits(settings.parameters);
    capLimitsCache.set(settings, limits);
  }
  return limits;
}

/** Freezes a JSON value and everything in it; returns it. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/**
 * The ToolContext of one call. `signal` is an accessor on the class (the call's AbortSignal is made when a tool
 * first reads it), so the context is made as cheaply as a plain object; every other member is an own property.
 */
class CallToolContext implements ToolContext {
  readonly userId: string;
  readonly chatId: string | null;
  readonly workingDirectory: string | null;
  readonly settings: EffectiveToolSettings;
  readonly dataDir: string;
  readonly ledger: FreshnessLedger;
  readonly audit: AuditSink;
  readonly logger: Logger;
  readonly emitProgress: (event: ToolProgressEvent) => void;
  readonly services: Record<string, unknown>;
  readonly protectedPaths: readonly string[];
  readonly processCwdFallback: boolean;
  declare spillDirectory?: string;
  declare openSpill?: ToolContext["openSpill"];
  declare captureFullOutput?: ToolContext["captureFullOutput"];
  declare approval?: { decision: string; decidedBy: string };
  declare toolCallId?: string;
  #signal: AbortSignal | (() => AbortSignal);

  constructor(
    call: ToolCallContext,
    settings: EffectiveToolSettings,
    signal: AbortSignal | (() => AbortSignal),
    dataDir: string,
    ledger: FreshnessLedger,
    audit: AuditSink,
    logger: Logger,
    emitProgress: (event: ToolProgressEvent) => void,
    services: Record<string, unknown>,
    protectedPaths: readonly string[],
    processCwdFallback: boolean,
  ) {
    this.userId = call.userId;
    this.chatId = call.chatId ?? null;
    this.workingDirectory = call.workingDirectory ? resolveDirectory(call.workingDirectory) : null;
    this.settings = settings;
    this.dataDir = dataDir;
    this.ledger = ledger;
    this.audit = audit;
    this.logger = logger;
    this.emitProgress = emitProgress;
    this.services = services;
    this.protectedPaths = protectedPaths;
    this.processCwdFallback = processCwdFallback;
    this.#signal = signal;
  }

  get signal(): AbortSignal {
    if (typeof this.#signal === "function") this.#signal = this.#signal();
    return this.#signal;
  }
}

/**
 * A call's cancellation: `abort(reason)` records the first reason and calls the listener given to `onAbort` at once;
 * the AbortSignal tools see is made only when one reads it (already aborted if the call was), so a tool that never
 * looks at its signal costs no AbortController.
 */
class LazyAbort {
  #controller: AbortController | undefined;
  #reason: unknown;
  #aborted = false;
  #listener: ((reason: unknown) => void) | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** The signal tools see; aborts (with the same reason) when the call does. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** Calls `listener` with the reason when the call is aborted (at once if it already was). One listener. */
  onAbort(listener: (reason: unknown) => void): void {
    if (this.#aborted) listener(this.#reason);
    else this.#listener = listener;
  }

  /** Aborts the call with `reason`; later calls do nothing. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    this.#listener?.(reason);
  }
}

/**
 * Raw model arguments as a value for the audit: a JSON string decoded when it parses, anything else as is. Input
 * beyond the argument limits (or not JSON data) is recorded as a short note instead, never parsed or copied whole.
 */
function decodeArguments(args: unknown): unknown {
  if (typeof args !== "string") {
    const problem = checkValueLimits(args, TOOL_ARGUMENT_LIMITS);
    return problem ? { notRecorded: problem } : args;
  }
  const violation = scanJsonText(args, TOOL_ARGUMENT_LIMITS);
  if (violation) return { notRecorded: `Arguments: ${violation.message}` };
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

/**
 * A tool's result as JSON data (its JSON round trip: undefined becomes null, class instances plain objects) and
 * the UTF-8 size of its JSON, from one serialization. Throws ToolExecutionError when the value cannot be serialized.
 */
function toSerializable(tool: string, value: unknown): { value: unknown; bytes: number } {
  if (value === undefined) return { value: null, bytes: 4 };
  try {
    const json = JSON.stringify(value);
    return { value: JSON.parse(json), bytes: Buffer.byteLength(json, "utf8") };
  } catch (error) {
    throw new ToolExecutionError(
      `Tool "${tool}" returned a value that is not JSON-serializable: ${(error as Error).message}`,
    );
  }
}

/** How an outcome reads on its `execute_tool` span: failures carry their error code as `error.type`. */
function spanOutcome(outcome: ToolCallOutcome): {
  ok: boolean;
  errorCode?: string;
  message?: string;
  result?: unknown;
} {
  return outcome.ok
    ? { ok: true, result: outcome.result }
    : { ok: false, errorCode: outcome.error.code, message: outcome.error.message };
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
