/**
 * Wire formats of the four fake providers: request parsing and validation, and the documented SSE event sequences
 * (event names, ids, finish/stop reasons) each real API streams.
 *
 * - OpenAI Responses (POST /v1/responses): `event: <type>` + `data: {...}` frames, response.created →
 *   response.in_progress → output_item.added/… → response.completed.
 * - OpenAI Chat Completions (POST /v1/chat/completions): `data: {chat.completion.chunk}` frames, tool_calls deltas
 *   by index, finish_reason, a usage chunk with empty choices, then `data: [DONE]`.
 * - Anthropic Messages (POST /v1/messages): message_start → content_block_start/delta/stop… → message_delta
 *   (stop_reason) → message_stop, with `ping`.
 * - Gemini Interactions (POST /v1beta/interactions): interaction.created → interaction.status_update →
 *   step.start/step.delta/step.stop per step → interaction.completed (status requires_action or completed).
 */

import type { ProviderName } from "../../src/providers/types.js";
import type { FakeReceivedTool, FakeReceivedToolResult, FakeToolCall, FakeTurnAction } from "./types.js";

/** A call the fake issued, remembered to check that results come back under the same id. */
export interface IssuedCall {
  id: string;
  name: string;
  /** Gemini: the signature the function_call step carried; must be echoed back. */
  signature?: string;
  /** Gemini: the signature of the thought step of the same turn; the thought must be replayed before the call. */
  thoughtSignature?: string;
  /** Anthropic: the signature of the thinking block that must open the echoed assistant message. */
  thinkingSignature?: string;
  /** OpenAI Responses: the reasoning item id that must precede the echoed function_call. */
  reasoningId?: string;
  /** Chat Completions thinking mode: the reasoning_content that must come back on the assistant message. */
  reasoningContent?: string;
}

/**
 * OpenAI Responses: for each reasoning item the fake produced, the id of the output item that followed it. The API
 * refuses an input whose reasoning item is not immediately followed by that item, with its id.
 */
const followingItems = new WeakMap<ProtocolContext, Map<string, string>>();

/** Mutable state of one fake server. */
export interface ProtocolContext {
  model: string;
  /** Monotonic counter for ids. */
  next(): number;
  issued: Map<string, IssuedCall>;
}

/** Parsed, provider-neutral view of a request body. */
export interface ParsedRequest {
  model: string;
  system?: string;
  tools: FakeReceivedTool[];
  toolResults: FakeReceivedToolResult[];
  lastToolResults: FakeReceivedToolResult[];
  lastUserText: string;
}

/** The wire format of one provider as the fake speaks it. */
export interface FakeProtocol {
  matches(method: string, path: string): boolean;
  parse(body: any): ParsedRequest;
  /** Protocol violations in the request (empty when well-formed). */
  validate(body: any, ctx: ProtocolContext): string[];
  /** SSE frames for a scripted action (text, tools, break prefix, stall prefix). */
  frames(action: FakeTurnAction, ctx: ProtocolContext): string[];
  errorBody(status: number, message: string): unknown;
}

/** Splits text into `parts` roughly equal, non-empty pieces (at least one piece). */
export function splitPieces(text: string, parts = 3): string[] {
  if (text.length <= 1) return [text];
  const size = Math.max(1, Math.ceil(text.length / parts));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function argsText(call: FakeToolCall): string {
  return typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments);
}

function sse(event: string | undefined, data: unknown): string {
  const json = typeof data === "string" ? data : JSON.stringify(data);
  return `${event ? `event: ${event}\n` : ""}data: ${json}\n\n`;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part: any) => (typeof part === "string" ? part : typeof part?.text === "string" ? part.text : ""))
      .join("");
  }
  return "";
}

function hex(n: number, width = 24): string {
  return n.toString(16).padStart(width, "0");
}

