/**
 * The surface a tool call came through, carried as async context: a framework adapter (the Vercel AI SDK, the
 * OpenAI Agents SDK) runs each call inside {@link withCallSurface}, and the audit sink stores the name with the
 * call's line (`details.surface`), so the audit says which framework made the call. Calls made elsewhere carry
 * none (their surface is the chat, the CLI or MCP, told apart by their approval answers and chats).
 */
import { AsyncLocalStorage } from "node:async_hooks";

let storage: AsyncLocalStorage<string> | undefined;

/**
 * Runs `work` with `surface` (a short name such as `ai-sdk` or `openai-agents`) as the surface of every tool call
 * and audit line it makes, including audit lines written after `work` settled by work it started (a cancelled
 * shell's late line). Returns what `work` returns.
 */
export function withCallSurface<T>(surface: string, work: () => T): T {
  storage ??= new AsyncLocalStorage<string>();
  return storage.run(surface, work);
}

/** The surface of the call being audited, or undefined outside {@link withCallSurface}. */
export function currentCallSurface(): string | undefined {
  return storage?.getStore();
}
