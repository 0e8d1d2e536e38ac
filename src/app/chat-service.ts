/**
 * Chat turns, for the HTTP service and the CLI alike. A chat binds a working directory, a provider and a model; each
 * turn loads the chat's provider-neutral history, runs the tool loop through the provider's adapter, and appends the
 * user message and the loop's complete new messages in one transaction, so history stays consistent when a stream
 * breaks or the caller cancels.
 */

import type { AgentService, AgentStreamEvent, AgentTurn } from "../agents/service.js";
import { readConfig } from "../core/config.js";
import { BrandedError, errorBrand, NotFoundError, ToolArgumentError } from "../core/errors.js";
import type { ToolRuntime } from "../core/runtime.js";
import type { Logger } from "../core/types.js";
import type { LoopEvent } from "../loop/events.js";
import { DEFAULT_MAX_ITERATIONS, runToolLoop } from "../loop/run-tool-loop.js";
import { createProviderAdapter, PROVIDER_NAMES, PROVIDER_TABLE, providerCredentials } from "../providers/table.js";
import type { ConversationMessage, ProviderAdapter, ProviderName } from "../providers/types.js";
import type { ApprovalTurnRecord } from "../storage/approvals.js";
import type { Chat, ChatRepository } from "../storage/repositories.js";
import { type Lease, LeaseBusyError, StaleLeaseError } from "../storage/turn-leases.js";
import { ApprovalGate } from "./approvals/gate.js";
import { type ApprovalResponder, type ApprovalService, isSuspension, TurnSuspended } from "./approvals/service.js";
import { ChatTurnKeeper, type SuspendedTurnState } from "./approvals/turns.js";
import { ownerIsGone } from "./instance.js";
import type { TurnCoordinator, TurnStopReason } from "./turn-coordinator.js";
import {
  JournalGate,
  LeaseTreeJournal,
  resumeStepFromJournal,
  type TakeoverState,
  TurnEventLog,
} from "./turn-journal.js";
import { type BindingCaller, WorkingDirectoryBinder } from "./working-directory.js";

/** The providers a chat can use (every provider of the table). */
export const CHAT_PROVIDERS: readonly ProviderName[] = PROVIDER_NAMES;

/**
 * Model used when a CLI chat names none (TOOLHOST_CHAT_MODEL overrides for every provider), from the provider
 * table. The HTTP API always requires an explicit model. For `openai-chat` against a local server pass the
 * server's model name.
 */
export const DEFAULT_CHAT_MODELS: Record<ProviderName, string> = Object.fromEntries(
  PROVIDER_TABLE.map((entry) => [entry.id, entry.defaultModel]),
) as Record<ProviderName, string>;

/** A chat could not start a turn because its provider is not configured (e.g. a missing API key). */
export class ChatConfigError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ChatConfigError");
  override readonly name = "ChatConfigError";
  readonly code = "provider_not_configured";
}

/** Another turn of the same chat is running (on any instance sharing the database), or waits for approvals. */
export class ChatBusyError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ChatBusyError");
  override readonly name = "ChatBusyError";
  readonly code = "chat_busy";
}

/** Builds the provider adapter for a chat turn; throws when the provider is not configured. */
export type AdapterFactory = (provider: ProviderName, env: NodeJS.ProcessEnv) => ProviderAdapter;

/** Dependencies and knobs of a ChatService. */
export interface ChatServiceOptions {
  chats: ChatRepository;
  runtime: ToolRuntime;
  logger?: Logger;
  /** Where API keys, base URLs and the TOOLHOST_CHAT_* settings come from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /**
   * Decides which working directory a chat may bind (see app/working-directory.ts). Default: a binder over
   * `chatRoots`, else TOOLHOST_CHAT_ROOTS of `env`. The application context holds the one the server uses.
   */
  binder?: WorkingDirectoryBinder;
  /** Chat roots for the default binder (tests); ignored when `binder` is given. */
  chatRoots?: string[] | null;
  /** Model turns per chat turn; default TOOLHOST_CHAT_MAX_ITERATIONS or {@link DEFAULT_MAX_ITERATIONS}. */
  maxIterations?: number;
  /** Builds adapters; default the official-SDK adapters configured from `env`. */
  adapterFactory?: AdapterFactory;
  /**
   * The approval service: every call of a turn then goes through the approval gate, and a turn waiting for
   * approvals is stored so it can resume after a restart. Absent: calls run without a policy (library use).
   */
  approvals?: ApprovalService;
  /** Runs sub-agent trees (agent_spawn and friends); without it the agent tools refuse inside chat turns. */
  agents?: AgentService;
  /**
   * Turn ownership across instances (leases, cancel, stored events, journal, takeover): the application context's.
   * Absent (library use): busy is decided per process and events are not stored.
   */
  turns?: TurnCoordinator;
}

