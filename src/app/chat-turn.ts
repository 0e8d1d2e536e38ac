/**
 * Running one chat turn: loads the chat's history, opens its sub-agent tree, drives the tool loop through the
 * approval gate (and, under a lease, the journal), merges loop and sub-agent events into one ordered stream, and
 * stores the user message with the loop's complete new messages in one transaction — or leaves the turn suspended
 * for an approval, or to the instance that took it over.
 */
import type { AgentService, AgentTurn } from "../agents/service.js";
import type { ToolRuntime } from "../core/runtime.js";
import type { Logger } from "../core/types.js";
import type { LoopEvent } from "../loop/events.js";
import { runToolLoop } from "../loop/run-tool-loop.js";
import type { ConversationMessage, ProviderAdapter, ProviderName } from "../providers/types.js";
import type { Chat, ChatRepository } from "../storage/repositories.js";
import { type Lease, StaleLeaseError } from "../storage/turn-lease-records.js";
import { ApprovalGate } from "./approvals/gate.js";
import { type ApprovalResponder, type ApprovalService, isSuspension } from "./approvals/service.js";
import { ChatTurnKeeper, type SuspendedTurnState } from "./approvals/turns.js";
import { type AdapterFactory, type ChatTurnEvent, chatSystemPrompt, toConversationMessage } from "./chat-types.js";
import type { TurnCoordinator, TurnStopReason } from "./turn-coordinator.js";
import { JournalGate, LeaseTreeJournal, type TurnEventLog } from "./turn-journal.js";

/** What a chat turn runs with: the chat service's dependencies and its rule for calls that may run again. */
export interface ChatTurnDeps {
  chats: ChatRepository;
  runtime: ToolRuntime;
  logger: Logger | undefined;
  env: NodeJS.ProcessEnv;
  maxIterations: number;
  adapterFactory: AdapterFactory;
  approvals: ApprovalService | undefined;
  agents: AgentService | undefined;
  turns: TurnCoordinator | undefined;
  /** Whether an unfinished call of this tool may run again after a takeover. */
  rerunnable(name: string): boolean;
}

/** Where a resumed turn picks up: the stored step it stopped in (and the suspended turn's id, when it had one). */
export interface ChatTurnResume {
  /** The suspended turn's id (an approval resume), absent for a takeover from the journal. */
  turnId?: string;
  /** The step to continue: its iteration count and the messages it had already added. */
  step: SuspendedTurnState["step"];
}

/** A turn run under a lease: its event log, why it was stopped (if it was), and the agent tree it adopts. */
export interface OwnedTurn {
  /** The chat's turn lease; messages are stored only while it still has its epoch. */
  lease: Lease;
  /** The turn's numbered, stored events; the turn pushes `done` itself, together with the end of the lease. */
  log: TurnEventLog;
  /** Why the lease's owner stopped the turn (cancel, lost lease, handover), or undefined while it runs. */
  stopped: () => TurnStopReason | undefined;
  /** Taking a turn over: the root agent of its tree (its running sub-agents resume here). */
  adoptRootId?: string;
}

/** One chat turn to run: the chat, the provider and model it runs on, who sends which message, and how it runs. */
export interface ChatTurnOptions {
  /** The chat the turn belongs to (its id, working directory and title). */
  chat: Chat;
  provider: ProviderName;
  /** The provider's adapter, already built for `provider`. */
  adapter: ProviderAdapter;
  model: string;
  /** The user the turn runs for (approvals, sub-agents and tool calls are theirs). */
  userId: string;
  /** The message that starts the turn; stored with the turn's messages once it completes something. */
  userMessage: ConversationMessage;
  /** Stops the turn; a suspension reason (`isSuspension`) keeps pending asks pending. */
  signal?: AbortSignal | undefined;
  /** How this surface answers asks (`TurnOptions.responder`); absent, asks stay pending for an answer via the API. */
  responder?: ApprovalResponder | undefined;
  /** Continue a stored step instead of asking the provider afresh. */
  resume?: ChatTurnResume | undefined;
  /** The turn runs under a lease, its events logged. */
  owned?: OwnedTurn | undefined;
}

/**
 * Runs a chat turn and yields its events, `done` last and only once the messages are stored (or the turn was left
 * suspended, or moved to another instance). Failures of the turn (the model stream, storing its messages, a lost lease) arrive
 * as `error` events before `done`; reading the chat's history first may throw the repository's errors.
 */
