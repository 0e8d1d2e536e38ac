/**
 * The ToolContext one call runs with, and the call's cancellation. Both are made per call, so both are made
 * cheaply: the AbortSignal a tool sees is created only when the tool first reads it.
 */
import { isAbsolute, resolve } from "node:path";
import type {
  AuditSink,
  EffectiveToolSettings,
  FreshnessLedger,
  Logger,
  ToolContext,
  ToolProgressEvent,
} from "../types.js";

let lastDirectory = "";
let lastResolved = "";

/**
 * `resolve(directory)`, remembering the last absolute one (a chat's calls repeat it; an absolute path resolves the
 * same whatever the process's working directory).
 */
export function resolveDirectory(directory: string): string {
  if (directory === lastDirectory) return lastResolved;
  const resolved = resolve(directory);
  if (isAbsolute(directory)) {
    lastDirectory = directory;
    lastResolved = resolved;
  }
  return resolved;
}

/** What a CallToolContext is made of besides the call's own fields. */
export interface CallContextParts {
  userId: string;
  chatId: string | null;
  /** The caller's working directory, not yet resolved (null or absent: none). */
  workingDirectory: string | null | undefined;
  settings: EffectiveToolSettings;
  /** The call's signal, or a function that makes it when a tool first reads it. */
  signal: AbortSignal | (() => AbortSignal);
  dataDir: string;
  ledger: FreshnessLedger;
  audit: AuditSink;
  logger: Logger;
  emitProgress: (event: ToolProgressEvent) => void;
  services: Record<string, unknown>;
  protectedPaths: readonly string[];
  processCwdFallback: boolean;
}

/**
 * The ToolContext of one call. `signal` is an accessor on the class (the call's AbortSignal is made when a tool
 * first reads it), so the context is made as cheaply as a plain object; every other member is an own property.
 */
export class CallToolContext implements ToolContext {
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

  constructor(parts: CallContextParts) {
    this.userId = parts.userId;
    this.chatId = parts.chatId;
    this.workingDirectory = parts.workingDirectory ? resolveDirectory(parts.workingDirectory) : null;
    this.settings = parts.settings;
    this.dataDir = parts.dataDir;
    this.ledger = parts.ledger;
    this.audit = parts.audit;
    this.logger = parts.logger;
    this.emitProgress = parts.emitProgress;
    this.services = parts.services;
    this.protectedPaths = parts.protectedPaths;
    this.processCwdFallback = parts.processCwdFallback;
    this.#signal = parts.signal;
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
export class LazyAbort {
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
