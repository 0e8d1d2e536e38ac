/**
 * JSON Schemas of the chat stream's events (the `data` of each Server-Sent Event of
 * POST /api/chats/:id/messages), one per event type, for the OpenAPI document: clients generated from it get a
 * typed union discriminated by `type`. The events themselves are defined by the loop (src/loop/events.ts), the
 * providers' normalized stream (src/providers/types.ts) and the agent service (AgentStreamEvent); these schemas
 * describe them as they reach the wire.
 */
import Type, { type TSchema } from "typebox";

const Str = Type.String();
const Int = Type.Integer({ minimum: 0 });
const NullableStr = Type.Union([Type.String(), Type.Null()]);

/** The classified error of a failed tool call. */
const ToolErrorSchema = Type.Object(
  {
    code: Type.String({ description: "Stable error code, e.g. validation_failed, access_denied, timeout" }),
    message: Str,
    details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { $id: "StreamToolError" },
);

/** How a sub-agent appears on its events. */
const AgentTagSchema = Type.Object(
  {
    id: Str,
    parentId: NullableStr,
    depth: Int,
    path: Type.String({ description: "The agent ids from the chat's root agent down, joined with /" }),
    template: Str,
  },
  { $id: "AgentTag" },
);

const agentTag = { agent: Type.Optional(AgentTagSchema) };
const agentPath = {
  agentPath: Type.Optional(
    Type.Array(Type.String(), { description: "The agent ids from the root down, for a sub-agent's call" }),
  ),
};

/** One event schema: `type` fixed to `name`, the given fields, named `<Name>Event` in the document. */
function event(name: string, description: string, fields: Record<string, TSchema>) {
  const id = `${name
    .split("_")
    .map((w) => w[0]?.toUpperCase() + w.slice(1))
    .join("")}Event`;
  return Type.Object({ type: Type.Literal(name), ...fields }, { $id: id, description });
}

/** Every event type of the chat stream, each with its own schema. */
export const STREAM_EVENT_SCHEMAS = [
  event("iteration", "A model turn starts (n counts from 1).", { n: Type.Integer({ minimum: 1 }) }),
  event("text_delta", "Model text.", { delta: Str, itemId: Type.Optional(Str) }),
  event("reasoning_delta", "Reasoning text a provider streams apart from the answer.", { delta: Str }),
  event("tool_call_started", "The model started a tool call.", { id: Str, name: Str, ...agentTag }),
  event("tool_call_arguments_delta", "A piece of a tool call's arguments (JSON text).", { id: Str, delta: Str }),
  event("tool_call_completed", "A complete tool call; arguments is the raw JSON text the model sent.", {
    id: Str,
    name: Str,
    arguments: Str,
    ...agentTag,
  }),
  event("usage", "Token usage of the model turn; outputTokens includes reasoning tokens.", {
    inputTokens: Int,
    outputTokens: Int,
    reasoningTokens: Type.Optional(Int),
  }),
  event("finish", "The model turn ended.", {
    reason: Type.Union(["stop", "tool_calls", "length", "content_filter", "other"].map((r) => Type.Literal(r))),
    providerReason: Type.Optional(Type.String({ description: "The provider's own word for why it stopped" })),
    providerData: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
  event("tool_progress", "Progress of a running tool call.", {
    id: Str,
    name: Str,
    progress: Type.Object({
      kind: Str,
      message: Type.Optional(Str),
      data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
    ...agentTag,
  }),
  event("tool_result", "A tool call finished: result when ok, error otherwise.", {
    id: Str,
    name: Str,
    ok: Type.Boolean(),
    result: Type.Optional(Type.Unknown()),
    error: Type.Optional(ToolErrorSchema),
    durationMs: Type.Number({ minimum: 0 }),
    ...agentTag,
  }),
  event("approval_requested", "A call waits for a person's decision: answer with POST /api/approvals/{approvalId}.", {
    approvalId: Str,
    toolCallId: Str,
    tool: Str,
    preview: Str,
    subjects: Type.Array(Str),
    rule: Type.Union([Type.Object({ decision: Str, match: Str }), Type.Null()]),
    reason: Str,
    allowAlways: Type.Boolean(),
    expiresAt: Type.String({ description: "ISO-8601 time after which the ask counts as denied" }),
    workingDirectory: NullableStr,
    ...agentPath,
    ...agentTag,
  }),
  event("approval_resolved", "An ask was answered or expired.", {
    approvalId: Str,
    toolCallId: Str,
    tool: Str,
    decision: Type.String({ description: "allow_once, allow_always, deny or expired" }),
    decidedBy: NullableStr,
    ...agentPath,
    ...agentTag,
  }),
  event("agent_started", "A sub-agent started.", { agent: AgentTagSchema, task: Str }),
  event("agent_finished", "A sub-agent ended.", {
    agent: AgentTagSchema,
    status: Type.String({
      description: "completed, max_turns, timeout, budget_exhausted, cancelled, error or interrupted",
    }),
    response: Str,
    usage: Type.Object({ inputTokens: Int, outputTokens: Int, turns: Int, toolCalls: Int, durationMs: Int }),
    note: Type.Optional(Str),
  }),
  event("history_rewritten", "The stored history was sent again as plain text after the provider refused it.", {
    message: Str,
  }),
  event("error", "The turn failed or stopped: provider_error, max_iterations, aborted or internal_error.", {
    code: Str,
    message: Str,
    ...agentTag,
  }),
  event("done", "Always last: why the turn ended, and the new messages stored.", {
    reason: Type.Union(["text", "max_iterations", "aborted", "error"].map((r) => Type.Literal(r))),
    iterations: Int,
    messages: Type.Array(Type.Record(Type.String(), Type.Unknown())),
  }),
];

/** The data of one event of the chat stream: one of {@link STREAM_EVENT_SCHEMAS}, told apart by `type`. */
export const ChatStreamEventSchema = Type.Union(STREAM_EVENT_SCHEMAS, {
  $id: "ChatStreamEvent",
  description:
    "The JSON data of one Server-Sent Event of a chat turn; the SSE event name equals its type. Sub-agents' events carry an agent tag.",
});