/** Per-turn options of prepareTurn. */
export interface TurnOptions {
  /**
   * How this surface answers asks (the CLI prompt; a headless "deny"). Absent: asks stay pending for an answer
   * through the API (`POST /api/approvals/:id`) until they expire; the SSE stream shows them.
   */
  responder?: ApprovalResponder;
}

/** What createChat accepts. */
export interface CreateChatInput {
  /** Caller-chosen id (CLI `--chat ID`); a UUID when absent. */
  id?: string;
  /**
   * Directory to bind: absolute, or relative to the caller's base (see BindingCaller). Must exist and be a
   * directory; the binder's rules apply (chat roots, admins).
   */
  workingDirectory?: string | null;
  provider: string;
  model: string;
  title?: string | null;
}

/** A stored message as the API returns it: the provider-neutral message plus its position and time. */
export type ChatMessageView = ConversationMessage & { id: string; seq: number; createdAt: string };

/** A chat with its messages in order. */
export interface ChatWithMessages extends Chat {
  messages: ChatMessageView[];
}

/**
 * Events of a chat turn: the loop's events, plus the events of its sub-agents (`agent_started`, `agent_finished`
 * and their tool and approval events, tagged with `agent`); `done` is yielded last, only after the messages are
 * stored.
 */
export type ChatTurnEvent = LoopEvent | AgentStreamEvent;

/** A turn that passed its checks (chat found, provider configured, chat not busy) and is ready to run. */
export interface PreparedTurn {
  chat: Chat;
  /**
   * Runs the turn. Aborting `signal` cancels the model stream and the running tools; the complete part of the
   * turn is still stored. Yields an `error {code: "internal_error"}` before `done` if storing fails. Must be
   * iterated to the end (it releases the chat on completion).
   */
  run(signal?: AbortSignal): AsyncGenerator<ChatTurnEvent, void, undefined>;
  /** Releases the chat without running (when the caller gives up before iterating). */
  cancel(): void;
  /** The stored id (per-chat seq, the SSE `id:`) of the event `run` yielded last; 0 when events are not stored. */
  readonly lastEventId: number;
}

/** The system prompt of a chat turn: announces the bound working directory, or that none is bound. */
export function chatSystemPrompt(workingDirectory: string | null): string {
  const where = workingDirectory
    ? `The working directory of this chat is ${workingDirectory}. Relative paths you pass to tools resolve against it, and paths in tool results are relative to it.`
    : "No working directory is bound to this chat: pass absolute paths to file tools.";
  return `You are a helpful assistant. You can call tools that run on the user's machine through Toolhost. ${where} Use the tools to look things up instead of guessing, and answer in plain text when you are done.`;
}