/** The action prefix streamed before a break or a stall: some text, then half of a tool call for `break`. */
function prefixAction(action: FakeTurnAction): FakeTurnAction {
  if (action.kind === "break") {
    return {
      kind: "tools",
      text: action.text ?? "Let me look",
      calls: [{ name: "list_dir", arguments: '{"path":"." ' }],
    };
  }
  return { kind: "text", text: action.kind === "stall" ? (action.text ?? "Thinking") : "" };
}

// ---------------------------------------------------------------------------------------------------------------
// OpenAI Responses API
// ---------------------------------------------------------------------------------------------------------------

const responses: FakeProtocol = {
  matches: (method, path) => method === "POST" && /\/responses$/.test(path),
  parse(body) {
    const input: any[] = typeof body.input === "string" ? [{ role: "user", content: body.input }] : (body.input ?? []);
    const tools: FakeReceivedTool[] = (body.tools ?? []).map((t: any) => ({
      name: t.name,
      description: t.description,
      parameters: t.parameters,
      strict: t.strict ?? undefined,
      raw: t,
    }));
    const names = new Map<string, string>();
    for (const item of input) if (item.type === "function_call") names.set(item.call_id, item.name);
    const results = (items: any[]) =>
      items
        .filter((i) => i.type === "function_call_output")
        .map((i) => ({ id: i.call_id, name: names.get(i.call_id), content: textOf(i.output) }));
    let lastAssistant = -1;
    input.forEach((item, i) => {
      if (item.type === "function_call" || item.role === "assistant" || item.type === "reasoning") lastAssistant = i;
    });
    const last = input[input.length - 1];
    return {
      model: body.model,
      system: body.instructions ?? undefined,
      tools,
      toolResults: results(input),
      lastToolResults: results(input.slice(lastAssistant + 1)),
      lastUserText: last && last.role === "user" ? textOf(last.content) : "",
    };
  },
  validate(body, ctx) {
    const errors: string[] = [];
    if (body.stream !== true) errors.push("stream must be true");
    if (typeof body.model !== "string" || !body.model) errors.push("model is required");
    const input: any[] = typeof body.input === "string" ? [] : (body.input ?? []);
    if (!Array.isArray(input)) errors.push("input must be a string or an array of items");
    for (const tool of body.tools ?? []) {
      if (tool.type !== "function" || typeof tool.name !== "string" || typeof tool.parameters !== "object") {
        errors.push(`tool ${JSON.stringify(tool.name)}: expected {type:'function', name, parameters}`);
      }
    }
    const calls = new Map<string, any>();
    const answered = new Set<string>();
    const following = followingItems.get(ctx);
    input.forEach((item, i) => {
      const expected = item.type === "reasoning" ? following?.get(item.id) : undefined;
      if (expected && input[i + 1]?.id !== expected) {
        errors.push(`Item '${item.id}' of type 'reasoning' was provided without its required following item.`);
      }
    });
    for (const item of input) {
      if (item.type === "function_call") {
        if (typeof item.call_id !== "string" || typeof item.arguments !== "string") {
          errors.push("function_call items need call_id and arguments (string)");
        }
        const issued = ctx.issued.get(item.call_id);
        if (!issued) errors.push(`function_call ${item.call_id} was never issued by the model`);
        else if (issued.name !== item.name) errors.push(`function_call ${item.call_id} has name ${item.name}`);
        const reasoningId = issued?.reasoningId;
        if (
          reasoningId &&
          !input.slice(0, input.indexOf(item)).some((i) => i.type === "reasoning" && i.id === reasoningId)
        ) {
          errors.push(
            `Item of type 'function_call' (${item.call_id}) was provided without its required 'reasoning' item: '${reasoningId}'.`,
          );
        }
        calls.set(item.call_id, item);
      } else if (item.type === "function_call_output") {
        if (!calls.has(item.call_id))
          errors.push(`No tool call found for function call output with call_id ${item.call_id}.`);
        if (typeof item.output !== "string" && !Array.isArray(item.output)) errors.push("output must be a string");
        answered.add(item.call_id);
      } else if (item.role !== undefined) {
        if (!["user", "assistant", "system", "developer"].includes(item.role)) errors.push(`bad role ${item.role}`);
      } else if (item.type !== "reasoning" && item.type !== "message") {
        errors.push(`unknown input item type ${item.type}`);
      }
    }
    for (const id of calls.keys()) {
      if (!answered.has(id)) errors.push(`No tool output found for function call ${id}.`);
    }
    return errors;
  },
  frames(action, ctx) {
    if (action.kind === "break" || action.kind === "stall") {
      const all = responses.frames(prefixAction(action), ctx);
      // Drop the terminal events: the stream never completes.
      return action.kind === "break" ? all.slice(0, -3) : all.slice(0, -1);
    }
    if (action.kind !== "text" && action.kind !== "tools") return [];
    const n = ctx.next();
    const responseId = `resp_${hex(n, 32)}`;
    let seq = 0;
    const frames: string[] = [];
    const emit = (type: string, data: Record<string, unknown>) => {
      frames.push(sse(type, { type, sequence_number: seq++, ...data }));
    };
    const base = {
      id: responseId,
      object: "response",
      created_at: 1764500000,
      model: ctx.model,
      parallel_tool_calls: true,
      tool_choice: "auto",
      tools: [],
      error: null,
      incomplete_details: null,
    };
    emit("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } });
    emit("response.in_progress", { response: { ...base, status: "in_progress", output: [], usage: null } });
    const output: any[] = [];
    const reasoningId = action.kind === "tools" && action.thinking ? `rs_${hex(n, 32)}` : undefined;
    if (reasoningId) {
      const item = { id: reasoningId, type: "reasoning", summary: [] };
      emit("response.output_item.added", { output_index: 0, item });
      emit("response.output_item.done", { output_index: 0, item });
      output.push(item);
    }
    const text = action.text;
    if (text) {
      const itemId = `msg_${hex(n, 32)}`;
      const outputIndex = output.length;
      emit("response.output_item.added", {
        output_index: outputIndex,
        item: { id: itemId, type: "message", status: "in_progress", role: "assistant", content: [] },
      });
      emit("response.content_part.added", {
        item_id: itemId,
        output_index: outputIndex,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [], logprobs: [] },
      });
      for (const delta of splitPieces(text)) {
        emit("response.output_text.delta", {
          item_id: itemId,
          output_index: outputIndex,
          content_index: 0,
          delta,
          logprobs: [],
        });
      }
      emit("response.output_text.done", { item_id: itemId, output_index: outputIndex, content_index: 0, text });
      const part = { type: "output_text", text, annotations: [], logprobs: [] };
      emit("response.content_part.done", { item_id: itemId, output_index: outputIndex, content_index: 0, part });
      const item = { id: itemId, type: "message", status: "completed", role: "assistant", content: [part] };
      emit("response.output_item.done", { output_index: outputIndex, item });
      output.push(item);
    }
    if (action.kind === "tools") {
      action.calls.forEach((call, i) => {
        const callId = call.id ?? `call_${hex(n * 10 + i, 24)}`;
        const itemId = `fc_${hex(n * 10 + i, 32)}`;
        const args = argsText(call);
        ctx.issued.set(callId, { id: callId, name: call.name, ...(reasoningId ? { reasoningId } : {}) });
        const outputIndex = output.length;
        const started = { id: itemId, type: "function_call", status: "in_progress", arguments: "", call_id: callId };
        emit("response.output_item.added", { output_index: outputIndex, item: { ...started, name: call.name } });
        for (const delta of splitPieces(args, 4)) {
          emit("response.function_call_arguments.delta", { item_id: itemId, output_index: outputIndex, delta });
        }
        emit("response.function_call_arguments.done", {
          item_id: itemId,
          output_index: outputIndex,
          name: call.name,
          arguments: args,
        });
        const item = { ...started, status: "completed", arguments: args, name: call.name };
        emit("response.output_item.done", { output_index: outputIndex, item });
        output.push(item);
      });
    }
    if (!followingItems.has(ctx)) followingItems.set(ctx, new Map());
    output.forEach((item, i) => {
      if (item.type === "reasoning" && output[i + 1]) followingItems.get(ctx)!.set(item.id, output[i + 1].id);
    });
    const incomplete = action.kind === "text" && action.finish === "length";
    emit(incomplete ? "response.incomplete" : "response.completed", {
      response: {
        ...base,
        status: incomplete ? "incomplete" : "completed",
        incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
        output,
        usage: {
          input_tokens: 42,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 17,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: 59,
        },
      },
    });
    return frames;
  },
  errorBody: (_status, message) => ({ error: { message, type: "invalid_request_error", param: null, code: null } }),
};

