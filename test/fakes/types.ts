/**
 * Script and request types of the protocol-faithful fake provider servers. A script is a list of turns; each HTTP
 * request to the fake consumes the next turn.
 */

/** One tool call the fake model makes. `arguments` is JSON text (sent as-is, split into several deltas). */
export interface FakeToolCall {
  /** The provider call id; generated in the provider's style when omitted. */
  id?: string;
  name: string;
  /** JSON text, or an object that is serialized. Non-JSON text is sent verbatim (malformed-arguments tests). */
  arguments: string | Record<string, unknown>;
}

/** What the fake does for one request. */
export type FakeTurnAction =
  /** Stream a text answer (split into several deltas); `finish: "length"` ends as truncated. */
  | { kind: "text"; text: string; finish?: "stop" | "length" }
  /** Stream optional leading text, then the tool calls of one turn (parallel when more than one). */
  | {
      kind: "tools";
      calls: FakeToolCall[];
      text?: string;
      /**
       * Reasoning before the calls: an Anthropic `thinking` block (with signature) or an OpenAI Responses
       * `reasoning` item, or Chat Completions `reasoning_content` deltas (a thinking-mode server such as
       * DeepSeek's). The fake then requires it echoed back with the calls, as these APIs do. (Gemini tool turns
       * always start with a signed thought step.)
       */
      thinking?: string;
    }
  /** Stream the start of an answer (some text and half a tool call), then destroy the socket mid-stream. */
  | { kind: "break"; text?: string }
  /** Stream `text` (default "Thinking") then keep the response open until the client goes away (abort tests). */
  | { kind: "stall"; text?: string }
  /**
   * Answer with an HTTP error in the provider's error shape; `retryAfterMs` adds the `retry-after-ms` header with
   * which APIs tell a client when to retry (every SDK here honours it instead of its own backoff).
   */
  | { kind: "error"; status: number; message: string; retryAfterMs?: number }
  /** Write this exact body (a recorded stream fixture) as an SSE response. */
  /**
   * An exact SSE body. `issues` names the tool calls it carries, so the fake accepts their results in the next
   * request as answers to calls it made.
   */
  | { kind: "raw"; body: string; issues?: { id: string; name: string }[] };

/**
 * A scripted turn: a fixed action, optionally with `expect` (throw to fail the request: the fake then answers
 * HTTP 400 with the message and records it in `FakeProvider.failures`), or a function of the request (a model that
 * answers from the tool results it received).
 */
export type FakeTurn =
  | (FakeTurnAction & { expect?: (request: FakeRequest) => void })
  | ((request: FakeRequest) => FakeTurnAction);

/** A tool definition as the fake received it, normalized across providers. */
export interface FakeReceivedTool {
  name: string;
  description?: string;
  /** The schema the provider got (Responses `parameters`, Anthropic `input_schema`, Gemini `parameters`). */
  parameters: unknown;
  /** Responses/Chat `strict` (undefined where the provider has no such flag or it was not sent). */
  strict?: boolean;
  /** The provider's raw tool object. */
  raw: Record<string, unknown>;
}

/** A tool result as the fake received it, normalized across providers. */
export interface FakeReceivedToolResult {
  /** The call id the result answers (Responses call_id, Chat tool_call_id, Anthropic tool_use_id, Gemini call_id). */
  id: string;
  name?: string;
  content: string;
  /** Anthropic `is_error` / Gemini `is_error` (undefined where the format has no flag). */
  isError?: boolean;
}

/** One request the SDK sent to the fake. */
export interface FakeRequest {
  /** Index of the request (0-based) = index of the script turn it consumed. */
  index: number;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body. */
  body: any;
  model: string;
  system?: string;
  tools: FakeReceivedTool[];
  /** Every tool result in the request's history, in order. */
  toolResults: FakeReceivedToolResult[];
  /** Tool results of the last turn only (those after the last assistant message). */
  lastToolResults: FakeReceivedToolResult[];
  /** Text of the last user message ("" when the last message is tool results). */
  lastUserText: string;
}