function toConversationMessage(content: unknown): ConversationMessage | undefined {
  if (!content || typeof content !== "object") return undefined;
  const m = content as { role?: unknown };
  if (m.role === "user" || m.role === "assistant" || m.role === "tool") return content as ConversationMessage;
  return undefined;
}

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
      if (!/^[A-Za-z0-9._-]{1,128}$/.test(input.id)) {
        throw new ToolArgumentError("A chat id uses 1–128 letters, digits, '.', '_' or '-'.", { argument: "id" });
      }
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
    const running = this.#running.has(chatId) || Boolean(await this.#turns?.repository.current(chatId));
    if (running && (await this.#chats.get(userId, chatId))) {
      throw new ChatBusyError(
        `Chat ${chatId} is running a turn; cancel it (or wait for it to finish) before deleting.`,
      );
    }
    const deleted = await this.#chats.delete(userId, chatId);
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
          `Chat ${chat.id} has a turn waiting for approvals (GET /api/chats/${chat.id}/approvals); answer them, or wait until they expire, before sending another message.`,
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
          yield* service.#runOwned(chat, provider, adapter, model, userId, userMessage, lease, ids, signal, {
            responder: options.responder,
          });
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
    if (!this.#turns) return { cancelled: false, turnId: null };
    return this.#turns.cancel(chat.id);
  }

  /**
   * Runs a turn under its lease (when there is a coordinator): links the lease's stop (cancel, lost lease, handover)
   * to the turn's signal, numbers and stores its events, journals its calls, and stores its messages only while the
   * lease still has its epoch.
   */
  async *#runOwned(
    chat: Chat,
    provider: ProviderName,
    adapter: ProviderAdapter,
    model: string,
    userId: string,
    userMessage: ConversationMessage,
    lease: Lease | undefined,
    ids: { last: number },
    signal: AbortSignal | undefined,
    extra: {
      responder?: ApprovalResponder;
      resume?: { turnId?: string; step: SuspendedTurnState["step"] };
      /** Taking a turn over: the root agent of its tree (its running sub-agents resume here). */
      adoptRootId?: string;
    },
  ): AsyncGenerator<ChatTurnEvent, void, undefined> {
    const turns = this.#turns;
    if (!turns || !lease) {
      yield* this.#runTurn(chat, provider, adapter, model, userId, userMessage, signal, extra.responder, extra.resume);
      return;
    }
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
    const untrack = turns.track(lease, stop);
    const log = new TurnEventLog(turns, lease, (error) => {
      if (error instanceof StaleLeaseError) stop("lease_lost");
    });
    let finished = false;
    try {
      for await (const event of this.#runTurn(
        chat,
        provider,
        adapter,
        model,
        userId,
        userMessage,
        controller.signal,
        extra.responder,
        extra.resume,
        { lease, log, stopped: () => stopped, ...(extra.adoptRootId ? { adoptRootId: extra.adoptRootId } : {}) },
      )) {
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
      const provider = parseProvider(chat.provider ?? "openai");
      const adapter = this.#adapterFactory(provider, this.#env);
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
      this.#running.add(chat.id);
      try {
        for await (const event of this.#runOwned(
          chat,
          provider,
          adapter,
          chat.model ?? DEFAULT_CHAT_MODELS[provider],
          turn.userId,
          state.userMessage,
          lease,
          { last: 0 },
          undefined,
          { resume: { turnId: turn.id, step: state.step } },
        )) {
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
  async takeOver(lease: Lease): Promise<void> {
    const turns = this.#turns;
    if (!turns) return;
    const state = lease.state as TakeoverState | null;
    try {
      const chat = await this.#chats.get(lease.userId, lease.chatId);
      const suspended = chat ? await this.#approvals?.repository.activeTurn(chat.id) : undefined;
      if (!chat || state?.version !== 1 || suspended || this.#running.has(chat.id)) {
        if (!this.#running.has(lease.chatId)) await turns.repository.release(lease.chatId, lease.epoch);
        return;
      }
      const provider = parseProvider(chat.provider ?? "openai");
      const adapter = this.#adapterFactory(provider, this.#env);
      const step = state.step
        ? await resumeStepFromJournal(state.step, await turns.repository.journal(lease.turnId), (name) =>
            this.#rerunnable(name),
          )
        : undefined;
      this.#running.add(chat.id);
      try {
        for await (const event of this.#runOwned(
          chat,
          provider,
          adapter,
          chat.model ?? DEFAULT_CHAT_MODELS[provider],
          lease.userId,
          state.userMessage,
          lease,
          { last: 0 },
          undefined,
          {
            ...(step ? { resume: { step } } : {}),
            ...(state.agentRootId ? { adoptRootId: state.agentRootId } : {}),
          },
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
    }
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

  async *#runTurn(
    chat: Chat,
    provider: ProviderName,
    adapter: ProviderAdapter,
    model: string,
    userId: string,
    userMessage: ConversationMessage,
    signal: AbortSignal | undefined,
    responder?: ApprovalResponder,
    resume?: { turnId?: string; step: SuspendedTurnState["step"] },
    owned?: { lease: Lease; log: TurnEventLog; stopped: () => TurnStopReason | undefined; adoptRootId?: string },
  ): AsyncGenerator<ChatTurnEvent, void, undefined> {
    const history: ConversationMessage[] = [];
    for (const row of await this.#chats.messages(chat.id)) {
      const message = toConversationMessage(row.content);
      if (message) history.push(message);
    }
    const approvals = this.#approvals;
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
            runtime: this.#runtime,
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
    if (this.#agents) {
      try {
        agentTurn = await this.#agents.openTurn({
          userId,
          chatId: chat.id,
          provider,
          model,
          adapter,
          adapterFactory: this.#adapterFactory,
          env: this.#env,
          workingDirectory: chat.workingDirectory,
          task: content,
          signal,
          emit: (event) => queue.push(event),
          ...(gate ? { gate } : {}),
          // A turn with a lease makes its tree durable: its running agents move with the turn to another instance.
          ...(owned
            ? {
                journal: new LeaseTreeJournal(this.#turns!.repository, owned.lease, (name) => this.#rerunnable(name)),
                ...(owned.adoptRootId ? { adoptRootId: owned.adoptRootId } : {}),
              }
            : {}),
          systemPrompt: (template, agent) =>
            `${template.systemPrompt}\n\n${chatSystemPrompt(chat.workingDirectory).replace(/^You are a helpful assistant\. /, "")}\n\nYour agent id is ${agent.id} (depth ${agent.depth}); agent ${agent.parentId} spawned you.`,
        });
      } catch (error) {
        this.#logger?.error(
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
          repository: this.#turns!.repository,
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
          runtime: this.#runtime,
          userId,
          chatId: chat.id,
          workingDirectory: chat.workingDirectory,
          maxIterations: this.#maxIterations,
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
              this.#logger?.error({ err: String(error), chatId: chat.id }, "closing the agent tree failed"),
            );
        }
        if (final) queue.push(final);
        queue.close();
      }
    };
    void pump();
    // Suspended, not ended: the signal asked to keep asks pending (client left, server stopping) and one is. The
    // turn's state stays stored and released; an answer resumes it (ApprovalService.wakeTurn), which stores it then.
    const suspended = () => isSuspension(signal) && keeper?.persisted === true && gate?.leftPending === true;
    try {
      for await (const event of queue) {
        if (event.type !== "done") {
          yield event;
          continue;
        }
        if (suspended()) {
          // The lease ends here; the suspended turn's stored state keeps the chat busy until an answer resumes it
          // (which takes a lease of its own), on this instance or another.
          if (owned) {
            owned.log.push(event);
            await owned.log
              .finish()
              .catch((error) =>
                this.#logger?.error({ err: String(error), chatId: chat.id }, "ending a suspended turn's lease failed"),
              );
          }
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
                : "Another instance took this turn over; follow it with GET /api/chats/{id}/events.",
          };
          yield { ...event, reason: "error" };
          return;
        }
        if (completedSomething) {
          try {
            await this.#chats.append(
              chat.id,
              [userMessage, ...event.messages].map((m) => ({ role: m.role, content: m })),
              owned ? (trx) => this.#turns!.repository.assertEpoch(trx, chat.id, owned.lease.epoch) : undefined,
            );
            if (!chat.title) await this.#chats.update(userId, chat.id, { title: content.trim().slice(0, 80) });
          } catch (error) {
            if (error instanceof StaleLeaseError) {
              yield { type: "error", code: "lease_lost", message: error.message };
              yield { ...event, reason: "error" };
              return;
            }
            this.#logger?.error(
              { err: (error as Error)?.stack ?? String(error), chatId: chat.id },
              "storing chat messages failed",
            );
            yield {
              type: "error",
              code: "internal_error",
              message: "The turn ran but its messages could not be stored.",
            };
            yield { ...event, reason: "error" };
            return;
          }
        }
        if (owned) {
          // The last events (done included) and the end of the lease land together.
          owned.log.push(event);
          await owned.log
            .finish()
            .catch((error) =>
              this.#logger?.error({ err: String(error), chatId: chat.id }, "ending the turn's lease failed"),
            );
        }
        yield event;
      }
    } finally {
      await (suspended() ? keeper?.release() : keeper?.finish())?.catch((error) =>
        this.#logger?.error({ err: String(error), chatId: chat.id }, "releasing or removing a turn's state failed"),
      );
    }
  }
}

/** Validates a provider name; throws ToolArgumentError naming the accepted ones. */
export function parseProvider(value: string): ProviderName {
  if ((CHAT_PROVIDERS as readonly string[]).includes(value)) return value as ProviderName;
  throw new ToolArgumentError(`Unknown provider "${value}". Use one of: ${CHAT_PROVIDERS.join(", ")}.`, {
    argument: "provider",
  });
}

/**
 * The official-SDK adapter for the provider, with its key and base URL from the environment or the config file
 * (the provider table's one credential reader; throws MissingCredentialsError naming what to set).
 */
export const defaultAdapterFactory: AdapterFactory = (provider, env) =>
  createProviderAdapter(provider, providerCredentials(provider, env));

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
