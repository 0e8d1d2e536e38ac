/**
 * Chat turns, for the HTTP service and the CLI alike. A chat binds a working directory, a provider and a model; each
 * turn loads the chat's provider-neutral history, runs the tool loop through the provider's adapter, and appends the
 * user message and the loop's complete new messages in one transaction, so history stays consistent when a stream
 * breaks or the caller cancels.
 *
 * This module holds the chats (create, read, update, delete) and turn ownership (prepare, cancel, run under a lease,
 * resume after an approval, take over); chat-turn.ts runs a turn; chat-types.ts holds the shared shapes.
 */

import type { AgentService } from "../agents/service.js";
import { readConfig } from "../core/config.js";
import { MissingCredentialsError } from "../core/credentials.js";
import { NotFoundError, ToolArgumentError } from "../core/errors.js";
import { ownerIsGone } from "../core/instance.js";
import type { ToolRuntime } from "../core/runtime.js";
import type { Logger } from "../core/types.js";
import { DEFAULT_MAX_ITERATIONS } from "../loop/run-tool-loop.js";
import type { ConversationMessage, ProviderAdapter } from "../providers/types.js";
import type { ApprovalTurnRecord } from "../storage/approvals.js";
import type { Chat, ChatRepository } from "../storage/repositories.js";
import { type Lease, LeaseBusyError, StaleLeaseError } from "../storage/turn-lease-records.js";
import { type ApprovalService, TurnSuspended } from "./approvals/service.js";
import type { SuspendedTurnState } from "./approvals/turns.js";
import { parseChatId } from "./chat-id.js";
import { type ChatTurnDeps, type ChatTurnOptions, runChatTurn } from "./chat-turn.js";
import {
  type AdapterFactory,
  CHAT_PROVIDERS,
  ChatBusyError,
  ChatConfigError,
  type ChatMessageView,
  type ChatServiceOptions,
  type ChatTurnEvent,
  type ChatWithMessages,
  type CreateChatInput,
  DEFAULT_CHAT_MODELS,
  defaultAdapterFactory,
  type PreparedTurn,
  parseProvider,
  type TurnOptions,
  toConversationMessage,
} from "./chat-types.js";
import type { TurnCoordinator, TurnStopReason } from "./turn-coordinator.js";
import { resumeStepFromJournal, type TakeoverState, TurnEventLog } from "./turn-journal.js";
import { type BindingCaller, WorkingDirectoryBinder } from "./working-directory.js";

/** Chat creation, reading and turn orchestration over the ChatRepository and the tool loop. */
export class ChatService {
  readonly #chats: ChatRepository;
  readonly #runtime: ToolRuntime;
  readonly #logger: Logger | undefined;
  readonly #env: NodeJS.ProcessEnv;
  readonly #binder: WorkingDirectoryBinder;
  readonly #maxIterations: number;
  readonly #adapterFactory: AdapterFactory;
  readonly #approvals: ApprovalService | undefined;
  readonly #agents: AgentService | undefined;
  readonly #running = new Set<string>();
  readonly #turns: TurnCoordinator | undefined;
  readonly #turnDeps: ChatTurnDeps;

  constructor(options: ChatServiceOptions) {
    this.#chats = options.chats;
    this.#runtime = options.runtime;
    this.#logger = options.logger;
    this.#env = options.env ?? process.env;
    const config = readConfig(this.#env);
    this.#binder =
      options.binder ??
      new WorkingDirectoryBinder(options.chatRoots === undefined ? config.chatRoots : options.chatRoots);
    this.#maxIterations = options.maxIterations ?? config.chatMaxIterations ?? DEFAULT_MAX_ITERATIONS;
    this.#adapterFactory = options.adapterFactory ?? defaultAdapterFactory;
    this.#approvals = options.approvals;
    this.#agents = options.agents;
    this.#turns = options.turns;
    this.#turns?.setTakeover((lease) => this.takeOver(lease));
    this.#turnDeps = {
      chats: this.#chats,
      runtime: this.#runtime,
      logger: this.#logger,
      env: this.#env,
      maxIterations: this.#maxIterations,
      adapterFactory: this.#adapterFactory,
      approvals: this.#approvals,
      agents: this.#agents,
      turns: this.#turns,
      rerunnable: (name) => this.#rerunnable(name),
    };
  }

