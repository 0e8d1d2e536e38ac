/**
 * A scripted model for agent trees: one ProviderAdapter shared by every agent of a tree, which answers each
 * request from a script keyed by the agent's task (its first user message) and the turn number (how many
 * assistant messages the conversation already holds). Stateless per request, so concurrent agents get
 * deterministic answers. The loop and the agents under test see exactly the ProviderAdapter contract.
 */
import type {
  ConversationMessage,
  ProviderAdapter,
  ProviderRequest,
  ProviderStreamEvent,
} from "../../src/providers/types.js";

/** What a script sees of one request. */
export interface ModelCall {
  /** The agent's first user message. */
  task: string;
  /** 0 for the agent's first model turn, then 1, 2, … (assistant messages so far). */
  turn: number;
  request: ProviderRequest;
}

/** Events of one model turn (sync or async). */
export type TurnEvents = AsyncIterable<ProviderStreamEvent> | Iterable<ProviderStreamEvent>;

/** A model driven by `script`; records every request. A script that returns undefined makes the call fail. */
export function taskModel(
  script: (call: ModelCall) => TurnEvents | undefined,
): ProviderAdapter & { requests: ProviderRequest[] } {
  const requests: ProviderRequest[] = [];
  return {
    name: "openai",
    requests,
    async *stream(request) {
      requests.push(request);
      const first = request.messages.find((m) => m.role === "user");
      const task = first && first.role === "user" ? first.content : "";
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      const events = script({ task, turn, request });
      if (!events) throw new Error(`fake model: no script for task ${JSON.stringify(task.slice(0, 60))} turn ${turn}`);
      for await (const event of events) {
        if (request.signal?.aborted) throw abortError();
        yield event;
      }
    },
  };
}

function abortError(): Error {
  const error = new Error("Request was aborted.");
  error.name = "AbortError";
  return error;
}

/** A text answer (with usage 10 in / 5 out). */
export function text(answer: string, usage = { inputTokens: 10, outputTokens: 5 }): ProviderStreamEvent[] {
  return [
    { type: "text_delta", delta: answer },
    { type: "usage", ...usage },
    { type: "finish", reason: "stop" },
  ];
}

/** A turn that calls tools (usage 10 in / 5 out). */
export function calls(list: { id: string; name: string; args: unknown }[], prefix = ""): ProviderStreamEvent[] {
  const events: ProviderStreamEvent[] = [];
  if (prefix) events.push({ type: "text_delta", delta: prefix });
  for (const call of list) {
    const args = JSON.stringify(call.args);
    events.push({ type: "tool_call_started", id: call.id, name: call.name });
    events.push({ type: "tool_call_arguments_delta", id: call.id, delta: args });
    events.push({ type: "tool_call_completed", id: call.id, name: call.name, arguments: args });
  }
  events.push({ type: "usage", inputTokens: 10, outputTokens: 5 });
  events.push({ type: "finish", reason: "tool_calls" });
  return events;
}

/** A turn that streams nothing until the request is aborted (a slow model); `onStart` runs when it begins. */
export function hang(signal: AbortSignal | undefined, onStart?: () => void): TurnEvents {
  return (async function* () {
    onStart?.();
    await new Promise<void>((_, reject) => {
      if (!signal) return;
      if (signal.aborted) reject(abortError());
      else signal.addEventListener("abort", () => reject(abortError()), { once: true });
    });
    yield* [];
  })();
}

/** The parsed content of the last tool results in the conversation (by tool name), or undefined. */
export function lastResult(
  messages: ConversationMessage[],
  name?: string,
): { ok: boolean; value: unknown } | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "tool") continue;
    const r = name ? m.results.find((x) => x.name === name) : m.results[0];
    if (!r) continue;
    let value: unknown = r.content;
    try {
      value = JSON.parse(r.content);
    } catch {
      // plain text
    }
    return { ok: r.ok, value };
  }
  return undefined;
}
