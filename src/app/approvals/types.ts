/**
 * The shapes of the approval round-trip that surfaces and the chat turn share with the approval service: answers,
 * the view of an ask, how a surface answers, suspension of a turn, the conflict error, the service's options, and
 * the CLI's actor and the admin's locked floor.
 */
import { userInfo } from "node:os";
import { APPROVAL_SETTING } from "../../core/approval/policy.js";
import { BrandedError, errorBrand } from "../../core/errors.js";
import type { Logger } from "../../core/types.js";
import type { ApprovalRequestedEvent } from "../../loop/events.js";
import type { ApprovalAnswerDecision, ApprovalRecord, ApprovalRepository } from "../../storage/approvals.js";
import type { ToolSettingsService } from "../tool-settings-service.js";

/** Default time an ask waits for an answer before it counts as denied: 15 minutes. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 15 * 60 * 1000;

/** How a person (or a surface on their behalf) answered an ask. */
export interface ApprovalAnswer {
  decision: ApprovalAnswerDecision;
  /** Words for the model (why not, what to do instead). */
  message?: string;
  /** Who answered: a user id, or a surface such as `cli:alice` or `mcp-client`. */
  decidedBy: string;
  /**
   * The answerer is an admin: an allow_always rule is then stored as an admin's (it may replace admin-set rules,
   * and binds like them). Default false: a user's allow_always cannot change rules an admin set for them.
   */
  admin?: boolean;
}

/**
 * An ask as a surface shows it: the `approval_requested` event's fields (their one statement is the loop's event),
 * with the chat and user it belongs to.
 */
export type ApprovalRequestView = Omit<ApprovalRequestedEvent, "type"> & {
  chatId: string | null;
  userId: string;
};

/**
 * The reason a turn's signal is aborted with when its process stops waiting but its asks must stay pending: the
 * SSE client left (unless it sent `onDisconnect: "cancel"`), or the server stops. The gate then leaves the ask
 * pending, the turn is released (not stored as cancelled), and an answer given later resumes it.
 */
export class TurnSuspended extends Error {
  override readonly name = "TurnSuspended";
  constructor(readonly why: "client_disconnected" | "server_stopping") {
    super(why === "server_stopping" ? "The server is stopping." : "The client disconnected.");
  }
}

/** Whether a signal was aborted to suspend (not cancel) its turn. */
export function isSuspension(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && signal.reason instanceof TurnSuspended;
}

/**
 * How a surface answers an ask. The gate calls `answer` once per ask:
 * - resolve with an answer (CLI prompt, MCP elicitation, a headless "deny"), which is recorded like one given
 *   through the API;
 * - or resolve with undefined to leave the ask pending until someone answers it through the API
 *   (`POST /api/approvals/:id`) or it expires (SSE clients, headless callers that wait).
 * `signal` aborts when the call is cancelled or the ask was answered elsewhere; a surface stops asking then.
 */
export interface ApprovalResponder {
  /**
   * Set when nobody can be asked on this surface (a CLI without a terminal, an MCP client without elicitation, a
   * caller that does not wait): a sentence saying so and what could help there (e.g. "rerun with --yes"). The gate
   * then stores no ask and refuses the call at once with `denied_by_policy`, naming the policy's reason — there is
   * no approval id nobody could answer. `answer` is not called.
   */
  readonly unattended?: string;
  answer(request: ApprovalRequestView, signal: AbortSignal): Promise<ApprovalAnswer | undefined>;
}

/**
 * Whether allow_always can apply to this ask: not when an explicit ask (or deny) rule asked, since an allow rule
 * never overrides a stricter matching rule.
 */
export function allowsAlways(record: Pick<ApprovalRecord, "rule" | "alwaysRefusal">): boolean {
  if (record.alwaysRefusal) return false;
  const rule = record.rule as { decision?: string } | null;
  return !rule || rule.decision === "allow";
}

/** An ask could not be answered: it is already decided, expired or used (HTTP 409). */
export class ApprovalConflictError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ApprovalConflictError");
  override readonly name = "ApprovalConflictError";
  readonly code = "approval_conflict";
  constructor(
    message: string,
    readonly approval?: ApprovalRecord,
  ) {
    super(message);
  }

  /** The approval's current status, when known (`{status}`). */
  get details(): { status: string } | undefined {
    return this.approval ? { status: this.approval.status } : undefined;
  }
}

/** Options of the ApprovalService. */
export interface ApprovalServiceOptions {
  repository: ApprovalRepository;
  settings: ToolSettingsService;
  dataDir: string;
  logger: Logger;
  /** How long an ask waits; default TOOLHOST_APPROVAL_TIMEOUT_SECONDS or 15 minutes. */
  timeoutMs?: number;
  /**
   * After how long without a heartbeat a suspended turn's process counts as gone, so another may resume it;
   * default TOOLHOST_APPROVAL_STALE_MS or 15 s.
   */
  staleMs?: number;
  /** How often a waiting process shows it is alive and polls for answers given elsewhere; default 2 s. */
  pollMs?: number;
  env?: NodeJS.ProcessEnv;
}

/**
 * The decision an admin locked for the user as a floor (`ask` or `deny` in the locked `approval` setting) when the
 * user's own allow rules could loosen, else undefined.
 */
export function lockedApprovalFloor(descriptor: {
  lockedKeys: string[];
  parameters: Record<string, unknown>;
}): "ask" | "deny" | undefined {
  if (!descriptor.lockedKeys.includes(APPROVAL_SETTING)) return undefined;
  const value = descriptor.parameters[APPROVAL_SETTING];
  return value === "ask" || value === "deny" ? value : undefined;
}

/** Who the CLI acts as when it answers or changes settings: `cli:<os user>`. */
export function cliActor(): string {
  let name = "unknown";
  try {
    name = userInfo().username;
  } catch {
    // no passwd entry (containers)
  }
  return `cli:${name}`;
}