export async function* runChatTurn(
  deps: ChatTurnDeps,
  turn: ChatTurnOptions,
): AsyncGenerator<ChatTurnEvent, void, undefined> {
  const { chat, provider, adapter, model, userId, userMessage, signal, responder, resume, owned } = turn;
  const history: ConversationMessage[] = [];
  for (const row of await deps.chats.messages(chat.id)) {
    const message = toConversationMessage(row.content);
    if (message) history.push(message);
  }
  const approvals = deps.approvals;
  const keeper = approvals
    ? new ChatTurnKeeper(
        approvals.repository,
        approvals.instanceId,
        { chatId: chat.id, userId, userMessage },
        resume?.turnId ? { turnId: resume.turnId, iterations: resume.step.iterations } : undefined,
      )
    : undefined;
  const gate =
    approvals && keeper
      ? new ApprovalGate({
          service: approvals,
          runtime: deps.runtime,
          userId,
          chatId: chat.id,
          workingDirectory: chat.workingDirectory,
          turn: keeper,
          ...(responder ? { responder } : {}),
        })
      : undefined;
  const content = userMessage.role === "user" ? userMessage.content : "";
  // Loop events and sub-agent events meet in one queue; the loop's `done` is held back until the turn's
  // sub-agents have stopped, so it is always the last event.
  const queue = new EventQueue<ChatTurnEvent>();
  let agentTurn: AgentTurn | undefined;
  if (deps.agents) {
    try {
      agentTurn = await deps.agents.openTurn({
        userId,
        chatId: chat.id,
        provider,
        model,
        adapter,
        adapterFactory: deps.adapterFactory,
        env: deps.env,
        workingDirectory: chat.workingDirectory,
        task: content,
        signal,
        emit: (event) => queue.push(event),
        ...(gate ? { gate } : {}),
        // A turn with a lease makes its tree durable: its running agents move with the turn to another instance.
        ...(owned
          ? {
              journal: new LeaseTreeJournal(deps.turns!.repository, owned.lease, (name) => deps.rerunnable(name)),
              ...(owned.adoptRootId ? { adoptRootId: owned.adoptRootId } : {}),
            }
          : {}),
        systemPrompt: (template, agent) =>
          `${template.systemPrompt}\n\n${chatSystemPrompt(chat.workingDirectory).replace(/^You are a helpful assistant\. /, "")}\n\nYour agent id is ${agent.id} (depth ${agent.depth}); agent ${agent.parentId} spawned you.`,
      });
    } catch (error) {
      deps.logger?.error(
        { err: (error as Error)?.stack ?? String(error), chatId: chat.id },
        "opening the agent tree failed",
      );
    }
  }
  // Every call of the root loop is journaled before it runs and when it ends (fenced by the lease), so another
  // instance taking the turn over knows what ran (and which agent tree to resume).
  const loopGate = owned
    ? new JournalGate({
        ...(gate ? { inner: gate } : {}),
        repository: deps.turns!.repository,
        lease: owned.lease,
        userMessage,
        ...(agentTurn ? { agentRootId: agentTurn.rootId } : {}),
      })
    : gate;
  const pump = async () => {
    let final: LoopEvent | undefined;
    try {
      for await (const event of runToolLoop({
        adapter,
        model,
        system: chatSystemPrompt(chat.workingDirectory),
        messages: [...history, userMessage, ...(resume?.step.added ?? [])],
        runtime: deps.runtime,
        userId,
        chatId: chat.id,
        workingDirectory: chat.workingDirectory,
        maxIterations: deps.maxIterations,
        signal,
        ...(loopGate ? { gate: loopGate } : {}),
        ...(resume ? { resume: resume.step } : {}),
        ...(agentTurn ? { services: agentTurn.services, beforeModelTurn: agentTurn.beforeModelTurn } : {}),
      })) {
        if (event.type === "usage") {
          await agentTurn?.recordUsage(event.inputTokens, event.outputTokens).catch(() => {});
        }
        if (event.type === "done") final = event;
        else queue.push(event);
      }
    } finally {
      if (agentTurn) {
        const reason = final?.type === "done" ? final.reason : "error";
        const status =
          reason === "text"
            ? "completed"
            : reason === "aborted"
              ? "cancelled"
              : reason === "max_iterations"
                ? "max_turns"
                : "error";
        await agentTurn
          .finish(status)
          .catch((error) =>
            deps.logger?.error({ err: String(error), chatId: chat.id }, "closing the agent tree failed"),
          );
      }
      if (final) queue.push(final);
      queue.close();
    }
  };
  void pump();
  // Stores the turn's last event (its done) with the end of its lease, fenced: from here no instance runs the turn.
  // Unless it is suspended, its approval state goes in the same transaction (no sweep resumes it afterwards).
  const endLease = async (last: LoopEvent) => {
    if (!owned) return;
    const ending = !suspended();
    await keeper?.settled();
    await owned.log
      .finish(last, ending ? (trx) => keeper?.finishWithin(trx) ?? Promise.resolve() : undefined)
      .catch((error) => deps.logger?.error({ err: String(error), chatId: chat.id }, "ending the turn's lease failed"));
  };
  // Suspended, not ended: the signal asked to keep asks pending (client left, server stopping) and one is. The
  // turn's state stays stored and released; an answer resumes it (ApprovalService.wakeTurn), which stores it then.
  const suspended = () => isSuspension(signal) && keeper?.persisted === true && gate?.leftPending === true;
  try {
    for await (const event of queue) {
      if (event.type !== "done") {
        yield event;
        continue;
      }
      // The turn's file reads are stored before it ends: the chat's next turn may run on another instance.
      await deps.runtime.ledger
        .flush?.()
        .catch((error: unknown) =>
          deps.logger?.warn({ err: String(error), chatId: chat.id }, "storing the turn's file reads failed"),
        );
      if (suspended()) {
        // The lease ends here; the suspended turn's stored state keeps the chat busy until an answer resumes it
        // (which takes a lease of its own), on this instance or another.
        await endLease(event);
        yield event;
        continue;
      }
      // A turn that completed nothing (stream failed or was cancelled before the first full step) stores nothing,
      // so a retry does not leave two user messages in a row; otherwise the user message and the complete steps
      // go in together.
      const completedSomething =
        event.messages.length > 0 || event.reason === "text" || event.reason === "max_iterations";
      const gone = owned?.stopped();
      if (gone === "handed_over" || gone === "lease_lost") {
        // Another instance owns the turn now: it stores the turn's messages, not this one.
        yield {
          type: "error",
          code: gone,
          message:
            gone === "handed_over"
              ? "This server is shutting down; another instance continues the turn. Follow it with GET /api/chats/{id}/events."
              : LEASE_LOST_MESSAGE,
        };
        yield { ...event, reason: "error" };
        return;
      }
      if (completedSomething) {
        const messages = [userMessage, ...event.messages].map((m) => ({ role: m.role, content: m }));
        try {
          // The messages, the last events, the end of the lease and the removal of the approval state land in one
          // transaction (fenced): killed before it commits, the turn is taken over (or resumed) and stored once by
          // its next owner; after, it is over.
          await keeper?.settled();
          if (owned) {
            const stored = await owned.log.finish(event, async (trx) => {
              await deps.chats.append(chat.id, messages, undefined, trx);
              await keeper?.finishWithin(trx);
            });
            if (!stored) throw new StaleLeaseError(LEASE_LOST_MESSAGE);
          } else await deps.chats.append(chat.id, messages, (trx) => keeper?.finishWithin(trx) ?? Promise.resolve());
        } catch (error) {
          if (error instanceof StaleLeaseError) {
            yield { type: "error", code: "lease_lost", message: error.message };
            yield { ...event, reason: "error" };
            return;
          }
          deps.logger?.error(
            { err: (error as Error)?.stack ?? String(error), chatId: chat.id },
            "storing chat messages failed",
          );
          yield {
            type: "error",
            code: "internal_error",
            message: "The turn ran but its messages could not be stored.",
          };
          // The turn ends here, lease and all: another instance taking it over would run it again.
          const failed: LoopEvent = { ...event, reason: "error" };
          await endLease(failed);
          yield failed;
          return;
        }
        // The messages are stored: a title that cannot be stored is logged, never a reason to run the turn again.
        if (!chat.title) {
          await deps.chats
            .update(userId, chat.id, { title: chatTitleFrom(content) })
            .catch((error) =>
              deps.logger?.warn({ err: String(error), chatId: chat.id }, "storing the chat's title failed"),
            );
        }
        yield event;
        continue;
      }
      // The last events (done included) and the end of the lease land together.
      await endLease(event);
      yield event;
    }
  } finally {
    await (suspended() ? keeper?.release() : keeper?.finish())?.catch((error) =>
      deps.logger?.error({ err: String(error), chatId: chat.id }, "releasing or removing a turn's state failed"),
    );
  }
}

/** What a turn's stream says when another instance took the turn over. */
const LEASE_LOST_MESSAGE = "Another instance took this turn over; follow it with GET /api/chats/{id}/events.";

/** An unbounded async queue: `push` from anywhere, iterate once; iteration ends after `close()` and a drain. */
class EventQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  push(item: T): void {
    if (this.#closed) return;
    this.#items.push(item);
    this.#wake?.();
    this.#wake = undefined;
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
    this.#wake = undefined;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }
}

/** A chat's title from its first message: one line of at most 80 characters, without control characters. */
function chatTitleFrom(content: string): string {
  return content
    .replace(/[\u0000-\u001f\u007f]+/g, " ")
    .trim()
    .slice(0, 80);
}