// ---------------------------------------------------------------------------------------------------------------
// OpenAI Chat Completions
// ---------------------------------------------------------------------------------------------------------------

const chat: FakeProtocol = {
  matches: (method, path) => method === "POST" && /\/chat\/completions$/.test(path),
  parse(body) {
    const messages: any[] = body.messages ?? [];
    const names = new Map<string, string>();
    for (const m of messages) for (const c of m.tool_calls ?? []) names.set(c.id, c.function?.name);
    const results = (list: any[]) =>
      list
        .filter((m) => m.role === "tool")
        .map((m) => ({ id: m.tool_call_id, name: names.get(m.tool_call_id), content: textOf(m.content) }));
    let lastAssistant = -1;
    messages.forEach((m, i) => {
      if (m.role === "assistant") lastAssistant = i;
    });
    const last = messages[messages.length - 1];
    const system = messages.find((m) => m.role === "system" || m.role === "developer");
    return {
      model: body.model,
      system: system ? textOf(system.content) : undefined,
      tools: (body.tools ?? []).map((t: any) => ({
        name: t.function?.name,
        description: t.function?.description,
        parameters: t.function?.parameters,
        strict: t.function?.strict ?? undefined,
        raw: t,
      })),
      toolResults: results(messages),
      lastToolResults: results(messages.slice(lastAssistant + 1)),
      lastUserText: last?.role === "user" ? textOf(last.content) : "",
    };
  },
  validate(body, ctx) {
    const errors: string[] = [];
    if (body.stream !== true) errors.push("stream must be true");
    const messages: any[] = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) return [...errors, "messages must be a non-empty array"];
    for (const tool of body.tools ?? []) {
      if (tool.type !== "function" || typeof tool.function?.name !== "string") {
        errors.push("tools must be {type:'function', function:{name, parameters}}");
      }
    }
    let pending = new Set<string>();
    for (const m of messages) {
      if (m.role === "tool") {
        if (!pending.has(m.tool_call_id)) {
          errors.push(
            `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (${m.tool_call_id}).`,
          );
        }
        pending.delete(m.tool_call_id);
        if (typeof m.content !== "string") errors.push("tool message content must be a string");
        continue;
      }
      if (pending.size > 0) {
        errors.push(
          `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(", ")}`,
        );
      }
      pending = new Set();
      if (m.role === "assistant") {
        for (const call of m.tool_calls ?? []) {
          if (call.type !== "function" || typeof call.function?.arguments !== "string") {
            errors.push("assistant tool_calls need type 'function' and string arguments");
          }
          const issued = ctx.issued.get(call.id);
          if (!issued) errors.push(`tool call ${call.id} was never issued by the model`);
          else if (issued.name !== call.function?.name) errors.push(`tool call ${call.id} has the wrong name`);
          else if (issued.reasoningContent !== undefined && m.reasoning_content !== issued.reasoningContent) {
            // The wording of a thinking-mode server (DeepSeek) that gets a tool-calling history without it.
            errors.push("The reasoning_content in the thinking mode must be passed back to the API.");
          }
          pending.add(call.id);
        }
      } else if (!["user", "system", "developer"].includes(m.role)) {
        errors.push(`unknown role ${m.role}`);
      }
    }
    if (pending.size > 0) errors.push(`tool_call_ids without response messages: ${[...pending].join(", ")}`);
    return errors;
  },
  frames(action, ctx) {
    if (action.kind === "break" || action.kind === "stall") {
      const all = chat.frames(prefixAction(action), ctx);
      return all.slice(0, -3);
    }
    if (action.kind !== "text" && action.kind !== "tools") return [];
    const n = ctx.next();
    const base = {
      id: `chatcmpl-${hex(n, 29)}`,
      object: "chat.completion.chunk",
      created: 1764500000,
      model: ctx.model,
      service_tier: "default",
      system_fingerprint: "fp_fake0001",
    };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      sse(undefined, { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    const frames = [
      chunk({ role: "assistant", content: action.kind === "tools" && !action.text ? null : "", refusal: null }),
    ];
    // Thinking mode: reasoning_content deltas (content null) before the answer and the calls.
    const thinking = action.kind === "tools" ? action.thinking : undefined;
    if (thinking) {
      for (const piece of splitPieces(thinking)) frames.push(chunk({ content: null, reasoning_content: piece }));
    }
    const text = action.text;
    if (text) for (const piece of splitPieces(text)) frames.push(chunk({ content: piece }));
    let finish = action.kind === "text" && action.finish === "length" ? "length" : "stop";
    if (action.kind === "tools") {
      finish = "tool_calls";
      action.calls.forEach((call, i) => {
        const id = call.id ?? `call_${hex(n * 10 + i, 24)}`;
        ctx.issued.set(id, { id, name: call.name, ...(thinking ? { reasoningContent: thinking } : {}) });
        frames.push(
          chunk({ tool_calls: [{ index: i, id, type: "function", function: { name: call.name, arguments: "" } }] }),
        );
        for (const piece of splitPieces(argsText(call), 4)) {
          frames.push(chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] }));
        }
      });
    }
    frames.push(chunk({}, finish));
    frames.push(
      sse(undefined, {
        ...base,
        choices: [],
        usage: {
          prompt_tokens: 42,
          completion_tokens: 17,
          total_tokens: 59,
          prompt_tokens_details: { cached_tokens: 0 },
          completion_tokens_details: { reasoning_tokens: 0 },
        },
      }),
    );
    frames.push(sse(undefined, "[DONE]"));
    return frames;
  },
  errorBody: (_status, message) => ({ error: { message, type: "invalid_request_error", param: null, code: null } }),
};