  /** The working-directory binder this service checks chats with. */
  get binder(): WorkingDirectoryBinder {
    return this.#binder;
  }

  /**
   * Creates a chat for the user, binding its directory through the binder as `caller` (default: an admin
   * operator whose relative paths resolve against the process working directory — the CLI and library case).
   * Throws ToolArgumentError for an unknown provider, an empty model, a bad directory or a taken `id`;
   * ChatConfigError when the provider is not configured (no API key: the message names the variable);
   * AccessDeniedError for a directory the caller may not bind.
   */
  async createChat(
    userId: string,
    input: CreateChatInput,
    caller: Omit<BindingCaller, "userId"> = { admin: true, base: process.cwd() },
  ): Promise<Chat> {
    const provider = parseProvider(input.provider);
    const model = input.model?.trim();
    if (!model)
      throw new ToolArgumentError("model must be a non-empty model id, e.g. gpt-5.4-mini.", { argument: "model" });
    const workingDirectory = this.#binder.bind(input.workingDirectory, { ...caller, userId });
    // A provider without a key fails now, not at the chat's first message.
    try {
      this.#adapterFactory(provider, this.#env);
    } catch (error) {
      throw new ChatConfigError((error as Error).message ?? String(error));
    }
    if (input.id !== undefined) {
      parseChatId(input.id);
      if (await this.#chats.exists(input.id))
        throw new ToolArgumentError(`A chat with id "${input.id}" already exists.`);
    }
    return this.#chats.create({ userId, id: input.id, title: input.title ?? null, workingDirectory, provider, model });
  }

  /**
   * Deletes the user's chat and its messages. Returns false when the user has no such chat; throws ChatBusyError
   * while a turn of it runs in this process (cancel the turn first).
   */
  async deleteChat(userId: string, chatId: string): Promise<boolean> {
    // Ownership before state: another user's running chat answers like a missing one (false, a 404), never
    // chat_busy, which would tell them the id exists.
    const held = this.#running.has(chatId) || (!this.#turns && (await this.#approvals?.repository.activeTurn(chatId)));
    if (held && (await this.#chats.get(userId, chatId))) {
      throw new ChatBusyError(
        `Chat ${chatId} is running a turn; cancel it (POST /api/chats/${chatId}/cancel) or wait for it to finish before deleting.`,
      );
    }
    // A turn holding the chat's lease (on any instance), or waiting for approvals, is checked in the delete's own
    // transaction: a turn starting at the same moment cannot slip in between (it then finds no chat).
    const turns = this.#turns;
    let deleted: boolean;
    try {
      deleted = await this.#chats.delete(
        userId,
        chatId,
        turns ? (trx) => turns.repository.assertIdle(trx, chatId) : undefined,
      );
    } catch (error) {
      if (error instanceof LeaseBusyError) throw new ChatBusyError(error.message);
      throw error;
    }
    if (deleted) await this.#turns?.repository.forget(chatId);
    return deleted;
  }

  /** The user's chat with its messages, or undefined (also for another user's chat). */
  async getChat(userId: string, chatId: string): Promise<ChatWithMessages | undefined> {
    const chat = await this.#chats.get(userId, chatId);
    if (!chat) return undefined;
    const rows = await this.#chats.messages(chat.id);
    const messages: ChatMessageView[] = [];
    for (const row of rows) {
      const message = toConversationMessage(row.content);
      if (message) messages.push({ ...message, id: row.id, seq: row.seq, createdAt: row.createdAt });
    }
    return { ...chat, messages };
  }

  /** Updates the provider and/or model of the user's chat (CLI `--provider`/`--model` on an existing chat). */
  async updateChat(userId: string, chatId: string, fields: { provider?: string; model?: string }): Promise<void> {
    const update: { provider?: string; model?: string } = {};
    if (fields.provider !== undefined) update.provider = parseProvider(fields.provider);
    if (fields.model !== undefined) update.model = fields.model;
    await this.#chats.update(userId, chatId, update);
  }

  /**
   * Checks a turn can run and reserves the chat. Throws NotFoundError (no such chat for this user),
   * ToolArgumentError (empty content), AccessDeniedError (bound directory no longer within the chat roots),
   * ChatConfigError (provider not configured, e.g. missing API key: the message names the variable) or
   * ChatBusyError (another turn of this chat is running in this process).
   */
  async prepareTurn(userId: string, chatId: string, content: string, options: TurnOptions = {}): Promise<PreparedTurn> {
    const chat = await this.#chats.get(userId, chatId);
    if (!chat) throw new NotFoundError(`No chat "${chatId}" for this user. Create one with POST /api/chats.`);
    if (typeof content !== "string" || content.trim() === "") {
      throw new ToolArgumentError("content must be a non-empty message.", { argument: "content" });
    }
    this.#binder.assertBound(chat);
    if (!chat.provider) {
      throw new ToolArgumentError(
        `Chat ${chat.id} has no provider yet. Choose one: toolhost chat --chat ${chat.id} --provider ${CHAT_PROVIDERS.join("|")}.`,
        { argument: "provider" },
      );
    }
    const provider = parseProvider(chat.provider);
    const model = chat.model ?? DEFAULT_CHAT_MODELS[provider];
    let adapter: ProviderAdapter;
    try {
      adapter = this.#adapterFactory(provider, this.#env);
    } catch (error) {
      throw new ChatConfigError((error as Error).message ?? String(error));
    }
    const userMessage: ConversationMessage = { role: "user", content };
    const turns = this.#turns;
    let lease: Lease | undefined;
    if (turns) {
      // Decided in one transaction on the database: two posts at the same moment, on one instance or two, cannot
      // both take the chat.
      try {
        const state: TakeoverState = { version: 1, userMessage };
        lease = await turns.acquire(chat.id, userId, state);
      } catch (error) {
        if (error instanceof LeaseBusyError) throw new ChatBusyError(error.message);
        throw error;
      }
    } else {
      if (this.#running.has(chat.id)) {
        throw new ChatBusyError(`Chat ${chat.id} is already running a turn; wait for it to finish or cancel it.`);
      }
      const suspended = await this.#approvals?.repository.activeTurn(chat.id);
      if (suspended) {
        throw new ChatBusyError(
          `Chat ${chat.id} has a turn waiting for approvals (GET /api/chats/${chat.id}/approvals); answer them, cancel the turn (POST /api/chats/${chat.id}/cancel), or wait until they expire, before sending another message.`,
        );
      }
    }
    this.#running.add(chat.id);
    let released = false;
    const release = () => {
      if (!released) this.#running.delete(chat.id);
      released = true;
    };
    const service = this;
    const ids = { last: 0 };
    return {
      chat,
      get lastEventId() {
        return ids.last;
      },
      cancel: () => {
        if (!released && lease && turns) void turns.repository.release(chat.id, lease.epoch).catch(() => {});
        release();
      },
      async *run(signal?: AbortSignal) {
        try {
          yield* service.#runOwned(
            { chat, provider, adapter, model, userId, userMessage, signal, responder: options.responder },
            lease,
            ids,
          );
        } finally {
          release();
        }
      },
    };
  }

