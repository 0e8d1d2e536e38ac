/**
 * Serialization of tool outcomes into the provider-neutral tool result fed back to the model. Each adapter then renders
 * a ConversationToolResult in its provider's own format (function_call_output, role tool, Gemini function response,
 * Anthropic tool_result with is_error for `ok: false`).
 */
import { LARGEST_MAX_RESULT_BYTES } from "../core/result-cap.js";
import type { ToolCallOutcome } from "../core/runtime.js";
import type { ConversationToolResult } from "../providers/types.js";

/**
 * Longest tool result text (characters) fed back to a model; longer text is cut and marked as truncated. It is the
 * largest output cap a user may set (`maxResultBytes`): a result the output cap let through, with its spill
 * reference at the end, is never cut a second time; only what escapes that cap (a failure's message) is cut here.
 */
export const MAX_TOOL_RESULT_CHARS = LARGEST_MAX_RESULT_BYTES;

/**
 * The text a model sees for one tool outcome: the result as JSON (a string result as-is), or for a failure the
 * classified error as JSON `{"error":{"code","message","details?"}}` so the model can read the code and correct
 * its call. Text longer than {@link MAX_TOOL_RESULT_CHARS} is cut with a note saying so.
 */
export function serializeToolOutcome(outcome: ToolCallOutcome): string {
  let text: string;
  if (outcome.ok) {
    text = typeof outcome.result === "string" ? outcome.result : (JSON.stringify(outcome.result) ?? "null");
  } else {
    text = JSON.stringify({ error: outcome.error });
  }
  if (text.length > MAX_TOOL_RESULT_CHARS) {
    text = `${text.slice(0, MAX_TOOL_RESULT_CHARS)}\n[truncated: the result was ${text.length} characters; ask for less]`;
  }
  return text;
}

/** The provider-neutral result message entry for one call. */
export function toConversationToolResult(id: string, name: string, outcome: ToolCallOutcome): ConversationToolResult {
  return { id, name, ok: outcome.ok, content: serializeToolOutcome(outcome) };
}