// ---------------------------------------------------------------------------------------------------------------
// Anthropic Messages
// ---------------------------------------------------------------------------------------------------------------

const anthropic: FakeProtocol = {
  matches: (method, path) => method === "POST" && /\/v1\/messages$/.test(path),
  parse(body) {
    const messages: any[] = body.messages ?? [];
    const names = new Map<string, string>();
    for (const m of messages) {
      if (Array.isArray(m.content)) for (const b of m.content) if (b.type === "tool_use") names.set(b.id, b.name);
    }
    const results = (list: any[]) =>
      list.flatMap((m) =>
        m.role === "user" && Array.isArray(m.content)
          ? m.content
              .filter((b: any) => b.type === "tool_result")
              .map((b: any) => ({
                id: b.tool_use_id,
                name: names.get(b.tool_use_id),
                content: textOf(b.content),
                isError: b.is_error ?? undefined,
              }))
          : [],
      );
    let lastAssistant = -1;
    messages.forEach((m, i) => {
      if (m.role === "assistant") lastAssistant = i;
    });
    const last = messages[messages.length - 1];
    const lastText =
      last?.role === "user"
        ? typeof last.content === "string"
          ? last.content
          : last.content
              .filter((b: any) => b.type === "text")
              .map((b: any) => b.text)
              .join("")
        : "";
    return {
      model: body.model,
      system: typeof body.system === "string" ? body.system : body.system ? textOf(body.system) : undefined,
      tools: (body.tools ?? []).map((t: any) => ({
        name: t.name,
        description: t.description,
        parameters: t.input_schema,
        strict: t.strict ?? undefined,
        raw: t,
      })),
      toolResults: results(messages),
      lastToolResults: results(messages.slice(lastAssistant + 1)),
      lastUserText: lastText,
    };
  },
  validate(body, ctx) {
    const errors: string[] = [];
    if (body.stream !== true) errors.push("stream must be true");
    if (typeof body.max_tokens !== "number") errors.push("max_tokens: Field required");
    const messages: any[] = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) return [...errors, "messages: at least one message"];
    if (messages[0].role !== "user") errors.push("messages: first message must use the user role");
    for (const tool of body.tools ?? []) {
      if (typeof tool.name !== "string" || tool.input_schema?.type !== "object") {
        errors.push(`tools: ${tool.name}: input_schema must have type 'object'`);
      }
    }
    messages.forEach((m, i) => {
      if (m.role !== "user" && m.role !== "assistant") errors.push(`messages.${i}.role: unexpected ${m.role}`);
      const blocks: any[] = Array.isArray(m.content) ? m.content : [];
      if (m.role === "assistant") {
        const uses = blocks.filter((b) => b.type === "tool_use");
        for (const use of uses) {
          const issued = ctx.issued.get(use.id);
          if (!issued) errors.push(`tool_use ${use.id} was never issued by the model`);
          else if (issued.name !== use.name) errors.push(`tool_use ${use.id} has the wrong name`);
          const signature = issued?.thinkingSignature;
          if (signature && !(blocks[0]?.type === "thinking" && blocks[0].signature === signature)) {
            errors.push(
              `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${blocks[0]?.type}\`. When \`thinking\` is enabled, an assistant message with tool_use must start with its thinking block, signature unchanged.`,
            );
          }
          if (typeof use.input !== "object" || use.input === null || Array.isArray(use.input)) {
            errors.push(`messages.${i}: tool_use.input must be an object`);
          }
        }
        if (uses.length > 0) {
          const next = messages[i + 1];
          const results: any[] =
            next?.role === "user" && Array.isArray(next.content)
              ? next.content.filter((b: any) => b.type === "tool_result")
              : [];
          const ids = new Set(results.map((r) => r.tool_use_id));
          const missing = uses.filter((u) => !ids.has(u.id)).map((u) => u.id);
          if (missing.length > 0) {
            errors.push(
              `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
            );
          }
          if (
            next &&
            Array.isArray(next.content) &&
            next.content.length > 0 &&
            next.content[0].type !== "tool_result"
          ) {
            errors.push(`messages.${i + 1}: tool_result blocks must come first in the user message`);
          }
        }
      } else {
        for (const block of blocks.filter((b) => b.type === "tool_result")) {
          const prev = messages[i - 1];
          const prevUses =
            prev?.role === "assistant" && Array.isArray(prev.content)
              ? prev.content.filter((b: any) => b.type === "tool_use").map((b: any) => b.id)
              : [];
          if (!prevUses.includes(block.tool_use_id)) {
            errors.push(
              `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${block.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
            );
          }
          if (block.is_error !== undefined && typeof block.is_error !== "boolean")
            errors.push("is_error must be a boolean");
        }
      }
    });
    return errors;
  },
  frames(action, ctx) {
    if (action.kind === "break" || action.kind === "stall") {
      const all = anthropic.frames(prefixAction(action), ctx);
      return action.kind === "break" ? all.slice(0, -3) : all.slice(0, -2);
    }
    if (action.kind !== "text" && action.kind !== "tools") return [];
    const n = ctx.next();
    const frames: string[] = [];
    const emit = (type: string, data: Record<string, unknown>) => frames.push(sse(type, { type, ...data }));
    emit("message_start", {
      message: {
        id: `msg_01${hex(n, 22)}`,
        type: "message",
        role: "assistant",
        model: ctx.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 42, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
      },
    });
    let index = 0;
    const thinkingSignature = action.kind === "tools" && action.thinking ? `EqQBCgIYAhIM${hex(n, 16)}` : undefined;
    if (action.kind === "tools" && action.thinking && thinkingSignature) {
      emit("content_block_start", { index, content_block: { type: "thinking", thinking: "", signature: "" } });
      for (const thinking of splitPieces(action.thinking)) {
        emit("content_block_delta", { index, delta: { type: "thinking_delta", thinking } });
      }
      emit("content_block_delta", { index, delta: { type: "signature_delta", signature: thinkingSignature } });
      emit("content_block_stop", { index });
      index++;
    }
    if (action.text) {
      emit("content_block_start", { index, content_block: { type: "text", text: "" } });
      emit("ping", {});
      for (const text of splitPieces(action.text)) {
        emit("content_block_delta", { index, delta: { type: "text_delta", text } });
      }
      emit("content_block_stop", { index });
      index++;
    }
    if (action.kind === "tools") {
      action.calls.forEach((call, i) => {
        const id = call.id ?? `toolu_01${hex(n * 10 + i, 22)}`;
        ctx.issued.set(id, { id, name: call.name, ...(thinkingSignature ? { thinkingSignature } : {}) });
        emit("content_block_start", { index, content_block: { type: "tool_use", id, name: call.name, input: {} } });
        emit("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: "" } });
        for (const partial_json of splitPieces(argsText(call), 4)) {
          emit("content_block_delta", { index, delta: { type: "input_json_delta", partial_json } });
        }
        emit("content_block_stop", { index });
        index++;
      });
    }
    const stop = action.kind === "tools" ? "tool_use" : action.finish === "length" ? "max_tokens" : "end_turn";
    emit("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 17 } });
    emit("message_stop", {});
    return frames;
  },
  errorBody: (_status, message) => ({ type: "error", error: { type: "invalid_request_error", message } }),
};

// ---------------------------------------------------------------------------------------------------------------
// Gemini Interactions
// ---------------------------------------------------------------------------------------------------------------

const gemini: FakeProtocol = {
  matches: (method, path) => method === "POST" && /\/interactions$/.test(path),
  parse(body) {
    const input: any[] =
      typeof body.input === "string"
        ? [{ type: "user_input", content: [{ type: "text", text: body.input }] }]
        : body.input;
    const steps: any[] = Array.isArray(input) ? input : [];
    const results = (list: any[]) =>
      list
        .filter((s) => s.type === "function_result")
        .map((s) => ({
          id: s.call_id,
          name: s.name,
          content: typeof s.result === "string" ? s.result : JSON.stringify(s.result),
          isError: s.is_error ?? undefined,
        }));
    let lastModel = -1;
    steps.forEach((s, i) => {
      if (s.type === "function_call" || s.type === "model_output" || s.type === "thought") lastModel = i;
    });
    const last = steps[steps.length - 1];
    return {
      model: body.model,
      system: body.system_instruction ?? undefined,
      tools: (body.tools ?? [])
        .filter((t: any) => t.type === "function")
        .map((t: any) => ({
          name: t.name,
          description: t.description,
          parameters: t.parameters,
          raw: t,
        })),
      toolResults: results(steps),
      lastToolResults: results(steps.slice(lastModel + 1)),
      lastUserText: last?.type === "user_input" ? textOf(last.content) : "",
    };
  },
  validate(body, ctx) {
    const errors: string[] = [];
    if (body.stream !== true) errors.push("stream must be true");
    if (typeof body.model !== "string") errors.push("model is required");
    if (typeof body.input !== "string" && !Array.isArray(body.input)) errors.push("input must be a string or steps");
    for (const tool of body.tools ?? []) {
      if (tool.type !== "function" || typeof tool.name !== "string")
        errors.push("tools must be {type:'function', name}");
    }
    const steps: any[] = Array.isArray(body.input) ? body.input : [];
    const calls = new Set<string>();
    const answered = new Set<string>();
    for (const step of steps) {
      if (step.type === "function_call") {
        const issued = ctx.issued.get(step.id);
        if (!issued) errors.push(`function_call ${step.id} was never issued by the model`);
        else {
          if (issued.name !== step.name) errors.push(`function_call ${step.id} has the wrong name`);
          if (issued.signature && step.signature !== issued.signature) {
            errors.push(`Function call ${step.id} is missing its thought signature; echo it back unchanged.`);
          }
          const thoughtSignature = issued.thoughtSignature;
          if (thoughtSignature && !steps.some((t) => t.type === "thought" && t.signature === thoughtSignature)) {
            errors.push(
              `The thought step (signature ${thoughtSignature}) before function call ${step.id} was not replayed.`,
            );
          }
        }
        if (typeof step.arguments !== "object" || step.arguments === null)
          errors.push("function_call.arguments must be an object");
        calls.add(step.id);
      } else if (step.type === "function_result") {
        if (!calls.has(step.call_id)) errors.push(`function_result ${step.call_id} does not match a function_call id`);
        if (step.result === undefined) errors.push("function_result.result is required");
        answered.add(step.call_id);
      } else if (!["user_input", "model_output", "thought"].includes(step.type)) {
        errors.push(`unknown step type ${step.type}`);
      }
    }
    for (const id of calls) if (!answered.has(id)) errors.push(`function_call ${id} has no function_result`);
    return errors;
  },
  frames(action, ctx) {
    if (action.kind === "break" || action.kind === "stall") {
      const all = gemini.frames(prefixAction(action), ctx);
      return action.kind === "break" ? all.slice(0, -3) : all.slice(0, -2);
    }
    if (action.kind !== "text" && action.kind !== "tools") return [];
    const n = ctx.next();
    const interactionId = `v1_fake${hex(n, 12)}`;
    const frames: string[] = [];
    const emit = (event_type: string, data: Record<string, unknown>) =>
      frames.push(sse(event_type, { ...data, event_type }));
    emit("interaction.created", {
      interaction: { id: interactionId, status: "in_progress", object: "interaction", model: ctx.model },
    });
    emit("interaction.status_update", { interaction_id: interactionId, status: "in_progress" });
    let index = 0;
    if (action.kind === "tools") {
      // Gemini 3 thinks first: a thought step carrying a signature that must be replayed in stateless mode.
      emit("step.start", { index, step: { type: "thought" } });
      emit("step.delta", { index, delta: { type: "thought_signature", signature: `thought-sig-${n}` } });
      emit("step.stop", { index });
      index++;
    }
    if (action.text) {
      emit("step.start", { index, step: { type: "model_output" } });
      for (const text of splitPieces(action.text)) emit("step.delta", { index, delta: { type: "text", text } });
      emit("step.stop", { index });
      index++;
    }
    if (action.kind === "tools") {
      action.calls.forEach((call, i) => {
        const id = call.id ?? `${(n * 10 + i).toString(36).padStart(8, "k")}`;
        const signature = `fc-sig-${id}`;
        ctx.issued.set(id, { id, name: call.name, signature, thoughtSignature: `thought-sig-${n}` });
        emit("step.start", { index, step: { type: "function_call", id, name: call.name, arguments: {}, signature } });
        for (const piece of splitPieces(argsText(call), 4)) {
          emit("step.delta", { index, delta: { type: "arguments_delta", arguments: piece } });
        }
        emit("step.stop", { index });
        index++;
      });
    }
    const status =
      action.kind === "tools" ? "requires_action" : action.finish === "length" ? "incomplete" : "completed";
    emit("interaction.status_update", { interaction_id: interactionId, status });
    emit("interaction.completed", {
      interaction: {
        id: interactionId,
        status,
        object: "interaction",
        model: ctx.model,
        usage: { total_input_tokens: 42, total_output_tokens: 17, total_thought_tokens: 0, total_tokens: 59 },
      },
    });
    return frames;
  },
  errorBody: (status, message) => ({ error: { code: status, message, status: "INVALID_ARGUMENT" } }),
};

/** The fake wire protocol of each provider name. */
export const PROTOCOLS: Record<ProviderName, FakeProtocol> = {
  openai: responses,
  "openai-chat": chat,
  anthropic,
  gemini,
};
