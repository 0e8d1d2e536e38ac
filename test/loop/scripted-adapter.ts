/**
 * An in-process ProviderAdapter driven by a script: each model turn is a function that receives the request (a
 * deep copy, so later mutations of the loop's history do not leak into it) and yields normalized events.
 * Not a stub of a provider: the loop under test sees exactly the ProviderAdapter contract.
 */
import type { ProviderAdapter, ProviderRequest, ProviderStreamEvent } from "../../src/providers/types.js";

/** One scripted model turn. */
export type ScriptedTurn = (
  request: ProviderRequest,
) => AsyncIterable<ProviderStreamEvent> | Iterable<ProviderStreamEvent>;

/** A scripted adapter with the requests it received. A turn past the end of the script throws. */
export function scriptedAdapter(turns: ScriptedTurn[]): ProviderAdapter & { requests: ProviderRequest[] } {
  const requests: ProviderRequest[] = [];
  return {
    name: "openai",
    requests,
    async *stream(request) {
      const { signal, ...rest } = request;
      requests.push({ ...structuredClone(rest), signal });
      const turn = turns[requests.length - 1];
      if (!turn) throw new Error(`scripted adapter: no turn ${requests.length} in the script`);
      for await (const event of turn(request)) {
        if (signal?.aborted) {
          const error = new Error("Request was aborted.");
          error.name = "AbortError";
          throw error;
        }
        yield event;
      }
    },
  };
}

/** Events of a turn that answers with text. */
export function textTurn(text: string): ScriptedTurn {
  return () => [
    { type: "text_delta", delta: text.slice(0, Math.ceil(text.length / 2)) },
    { type: "text_delta", delta: text.slice(Math.ceil(text.length / 2)) },
    { type: "usage", inputTokens: 10, outputTokens: 5 },
    { type: "finish", reason: "stop" },
  ];
}

/** Events of a turn that calls tools; `arguments` is sent in two deltas to exercise accumulation. */
export function toolTurn(calls: { id: string; name: string; arguments: string }[]): ScriptedTurn {
  return () => {
    const events: ProviderStreamEvent[] = [];
    for (const call of calls) {
      events.push({ type: "tool_call_started", id: call.id, name: call.name });
      const half = Math.ceil(call.arguments.length / 2);
      events.push({ type: "tool_call_arguments_delta", id: call.id, delta: call.arguments.slice(0, half) });
      events.push({ type: "tool_call_arguments_delta", id: call.id, delta: call.arguments.slice(half) });
      events.push({ type: "tool_call_completed", id: call.id, name: call.name, arguments: call.arguments });
    }
    events.push({ type: "finish", reason: "tool_calls", providerData: { turn: calls.map((c) => c.id).join(",") } });
    return events;
  };
}
