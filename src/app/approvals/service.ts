/**
 * Approvals as an application service, the ask round-trip of every surface: creates asks bound to their call by an
 * HMAC, lets any surface answer them (SSE/REST, the CLI prompt, MCP elicitation), waits for answers across processes,
 * expires them, stores "allow always" as a rule in the user's settings, and hands turns whose process died back to
 * whoever can resume them.
 *
 * The HMAC key is 32 random bytes shared by every instance on the database (the `server_secrets` row
 * `approval_key`, see {@link ApprovalService.loadSharedKey}); a key file left in `<dataDir>/approval.key` by an
 * earlier version is adopted into the database when it holds none, and an instance whose file disagrees with the
 * database refuses to start ({@link ApprovalKeyMismatchError}). An approval's
 * MAC covers its id, the tool call id, the tool, the sha256 of the call's canonical arguments, the user, the resolved
 * working directory and the chat (none for a call outside a chat), so an approval can neither be forged nor replayed
 * for other arguments, in another directory or in another chat.
 */

import { randomUUID, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { APPROVAL_RULES_SETTING, APPROVAL_SETTING } from "../../core/approval/policy.js";
import type { ApprovalRule } from "../../core/approval/rules.js";
import { readConfig } from "../../core/config.js";
import { AccessDeniedError, LimitExceededError, NotFoundError, ToolSettingsError } from "../../core/errors.js";
import { newInstanceId, ownerIsGone } from "../../core/instance.js";
import type { Logger } from "../../core/types.js";
import type { ApprovalRecord, ApprovalRepository, ApprovalTurnRecord } from "../../storage/approvals.js";
import type { SignalBus } from "../signals.js";
import {
  SettingsVersionConflictError,
  type ToolSettingsDescriptor,
  type ToolSettingsService,
} from "../tool-settings-service.js";

import { type ApprovalBinding, ApprovalKeyring, argumentsHash, boundDirectory, type SharedSecrets } from "./binding.js";
import {
  type ApprovalAnswer,
  ApprovalConflictError,
  type ApprovalRequestView,
  type ApprovalServiceOptions,
  allowsAlways,
  DEFAULT_APPROVAL_TIMEOUT_MS,
  isSuspension,
  lockedApprovalFloor,
} from "./types.js";

export {
  type ApprovalBinding,
  ApprovalKeyMismatchError,
  argumentsHash,
  boundDirectory,
  canonicalJson,
  type SharedSecrets,
} from "./binding.js";
export {
  type ApprovalAnswer,
  ApprovalConflictError,
  type ApprovalRequestView,
  type ApprovalResponder,
  type ApprovalServiceOptions,
  allowsAlways,
  cliActor,
  DEFAULT_APPROVAL_TIMEOUT_MS,
  isSuspension,
  lockedApprovalFloor,
  TurnSuspended,
} from "./types.js";

/**
 * Most asks one user may have waiting at once: past it a call that would ask is refused (limit_exceeded) without
 * storing anything, so a model looping over calls cannot pile up asks nobody will read.
 */
export const MAX_PENDING_ASKS = 100;

type Waiter = (record: ApprovalRecord) => void;

/** Approvals: asking, answering, waiting, expiring, verifying. */
export class ApprovalService {
  /**
   * This process's id as the owner of the turns it runs (see {@link newInstanceId}), so a process on the same host
   * can tell that an owner has died (its pid is gone) and resume its turn at once instead of after the stale timeout.
   */
  readonly instanceId = newInstanceId();
  readonly timeoutMs: number;
  readonly staleMs: number;
  readonly pollMs: number;
  readonly repository: ApprovalRepository;
  readonly #settings: ToolSettingsService;
  readonly #logger: Logger;
  readonly #keyring: ApprovalKeyring;
  readonly #waiters = new Map<string, Set<Waiter>>();
  #resumer: ((turn: ApprovalTurnRecord) => void) | undefined;
  readonly #resuming = new Set<string>();
  #signals: SignalBus | undefined;

  /**
   * Connects the service to the instances' signal bus: an answer given here is signalled to every instance, and an
   * answer signalled by another instance wakes the turn waiting for it here at once (instead of at the next poll).
   */
  setSignals(signals: SignalBus): void {
    this.#signals = signals;
    signals.subscribe((signal) => {
      if (signal.kind !== "approval" || !this.#waiters.has(signal.target)) return;
      void this.repository
        .get(signal.target)
        .then((fresh) => {
          if (fresh && fresh.status !== "pending") this.#notify(fresh);
        })
        .catch(() => {});
    });
  }

  constructor(options: ApprovalServiceOptions) {
    const config = readConfig(options.env ?? process.env);
    this.repository = options.repository;
    this.#settings = options.settings;
    this.#logger = options.logger;
    this.#keyring = new ApprovalKeyring(join(options.dataDir, "approval.key"));
    this.timeoutMs = options.timeoutMs ?? config.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS;
    this.staleMs = options.staleMs ?? config.approvalStaleMs ?? 15_000;
    this.pollMs = options.pollMs ?? 2_000;
  }

  /**
   * Loads the key every instance shares from the database: the stored one, or, on the first start against this
   * database, this data directory's key file when there is one (so asks pending across an upgrade stay valid), else
   * 32 new random bytes. Throws ApprovalKeyMismatchError when the key file exists and differs from the stored key,
   * Error when the key file is damaged, and the database's error.
   */
  loadSharedKey(secrets: SharedSecrets): Promise<void> {
    return this.#keyring.loadShared(secrets);
  }

  /**
   * The server key: the shared one once {@link loadSharedKey} ran (the application context does, at start), else
   * read from the data directory or created there (32 random bytes, mode 0600).
   */
  key(): Buffer {
    return this.#keyring.key();
  }

  /** hex HMAC-SHA256 of a binding with the server key. */
  sign(binding: ApprovalBinding): string {
    return this.#keyring.sign(binding);
  }

  /**
   * Throws AccessDeniedError unless `record` is bound (by its HMAC) to exactly this call: same approval id, tool call
   * id, tool, user, canonical arguments, resolved working directory and chat.
   */
  verify(
    record: ApprovalRecord,
    call: {
      toolCallId: string;
      tool: string;
      args: unknown;
      userId: string;
      workingDirectory: string | null;
      chatId: string | null;
    },
  ): void {
    const workingDirectory = boundDirectory(call.workingDirectory);
    if (record.workingDirectory !== workingDirectory) {
      throw new AccessDeniedError(
        `Approval ${record.id} was given for a call in ${record.workingDirectory ?? "the server's working directory"}, not in ${workingDirectory ?? "the server's working directory"}. Ask for approval of this call where it runs.`,
        { approvalId: record.id, rule: "approval_binding" },
      );
    }
    if (record.chatId !== call.chatId) {
      throw new AccessDeniedError(
        `Approval ${record.id} was given for a call ${record.chatId ? `in chat ${record.chatId}` : "outside any chat"}, not ${call.chatId ? `in chat ${call.chatId}` : "outside any chat"}. Ask for approval of this call where it runs.`,
        { approvalId: record.id, rule: "approval_binding" },
      );
    }
    const expected = this.sign({
      approvalId: record.id,
      toolCallId: call.toolCallId,
      tool: call.tool,
      argsHash: argumentsHash(call.args),
      userId: call.userId,
      workingDirectory,
      chatId: call.chatId,
    });
    const a = Buffer.from(expected, "hex");
    const b = Buffer.from(record.hmac, "hex");
    if (a.length !== b.length || !timingSafeEqual(a, b)) {
      throw new AccessDeniedError(
        `Approval ${record.id} does not match this call: it was given for other arguments, another tool call, another user, another working directory or another chat (or was altered). Ask for approval of this call.`,
        { approvalId: record.id, rule: "approval_binding" },
      );
    }
  }

  /**
   * Creates a pending ask for a call; returns it (expiring after the configured timeout). Throws LimitExceededError
   * when the user already has MAX_PENDING_ASKS asks waiting (nothing is stored).
   */
  async ask(input: {
    userId: string;
    chatId: string | null;
    turnId: string | null;
    toolCallId: string;
    tool: string;
    args: unknown;
    preview: string;
    subjects: string[];
    candidates: string[];
    rule: ApprovalRule | undefined;
    reason: string;
    agentPath?: string;
    workingDirectory: string | null;
    /** Why allow_always would not make this call run unasked next time (null or absent: it would). */
    alwaysRefusal?: string | null;
  }): Promise<ApprovalRecord> {
    const id = randomUUID();
    const now = new Date();
    const argsHash = argumentsHash(input.args);
    const workingDirectory = boundDirectory(input.workingDirectory);
    const record: ApprovalRecord = {
      id,
      userId: input.userId,
      chatId: input.chatId,
      turnId: input.turnId,
      toolCallId: input.toolCallId,
      tool: input.tool,
      argsHash,
      preview: input.preview,
      rule: input.rule ? { decision: input.rule.decision, match: input.rule.match } : null,
      reason: input.reason,
      candidates: input.candidates,
      alwaysRefusal: input.alwaysRefusal ?? null,
      agentPath: input.agentPath || null,
      workingDirectory,
      status: "pending",
      decision: null,
      message: null,
      decidedBy: null,
      decidedAt: null,
      createdAt: now.toISOString(),
      expiresAt: new Date(now.getTime() + this.timeoutMs).toISOString(),
      hmac: this.sign({
        approvalId: id,
        toolCallId: input.toolCallId,
        tool: input.tool,
        argsHash,
        userId: input.userId,
        workingDirectory,
        chatId: input.chatId,
      }),
    };
    if (!(await this.repository.create(record, MAX_PENDING_ASKS))) {
      throw new LimitExceededError(
        `${MAX_PENDING_ASKS} approvals are already waiting for ${input.userId}'s answer, so this call was not asked about and did not run. Answer or deny the waiting ones (toolhost approvals, GET /api/approvals) or let them expire, then try again.`,
        { limit: "pendingApprovals", value: MAX_PENDING_ASKS },
      );
    }
    return record;
  }

  /** The user's admin locks on a tool and its current values (what lockedApprovalFloor reads). */
  async locks(userId: string, tool: string): Promise<{ lockedKeys: string[]; parameters: Record<string, unknown> }> {
    const descriptor = await this.#settings.get(userId, tool);
    return { lockedKeys: descriptor.lockedKeys, parameters: descriptor.parameters };
  }

  /** The view of an ask a surface shows. */
  view(record: ApprovalRecord, subjects: string[] = []): ApprovalRequestView {
    const rule = record.rule as { decision: string; match: string } | null;
    return {
      approvalId: record.id,
      toolCallId: record.toolCallId,
      tool: record.tool,
      preview: record.preview,
      subjects,
      rule,
      reason: record.reason,
      allowAlways: allowsAlways(record),
      expiresAt: record.expiresAt,
      workingDirectory: record.workingDirectory,
      ...(record.agentPath ? { agentPath: record.agentPath } : {}),
      chatId: record.chatId,
      userId: record.userId,
    };
  }

  /** The user's pending asks (one chat's with `chatId`). */
  listPending(userId: string, chatId?: string): Promise<ApprovalRecord[]> {
    return this.repository.listPending(userId, chatId);
  }

  /**
   * Answers an ask of `userId`. Throws NotFoundError for an unknown id or another user's ask, ApprovalConflictError
   * when it is already decided or has expired, ToolSettingsError (422) for an allow_always that would not make the
   * same call run unasked next time (the reason stored with the ask: an ask rule, the tool's own say, a doubt, an
   * admin's lock or floor), and the settings service's errors when the rule cannot be stored. allow_always stores deduplicated allow rules
   * (or sets the tool's approval to allow when it has no argument rules) before the ask is marked decided.
   */
  async decide(userId: string, approvalId: string, answer: ApprovalAnswer): Promise<ApprovalRecord> {
    const current = await this.repository.get(approvalId);
    if (!current || current.userId !== userId) {
      throw new NotFoundError(
        `No approval "${approvalId}" for this user. List pending ones with GET /api/approvals (or: toolhost approvals list).`,
      );
    }
    if (current.status !== "pending") {
      throw new ApprovalConflictError(
        `Approval ${approvalId} is already ${current.status}; it cannot be answered again.`,
        current,
      );
    }
    if (Date.parse(current.expiresAt) <= Date.now()) {
      await this.repository.expire(approvalId, new Date());
      this.#notify({ ...current, status: "expired" });
      throw new ApprovalConflictError(
        `Approval ${approvalId} expired at ${current.expiresAt}; the call was denied.`,
        current,
      );
    }
    if (answer.decision === "allow_always" && current.alwaysRefusal) {
      throw new ToolSettingsError(
        `"Allow always" cannot apply to this call: ${current.alwaysRefusal} Answer allow_once instead.`,
        { approvalId, rule: "allow_always_ineffective" },
      );
    }
    if (answer.decision === "allow_always" && !allowsAlways({ rule: current.rule })) {
      const rule = current.rule as { match: string };
      throw new ToolSettingsError(
        `This ask comes from the rule ask "${rule.match}", which an allow rule cannot override (the strictest matching rule wins). Answer allow_once, or change that rule in the tool's settings.`,
        { approvalId, rule: "ask_rule" },
      );
    }
    // An allow rule that could not be stored is refused before the answer is recorded; it is stored only once the
    // answer is (below): an answer that loses to a concurrent one (409) leaves the settings as they were.
    if (answer.decision === "allow_always") await this.#alwaysRuleChange(current, answer.admin === true);
    const result = await this.repository.decide(
      approvalId,
      {
        status: answer.decision === "deny" ? "denied" : "allowed",
        decision: answer.decision,
        message: answer.message?.trim() ? answer.message.trim().slice(0, 2000) : null,
        decidedBy: answer.decidedBy,
      },
      new Date(),
    );
    if (!result.ok) {
      if (result.reason === "not_found") throw new NotFoundError(`No approval "${approvalId}" for this user.`);
      if (result.record) this.#notify(result.record);
      throw new ApprovalConflictError(
        result.reason === "expired"
          ? `Approval ${approvalId} expired; the call was denied.`
          : `Approval ${approvalId} is already decided.`,
        result.record,
      );
    }
    let ruleFailure: unknown;
    if (answer.decision === "allow_always") {
      try {
        await this.#storeAlwaysRule(current, answer.decidedBy, answer.admin === true);
      } catch (error) {
        ruleFailure = error;
      }
    }
    this.#notify(result.record);
    // The turn waiting for it may run on another instance: tell them all (the owner continues within a second).
    if (this.#signals) await this.#signals.publish("approval", approvalId);
    if (result.record.turnId && !this.#waiters.has(approvalId)) void this.wakeTurn(result.record.turnId);
    if (ruleFailure instanceof ToolSettingsError || ruleFailure instanceof AccessDeniedError) {
      // Settings changed between the check and the store (an admin's lock, say): the call is allowed, the rule is not.
      throw new ToolSettingsError(
        `The call was allowed once, but its "allow always" rule could not be stored: ${ruleFailure.message}`,
        { approvalId, rule: "allow_always_not_stored" },
      );
    }
    if (ruleFailure !== undefined) throw ruleFailure;
    return result.record;
  }

  /**
   * Stores the allow rule(s) of an allow_always answer as a compare-and-set on the tool's settings row: the rules
   * are computed from the version read and written only if that version is still current (If-Match), retried on
   * a concurrent change, so a settings change made in between is never lost.
   */
  async #storeAlwaysRule(record: ApprovalRecord, decidedBy: string, admin: boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#storeAlwaysRuleOnce(record, decidedBy, admin);
        return;
      } catch (error) {
        if (!(error instanceof SettingsVersionConflictError) || attempt >= 8) throw error;
      }
    }
  }

  async #storeAlwaysRuleOnce(record: ApprovalRecord, decidedBy: string, admin: boolean): Promise<void> {
    const { descriptor, parameters } = await this.#alwaysRuleChange(record, admin);
    if (!parameters) return;
    // The user's own choice: never a lock against them, whoever they are.
    const actor = { admin, actor: decidedBy, lock: false, ifMatch: descriptor.version };
    await this.#settings.update(record.userId, record.tool, { parameters }, actor);
  }

  /**
   * The settings change an allow_always answer makes, computed from the tool's settings now (undefined parameters:
   * the rules are there already). Throws ToolSettingsError (422) when an admin's lock or floor forbids it.
   */
  async #alwaysRuleChange(
    record: ApprovalRecord,
    admin: boolean,
  ): Promise<{ descriptor: ToolSettingsDescriptor; parameters?: Record<string, unknown> }> {
    const descriptor = await this.#settings.get(record.userId, record.tool);
    const hasRules = descriptor.parameterDescriptors.some((d) => d.name === APPROVAL_RULES_SETTING);
    if (!admin) {
      // An admin's lock binds what it implies: a locked ask/deny is a floor no allow rule of the user's may lift.
      const target = !hasRules || record.candidates.length === 0 ? APPROVAL_SETTING : APPROVAL_RULES_SETTING;
      const floor = lockedApprovalFloor(descriptor);
      if (descriptor.lockedKeys.includes(target) || floor) {
        const what = floor
          ? `the approval setting of "${record.tool}" is locked at ${floor} by an admin, and a rule of yours cannot loosen it`
          : `"${target}" of "${record.tool}" was set for you by an admin`;
        throw new ToolSettingsError(`"Allow always" cannot be stored: ${what}. Answer allow_once instead.`, {
          approvalId: record.id,
          tool: record.tool,
          parameters: [floor ? APPROVAL_SETTING : target],
          rule: "admin_locked",
        });
      }
    }
    if (!hasRules || record.candidates.length === 0) {
      // An imported tool is allowed as it is now: a changed tool (other content hash) asks again.
      const external = descriptor.external as { contentHash?: string } | undefined;
      const pinned =
        external?.contentHash && descriptor.parameterDescriptors.some((d) => d.name === "approvedContentHash")
          ? { approvedContentHash: external.contentHash }
          : {};
      return { descriptor, parameters: { [APPROVAL_SETTING]: "allow", ...pinned } };
    }
    const existing = (descriptor.parameters[APPROVAL_RULES_SETTING] as ApprovalRule[] | undefined) ?? [];
    const rules = [...existing];
    for (const match of record.candidates) {
      if (rules.some((r) => r.decision === "allow" && r.match === match)) continue;
      rules.push({
        decision: "allow",
        match,
        mustMatch: [],
        mustNotMatch: [],
        note: `allow always (${new Date().toISOString().slice(0, 10)})`,
      });
    }
    if (rules.length === existing.length) return { descriptor };
    return { descriptor, parameters: { [APPROVAL_RULES_SETTING]: rules } };
  }

  #notify(record: ApprovalRecord): void {
    const waiters = this.#waiters.get(record.id);
    if (!waiters) return;
    this.#waiters.delete(record.id);
    for (const w of waiters) w(record);
  }

  /**
   * Waits until the ask is answered (here or by another process), expires (then it is marked expired) or `signal`
   * aborts (then it is cancelled). `heartbeat` runs every poll while waiting (a turn's owner shows it is alive).
   * Never rejects.
   */
  waitForAnswer(
    record: ApprovalRecord,
    signal?: AbortSignal,
    heartbeat?: () => Promise<void>,
  ): Promise<ApprovalRecord> {
    return new Promise<ApprovalRecord>((resolve) => {
      let settled = false;
      const finish = (result: ApprovalRecord) => {
        if (settled) return;
        settled = true;
        clearTimeout(expiry);
        clearInterval(poll);
        signal?.removeEventListener("abort", abortListener);
        this.#waiters.get(record.id)?.delete(waiter);
        if (this.#waiters.get(record.id)?.size === 0) this.#waiters.delete(record.id);
        resolve(result);
      };
      const waiter: Waiter = (r) => finish(r);
      const set = this.#waiters.get(record.id) ?? new Set<Waiter>();
      set.add(waiter);
      this.#waiters.set(record.id, set);
      const check = async () => {
        try {
          await heartbeat?.();
          const fresh = await this.repository.get(record.id);
          if (fresh && fresh.status !== "pending") finish(fresh);
        } catch (error) {
          this.#logger.warn({ err: String(error), approvalId: record.id }, "polling an approval failed");
        }
      };
      const onExpire = async () => {
        try {
          // A timer may fire a moment before the wall clock reaches the expiry: expire at the expiry at the latest.
          await this.repository.expire(record.id, new Date(Math.max(Date.now(), Date.parse(record.expiresAt))));
          const fresh = await this.repository.get(record.id);
          finish(fresh ?? { ...record, status: "expired" });
        } catch {
          finish({ ...record, status: "expired" });
        }
      };
      const onAbort = async () => {
        // A suspended turn leaves its ask pending: an answer given later resumes the turn.
        if (isSuspension(signal)) return finish({ ...record, status: "pending" });
        try {
          await this.repository.cancel(record.id, new Date());
        } catch {
          // the turn is going away anyway
        }
        finish({ ...record, status: "cancelled" });
      };
      const abortListener = () => void onAbort();
      const delay = Math.max(0, Date.parse(record.expiresAt) - Date.now());
      const expiry = setTimeout(() => void onExpire(), Math.min(delay, 2_147_000_000));
      const poll = setInterval(() => void check(), this.pollMs);
      poll.unref?.();
      if (signal?.aborted) void onAbort();
      // The same function finish() removes: each wait leaves no listener behind on the turn's signal (a turn with
      // many asks would otherwise pile them up).
      else signal?.addEventListener("abort", abortListener, { once: true });
      void check();
    });
  }

  /** Marks an allowed ask used; false when it was not allowed or already used (an approval runs a call once). */
  use(approvalId: string): Promise<boolean> {
    return this.repository.use(approvalId);
  }

  /**
   * Registers who resumes a suspended turn whose process is gone (the chat service). Called with each turn this
   * process claimed.
   */
  setResumer(resume: (turn: ApprovalTurnRecord) => void): void {
    this.#resumer = resume;
  }

  /**
   * The seam by which "an answer wakes its turn": called when an approval of a suspended chat turn is answered
   * (and by the sweep). Claims the turn when its owner released it (its client left, the server stopped) or stopped
   * showing it is alive, and hands it to the resumer, which runs the approved calls once and continues the turn.
   * A cross-instance signal bus routes an answer given on another instance here.
   */
  wakeTurn(turnId: string): Promise<void> {
    return this.#tryResume(turnId);
  }

  async #tryResume(turnId: string): Promise<void> {
    if (!this.#resumer || this.#resuming.has(turnId)) return;
    try {
      // An owner on this host whose process is gone (a crash) needs no stale timeout.
      const current = await this.repository.getTurn(turnId);
      const gone = current !== undefined && ownerIsGone(current.owner) ? current.owner : undefined;
      const turn = await this.repository.claimTurn(turnId, this.instanceId, this.staleMs, gone);
      if (!turn) return;
      this.#resuming.add(turnId);
      this.#resumer(turn);
    } catch (error) {
      this.#logger.error({ err: String(error), turnId }, "claiming a suspended turn failed");
    }
  }

  /** Called by the resumer when a resumed turn has finished (successfully or not). */
  resumed(turnId: string): void {
    this.#resuming.delete(turnId);
  }

  /**
   * One sweep: expires overdue asks nobody waits for here, and resumes suspended turns whose process is gone and
   * that have an answer (or an expiry) to act on. The server runs it on start and then periodically.
   */
  async sweep(): Promise<void> {
    const now = new Date();
    for (const record of await this.repository.overdue(now)) {
      if (this.#waiters.has(record.id)) continue;
      await this.repository.expire(record.id, now);
    }
    for (const turn of await this.repository.staleTurns(this.staleMs)) {
      if (turn.owner === this.instanceId && this.#resuming.has(turn.id)) continue;
      const pending = (await this.repository.listPending(turn.userId, turn.chatId)).filter((a) => a.turnId === turn.id);
      if (pending.length === 0) await this.#tryResume(turn.id);
    }
  }

  /** Runs sweep now and every `intervalMs` (default 5 s); returns a stop function. */
  startSweeper(intervalMs = 5_000): () => void {
    const run = () =>
      void this.sweep().catch((error) => this.#logger.error({ err: String(error) }, "approval sweep failed"));
    run();
    const timer = setInterval(run, intervalMs);
    timer.unref?.();
    return () => clearInterval(timer);
  }
}