  /**
   * Cancels the chat's running turn wherever it runs (the owner stops it within a second: its model stream, tools
   * and their processes). Throws NotFoundError for another user's or an unknown chat. `cancelled` is false when no
   * turn was running.
   */
  async cancelTurn(userId: string, chatId: string): Promise<{ cancelled: boolean; turnId: string | null }> {
    const chat = await this.#chats.get(userId, chatId);
    if (!chat) throw new NotFoundError(`No chat "${chatId}" for this user.`);
    if (this.#turns) {
      const running = await this.#turns.cancel(chat.id);
      if (running.cancelled) return running;
    }
    const suspended = await this.#cancelSuspended(chat.id);
    if (!suspended) return { cancelled: false, turnId: null };
    // Answered a moment ago, it may have been resumed between the two looks (it took the lease after the first): the
    // running turn is cancelled too. (A resume that takes the lease after this reads the cancelled state.)
    await this.#turns?.cancel(chat.id);
    return { cancelled: true, turnId: suspended };
  }

  /** Cancels the asks of a turn that waits for approvals (at `at`), which no answer could resume any more. */
  async #cancelAsksOf(turn: ApprovalTurnRecord, at: Date): Promise<void> {
    const repository = this.#approvals?.repository;
    if (!repository) return;
    for (const ask of await repository.listPending(turn.userId, turn.chatId))
      if (ask.turnId === turn.id) await repository.cancel(ask.id, at);
  }

  /**
   * Cancels the chat's turn that waits for approvals with no process running it (its client left, its server
   * stopped): its state is marked cancelled and its pending asks are cancelled, then it is woken, so whoever resumes
   * it (this instance at once, or another instance's sweep) ends it as a cancel ends a running turn, keeping its
   * complete steps. Returns its id, or undefined when none waits.
   */
  async #cancelSuspended(chatId: string): Promise<string | undefined> {
    const approvals = this.#approvals;
    const turn = await approvals?.repository.activeTurn(chatId);
    if (!approvals || !turn) return undefined;
    const at = new Date();
    await approvals.repository.updateTurnState(
      turn.id,
      (state: SuspendedTurnState) => ({ ...state, cancelled: true }),
      at,
    );
    await this.#cancelAsksOf(turn, at);
    await approvals.wakeTurn(turn.id);
    return turn.id;
  }

  /**
   * Runs a turn under its lease (when there is a coordinator): links the lease's stop (cancel, lost lease, handover)
   * to the turn's signal, numbers and stores its events, journals its calls, and stores its messages only while the
   * lease still has its epoch. Without a coordinator or lease, `turn` runs as it is. `ids.last` follows the id of
   * the last event stored.
   */
  async *#runOwned(
    turn: Omit<ChatTurnOptions, "owned">,
    lease: Lease | undefined,
    ids: { last: number },
    /** Taking a turn over: the root agent of its tree (its running sub-agents resume here). */
    adoptRootId?: string,
  ): AsyncGenerator<ChatTurnEvent, void, undefined> {
    const turns = this.#turns;
    if (!turns || !lease) {
      yield* runChatTurn(this.#turnDeps, turn);
      return;
    }
    const signal = turn.signal;
    const controller = new AbortController();
    let stopped: TurnStopReason | undefined;
    const stop = (reason: TurnStopReason) => {
      stopped ??= reason;
      // Handing over at shutdown suspends the turn: a pending ask stays pending (and its answer resumes the turn on
      // any instance); a turn that waits for no ask is taken over from its lease.
      controller.abort(reason === "handed_over" ? new TurnSuspended("server_stopping") : undefined);
    };
    // The caller's reason goes along: a suspension (the client left, the server stops) keeps pending asks pending.
    const onAbort = () => {
      stopped ??= "cancelled";
      controller.abort(signal?.reason);
    };
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
    const untrack = await turns.track(lease, stop);
    const log = new TurnEventLog(turns, lease, (error) => {
      if (error instanceof StaleLeaseError) stop("lease_lost");
    });
    let finished = false;
    try {
      for await (const event of runChatTurn(this.#turnDeps, {
        ...turn,
        signal: controller.signal,
        owned: { lease, log, stopped: () => stopped, ...(adoptRootId ? { adoptRootId } : {}) },
      })) {
        // A call the handover cut is the next owner's to report (interrupted, or its result when it runs again):
        // this stream does not say "aborted" for it first.
        if (stopped === "handed_over" && event.type === "tool_result" && !event.ok && event.error.code === "aborted")
          continue;
        // `done` was numbered and stored with the end of the lease by the turn itself.
        if (event.type === "done") {
          ids.last = log.isLast(event) ? log.lastId : log.push(event);
          finished = true;
        } else ids.last = log.push(event);
        yield event;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      untrack();
      if (!finished) await log.flush().catch(() => {});
    }
  }

  /**
   * Resumes a turn that was waiting for approvals when its process stopped (called by the approval service once it
   * has claimed the turn): the step's calls are not requested from the provider again; answered calls run (once)
   * or are fed back as denied, and the turn continues and is stored as if it had never stopped. Events go nowhere
   * (no client is attached); read the chat afterwards. Never throws: failures are logged.
   */
  async resumeTurn(turn: ApprovalTurnRecord): Promise<void> {
    const approvals = this.#approvals;
    const state = turn.state as SuspendedTurnState;
    try {
      const chat = await this.#chats.get(turn.userId, turn.chatId);
      if (!chat || state?.version !== 1 || this.#running.has(chat.id)) {
        if (!chat || state?.version !== 1) await approvals?.repository.deleteTurn(turn.id);
        return;
      }
      let lease: Lease | undefined;
      if (this.#turns) {
        try {
          lease = await this.#turns.repository.acquire({
            chatId: chat.id,
            userId: turn.userId,
            owner: this.#turns.instanceId,
            leaseMs: this.#turns.leaseMs,
            state: { version: 1, userMessage: state.userMessage, step: state.step } satisfies TakeoverState,
            resumingSuspended: true,
            holderIsGone: ownerIsGone,
          });
        } catch (error) {
          if (error instanceof LeaseBusyError) return;
          throw error;
        }
      }
      // A turn cancelled while it waited ends at once (its complete steps stored), as a cancelled running turn does.
      // Its state is read again now that it holds the lease: a cancel made while it was being claimed either marked
      // the state before this read, or finds the lease and stops the running turn.
      const fresh = lease ? ((await approvals?.repository.getTurn(turn.id))?.state as SuspendedTurnState) : undefined;
      const cancelled = state.cancelled === true || fresh?.cancelled === true;
      let stored: Omit<ChatTurnOptions, "owned"> | undefined;
      let unstartable: unknown;
      try {
        stored = {
          ...this.#storedTurn(chat, turn.userId, state.userMessage, cancelled),
          ...(cancelled ? { signal: AbortSignal.abort() } : {}),
        };
      } catch (error) {
        unstartable = error;
      }
      if (!stored) {
        // It cannot run here (e.g. this instance has no key for the chat's provider), nor, likely, anywhere: it
        // ends, as a taken-over turn that cannot start does, instead of keeping the chat busy while every sweep
        // claims it and fails again.
        this.#logger?.error({ err: String(unstartable), turnId: turn.id }, "resuming a turn failed");
        if (lease) await this.#endUnstartable(lease, unstartable);
        if (approvals) {
          await this.#cancelAsksOf(turn, new Date());
          await approvals.repository.deleteTurn(turn.id);
        }
        return;
      }
      this.#running.add(chat.id);
      try {
        for await (const event of this.#runOwned({ ...stored, resume: { turnId: turn.id, step: state.step } }, lease, {
          last: 0,
        })) {
          if (event.type === "error")
            this.#logger?.warn({ chatId: chat.id, ...event }, "resumed turn reported an error");
        }
      } finally {
        this.#running.delete(chat.id);
      }
    } catch (error) {
      this.#logger?.error({ err: (error as Error)?.stack ?? String(error), turnId: turn.id }, "resuming a turn failed");
    } finally {
      approvals?.resumed(turn.id);
    }
  }

  /**
   * Continues a turn whose owner died or handed it over (the coordinator claimed its lease for this instance): the
   * step that was running resumes from the journal — finished calls are not run again, an unfinished call with side
   * effects is fed back as interrupted, an unfinished read-only call runs again — and the turn is stored as if it had
   * never moved. Its events go on the chat's event stream (GET /api/chats/:id/events). A turn that waits for
   * approvals is left to the approval service (its lease is freed). Never throws: failures are logged.
   */
  async takeOver(lease: Lease & { cancelRequested?: boolean }): Promise<void> {
    const turns = this.#turns;
    if (!turns) return;
    const state = lease.state as TakeoverState | null;
    let running = false;
    try {
      const chat = await this.#chats.get(lease.userId, lease.chatId);
      const suspended = chat ? await this.#approvals?.repository.activeTurn(chat.id) : undefined;
      if (!chat || state?.version !== 1 || suspended || this.#running.has(chat.id)) {
        if (!this.#running.has(lease.chatId)) await turns.repository.release(lease.chatId, lease.epoch);
        return;
      }
      // Cancelled while nobody ran it (its owner had died): it ends here instead of resuming. It still goes through
      // the turn, already cancelled, so it ends as any cancelled turn does: the step it was in keeps its calls, each
      // with a result (cancelled, or interrupted for one that was running), its sub-agents stop, and it is stored.
      const cancelled = lease.cancelRequested === true;
      const stored = this.#storedTurn(chat, lease.userId, state.userMessage, cancelled);
      const step = state.step
        ? resumeStepFromJournal(
            state.step,
            await turns.repository.journal(lease.turnId),
            (name) => this.#rerunnable(name),
            await turns.repository.reportedResults(lease.chatId, lease.turnId),
          )
        : undefined;
      this.#running.add(chat.id);
      running = true;
      try {
        for await (const event of this.#runOwned(
          { ...stored, ...(step ? { resume: { step } } : {}), ...(cancelled ? { signal: AbortSignal.abort() } : {}) },
          lease,
          { last: 0 },
          state.agentRootId,
        )) {
          if (event.type === "error")
            this.#logger?.warn({ chatId: chat.id, ...event }, "a turn taken over reported an error");
        }
      } finally {
        this.#running.delete(chat.id);
      }
    } catch (error) {
      this.#logger?.error(
        { err: (error as Error)?.stack ?? String(error), chatId: lease.chatId },
        "taking over a turn failed",
      );
      // The turn could not even start here (e.g. this instance has no key for the chat's provider): end it, so the
      // chat is not left busy with a lease that every instance would claim and fail again. Its followers get an
      // error and `done` on the chat's event stream; the lease ends (fenced: a newer owner is left alone).
      if (!running) await this.#endUnstartable(lease, error);
    }
  }

  /**
   * A stored turn continued with no client attached (resumed after an approval, or taken over): the chat's provider
   * (OpenAI when it has none) and model (the provider's default when it has none), and a new adapter for it. Throws
   * what the adapter factory throws (e.g. MissingCredentialsError when this instance has no key for the provider),
   * unless the turn is only `ending` (cancelled: it never asks the model, so it needs no key).
   */
  #storedTurn(
    chat: Chat,
    userId: string,
    userMessage: ConversationMessage,
    ending = false,
  ): Omit<ChatTurnOptions, "owned"> {
    const provider = parseProvider(chat.provider ?? "openai");
    let adapter: ProviderAdapter;
    try {
      adapter = this.#adapterFactory(provider, this.#env);
    } catch (error) {
      if (!ending) throw error;
      adapter = {
        name: provider,
        stream: () => {
          throw error;
        },
      };
    }
    return { chat, provider, adapter, model: chat.model ?? DEFAULT_CHAT_MODELS[provider], userId, userMessage };
  }

  /**
   * Ends a taken-over (or resumed) turn that could not start: stores `error` and `done`, ends the lease (fenced),
   * drops the journal.
   */
  async #endUnstartable(lease: Lease, error: unknown): Promise<void> {
    const turns = this.#turns;
    if (!turns) return;
    const code =
      error instanceof ChatConfigError || error instanceof MissingCredentialsError
        ? "provider_error"
        : "internal_error";
    const log = new TurnEventLog(turns, lease, () => {});
    const failed: ChatTurnEvent = {
      type: "error",
      code,
      message: `This instance could not continue the turn: ${(error as Error)?.message ?? String(error)}`,
    };
    const done: ChatTurnEvent = { type: "done", reason: "error", iterations: 0, messages: [] };
    log.push(failed);
    await log
      .finish(done)
      .catch((failure) =>
        this.#logger?.error({ err: String(failure), chatId: lease.chatId }, "ending a taken-over turn failed"),
      );
  }

  /**
   * Whether an unfinished call may run again after a takeover: a read-only tool, or agent_spawn and agent_wait (a
   * spawn run again waits for the agent it spawned before, found through the journal, instead of spawning another).
   */
  #rerunnable(name: string): boolean {
    if (this.#agents && (name === "agent_spawn" || name === "agent_wait")) return true;
    return this.#readOnly(name);
  }

  /** Whether a tool may safely run again after an interruption: declared read-only and not imported. */
  #readOnly(name: string): boolean {
    const tool = this.#runtime.registry.get(name);
    if (!tool || tool.settings.external !== undefined) return false;
    return tool.settings.annotations?.readOnlyHint === true;
  }
}
