/**
 * The `chat <model>` span around one provider request (see core/tracing.ts): started when the loop asks the
 * adapter for a turn, given the turn's token usage and finish reason as the adapter reports them, ended when the
 * stream ends, fails or is abandoned.
 */
import { startChatSpan } from "../core/tracing.js";
import type { ProviderStreamEvent } from "../providers/types.js";

/** Passes `events` through unchanged while recording them on a `chat <model>` span for `provider`. */
export async function* tracedProviderStream(
  provider: string,
  model: string,
  events: AsyncIterable<ProviderStreamEvent>,
): AsyncGenerator<ProviderStreamEvent, void, undefined> {
  const span = startChatSpan(provider, model);
  let failure: unknown;
  try {
    for await (const event of events) {
      if (event.type === "usage") {
        span.usage({
          inputTokens: event.inputTokens,
          outputTokens: event.outputTokens,
          ...(event.reasoningTokens !== undefined ? { reasoningTokens: event.reasoningTokens } : {}),
        });
      } else if (event.type === "finish") {
        span.usage({ finishReason: event.reason });
      }
      yield event;
    }
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    span.end(failure);
  }
}
