/**
 * The shapes of chats and chat turns (options, inputs, views, events), their errors, the provider choice and the
 * chat's system prompt: what the chat service, its turn runner and its callers share.
 */
import type { AgentService, AgentStreamEvent } from "../agents/service.js";
import { BrandedError, errorBrand, ToolArgumentError } from "../core/errors.js";
import type { ToolRuntime } from "../core/runtime.js";
import type { Logger } from "../core/types.js";
import type { LoopEvent } from "../loop/events.js";
import { createProviderAdapter, PROVIDER_NAMES, PROVIDER_TABLE, providerCredentials } from "../providers/table.js";
import type { ConversationMessage, ProviderAdapter, ProviderName } from "../providers/types.js";
import type { Chat, ChatRepository } from "../storage/repositories.js";
import type { ApprovalResponder, ApprovalService } from "./approvals/service.js";
import type { TurnCoordinator } from "./turn-coordinator.js";
import type { WorkingDirectoryBinder } from "./working-directory.js";

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

/** A stored message's content as a conversation message (undefined for anything else). */
export function toConversationMessage(content: unknown): ConversationMessage | undefined {
  if (!content || typeof content !== "object") return undefined;
  const m = content as { role?: unknown };
  if (m.role === "user" || m.role === "assistant" || m.role === "tool") return content as ConversationMessage;
  return undefined;
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
