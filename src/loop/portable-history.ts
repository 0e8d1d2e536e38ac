/**
 * Recovery for a chat whose stored history a provider refuses (e.g. a thinking-mode server that requires reasoning
 * the history never kept, or a provider switched mid-chat that rejects another's tool-call ids or signatures): the
 * turns before the newest user message are rewritten as plain text — tool calls and their results summarized in the
 * assistant's words, provider-specific data dropped — which every provider accepts. Only the request changes; the
 * stored history stays as it was.
 */
import type { ConversationMessage } from "../providers/types.js";

/** Longest tool result (in characters) quoted in a rewritten turn. */
const RESULT_QUOTE_CHARS = 2_000;

/** True when the turns before the newest user message hold tool calls or provider data to rewrite. */
export function hasProviderSpecificHistory(messages: readonly ConversationMessage[]): boolean {
  const lastUser = messages.findLastIndex((m) => m.role === "user");
  return messages
    .slice(0, Math.max(lastUser, 0))
    .some((m) => m.role === "tool" || (m.role === "assistant" && (m.toolCalls?.length || m.providerData)));
}

function quote(text: string): string {
  return text.length > RESULT_QUOTE_CHARS ? `${text.slice(0, RESULT_QUOTE_CHARS)}… (cut)` : text;
}

/**
 * The history with every turn before the newest user message as plain user/assistant text: an assistant message's
 * calls become lines such as `[called list_dir {"path":"src"}]`, a tool message's results lines such as
 * `[list_dir returned: …]` (or `[list_dir failed: …]`), consecutive assistant texts merged. The newest user message
 * and everything after it are kept as they are.
 */
export function portableHistory(messages: readonly ConversationMessage[]): ConversationMessage[] {
  const lastUser = messages.findLastIndex((m) => m.role === "user");
  if (lastUser <= 0) return [...messages];
  const out: ConversationMessage[] = [];
  const say = (text: string) => {
    const last = out[out.length - 1];
    if (last?.role === "assistant") last.content = last.content ? `${last.content}\n${text}` : text;
    else out.push({ role: "assistant", content: text });
  };
  for (const message of messages.slice(0, lastUser)) {
    if (message.role === "user") out.push({ role: "user", content: message.content });
    else if (message.role === "assistant") {
      if (message.content) say(message.content);
      for (const call of message.toolCalls ?? []) say(`[called ${call.name} ${call.arguments}]`);
    } else {
      for (const result of message.results) {
        say(`[${result.name} ${result.ok ? "returned" : "failed"}: ${quote(result.content)}]`);
      }
    }
  }
  return [...out, ...messages.slice(lastUser)];
}
