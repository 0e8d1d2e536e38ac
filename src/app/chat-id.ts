/**
 * Chat ids a caller chooses (POST /api/chats `id`, `toolhost call --chat`, `toolhost chat --chat`): the one rule,
 * in a module of its own so that a one-tool `toolhost call` checks it without loading the chat service.
 */
import { ToolArgumentError } from "../core/errors.js";

/** What a malformed chat id is told, wherever one is chosen. */
export const CHAT_ID_RULE =
  "A chat id uses 1–128 letters, digits, '.', '_' or '-', and not only dots (it is part of the chat's URL).";

/** Whether `id` may name a new chat: 1–128 of `A-Z a-z 0-9 . _ -`, not only dots ("." and ".." are URL segments). */
export function isChatId(id: string): boolean {
  return /^[A-Za-z0-9._-]{1,128}$/.test(id) && !/^\.+$/.test(id);
}

/** Returns `id` when it may name a new chat; throws ToolArgumentError (`validation_failed`) saying the rule. */
export function parseChatId(id: string): string {
  if (!isChatId(id)) throw new ToolArgumentError(CHAT_ID_RULE, { argument: "id" });
  return id;
}
