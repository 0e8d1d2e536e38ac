/**
 * The Vercel AI SDK's tool shapes over an AdapterSession, built with the `jsonSchema` of whichever `ai` the caller
 * loaded (6 or 7: their schema objects are the same shape). The public entry is ./ai-sdk.ts.
 */
import type { JSONSchema7, Schema, Tool, ToolSet } from "ai";
import type { SerializedToolError } from "../core/errors.js";
import type { ToolProgressEvent } from "../core/types.js";
import { serializeToolOutcome } from "../loop/serialize.js";
import {
  type AdapterContext,
  AdapterSession,
  type CallDecision,
  type FrameworkAnswer,
  type ToolhostToolsOptions,
} from "./session.js";

/** The surface name of the AI SDK adapter in the audit and in recorded approval answers. */
export const AI_SDK_SURFACE = "ai-sdk";

/** `jsonSchema` of the `ai` package in use. */
export type JsonSchemaFactory = (
  schema: JSONSchema7,
  options: {
    validate: (value: unknown) => Promise<{ success: true; value: unknown } | { success: false; error: Error }>;
  },
) => Schema<unknown>;

/**
 * A Toolhost tool call that failed or was refused, as the AI SDK's `execute` throws it: the model receives its
 * message, the classified error as JSON `{"error":{"code","message","details?"}}`, cut where Toolhost's own loop
 * cuts a result (serializeToolOutcome), so a huge failure message cannot flood the model's context.
 */
export class ToolhostCallError extends Error {
  override readonly name = "ToolhostCallError";
  /** The stable code (`validation_failed`, `access_denied`, `denied_by_policy`, `aborted` …). */
  readonly code: string;
  /** The classified error's details (e.g. `approvalId`, `rule`). */
  readonly details: Record<string, unknown> | undefined;
  constructor(error: SerializedToolError) {
    super(serializeToolOutcome({ ok: false, error, durationMs: 0 }));
    this.code = error.code;
    this.details = error.details as Record<string, unknown> | undefined;
  }
}

/** A preliminary tool result of a running call (streamText emits it as a tool result with `preliminary: true`). */
export interface ToolhostProgress {
  type: "toolhost-progress";
  /** The tool's progress event: kind (`output`, `image_generated` …), message, data. */
  progress: ToolProgressEvent;
}

const sessions = new WeakMap<object, AdapterSession>();

/** The session behind a ToolSet built here (for the call-level `toolApproval` of AI SDK 7). */
export function sessionOf(tools: object): AdapterSession | undefined {
  return sessions.get(tools);
}

/**
 * The answers to Toolhost's asks in AI SDK messages: each `tool-approval-response` part (role `tool`) joined by
 * its approval id to the `tool-approval-request` part (role `assistant`) naming the tool call, and the answer
 * carries that call's tool and input (the `tool-call` part before the request). A provider may reuse a call id:
 * only the answer to the latest approval request of each call id counts (an earlier one answered an earlier call).
 * Anything else is ignored.
 */
export function approvalAnswersIn(messages: unknown): FrameworkAnswer[] {
  if (!Array.isArray(messages)) return [];
  const calls = new Map<string, { tool?: unknown; input?: unknown }>();
  const requests = new Map<string, { toolCallId: string; tool?: unknown; input?: unknown }>();
  const latestRequest = new Map<string, string>();
  const responses: { approvalId: string; approved: boolean; reason?: string }[] = [];
  for (const message of messages) {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    for (const part of content) {
      const p = part as Record<string, unknown> | null;
      if (p?.type === "tool-call" && typeof p.toolCallId === "string") {
        calls.set(p.toolCallId, { tool: p.toolName, input: p.input });
      } else if (p?.type === "tool-approval-request" && typeof p.approvalId === "string") {
        const inline = p.toolCall as { toolCallId?: unknown; toolName?: unknown; input?: unknown } | undefined;
        const callId = typeof p.toolCallId === "string" ? p.toolCallId : inline?.toolCallId;
        if (typeof callId !== "string") continue;
        const call = calls.get(callId) ?? { tool: inline?.toolName, input: inline?.input };
        requests.set(p.approvalId, { toolCallId: callId, ...call });
        latestRequest.set(callId, p.approvalId);
      } else if (p?.type === "tool-approval-response" && typeof p.approvalId === "string") {
        responses.push({
          approvalId: p.approvalId,
          approved: p.approved === true,
          ...(typeof p.reason === "string" && p.reason ? { reason: p.reason } : {}),
        });
      }
    }
  }
  const answers: FrameworkAnswer[] = [];
  for (const r of responses) {
    const request = requests.get(r.approvalId);
    if (!request || latestRequest.get(request.toolCallId) !== r.approvalId || typeof request.tool !== "string")
      continue;
    answers.push({
      toolCallId: request.toolCallId,
      tool: request.tool,
      args: request.input,
      approved: r.approved,
      ...(r.reason ? { reason: r.reason } : {}),
    });
  }
  return answers;
}

/** A small queue the tool's progress events pass through to the generator that yields them. */
class ProgressQueue {
  readonly #items: ToolProgressEvent[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  push(event: ToolProgressEvent): void {
    this.#items.push(event);
    this.#wake?.();
  }
  close(): void {
    this.#closed = true;
    this.#wake?.();
  }
  async *drain(): AsyncGenerator<ToolProgressEvent> {
    for (;;) {
      const next = this.#items.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }
}

/**
 * The ids of the calls whose approval responses the SDK acts on in this request: those in the last message (a
 * `tool` message), as the SDK reads them, except calls that message already holds a result for.
 */
export function callsApprovedNow(messages: unknown): Set<string> {
  const ids = new Set<string>();
  if (!Array.isArray(messages)) return ids;
  const last = messages.at(-1) as { role?: unknown; content?: unknown } | undefined;
  if (last?.role !== "tool" || !Array.isArray(last.content)) return ids;
  const answered = new Set<string>();
  const withResult = new Set<string>();
  for (const part of last.content as (Record<string, unknown> | null)[]) {
    if (part?.type === "tool-approval-response" && typeof part.approvalId === "string") answered.add(part.approvalId);
    if (part?.type === "tool-result" && typeof part.toolCallId === "string") withResult.add(part.toolCallId);
  }
  for (const message of messages) {
    const content = (message as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    for (const part of content as (Record<string, unknown> | null)[]) {
      if (part?.type !== "tool-approval-request" || !answered.has(part.approvalId as string)) continue;
      const callId =
        typeof part.toolCallId === "string" ? part.toolCallId : (part.toolCall as { toolCallId?: unknown })?.toolCallId;
      if (typeof callId === "string" && !withResult.has(callId)) ids.add(callId);
    }
  }
  return ids;
}

/**
 * Classifies a call for the SDK's approval check (tool-level `needsApproval` or AI SDK 7's `toolApproval`), first
 * recording the answers in `messages`. The SDK checks an answered call again before running it: an ask made only
 * then (the call's arguments differ from the ones asked about) was never shown to whoever answered, so the call is
 * marked to be refused when it executes. A new call that merely reuses the id of a call answered earlier in the
 * conversation is asked about as usual.
 */
export async function classifyForAiSdk(
  session: AdapterSession,
  name: string,
  input: unknown,
  options: { toolCallId: string; messages?: unknown },
): Promise<CallDecision> {
  await session.recordAnswers(approvalAnswersIn(options.messages));
  const answeredNow = callsApprovedNow(options.messages).has(options.toolCallId);
  const decided = await session.classify(name, input, options.toolCallId, { newCall: !answeredNow });
  if (decided.decision === "ask" && decided.fresh && answeredNow) {
    await session.refuseApproval(options.toolCallId, name, input, decided.approvalId);
  }
  return decided;
}

/** Builds the ToolSet of a session's enabled tools (see ./ai-sdk.ts for the behaviour). */
export async function buildAiSdkTools(session: AdapterSession, jsonSchema: JsonSchemaFactory): Promise<ToolSet> {
  const tools: ToolSet = {};
  for (const { definition } of await session.list()) {
    const name = definition.name;
    const inputSchema = jsonSchema(
      { ...(definition.parameters as JSONSchema7), type: "object" },
      {
        // Toolhost's own argument checks, so malformed input fails as validation_failed with Toolhost's message.
        validate: async (value) => {
          const inspected = await session.runtime.inspectCall(name, value, session.scope);
          if (!inspected.ok && inspected.error.code === "validation_failed") {
            return { success: false, error: new ToolhostCallError(inspected.error.toJSON()) };
          }
          // Returned unchanged: the SDK compares an approved call's input with what validation returns.
          return { success: true, value };
        },
      },
    );
    const tool = {
      type: "function",
      description: definition.description,
      inputSchema,
      needsApproval: async (input: unknown, options: { toolCallId: string; messages?: unknown }) =>
        (await classifyForAiSdk(session, name, input, options)).decision === "ask",
      execute: async function* (
        input: unknown,
        options: { toolCallId: string; abortSignal?: AbortSignal; messages?: unknown },
      ): AsyncGenerator<unknown> {
        await session.recordAnswers(approvalAnswersIn(options.messages));
        const queue = new ProgressQueue();
        const outcome = session
          .run(name, input, {
            toolCallId: options.toolCallId,
            ...(options.abortSignal ? { signal: options.abortSignal } : {}),
            onProgress: (event) => queue.push(event),
          })
          .finally(() => queue.close());
        for await (const progress of queue.drain()) {
          yield { type: "toolhost-progress", progress } satisfies ToolhostProgress;
        }
        const settled = await outcome;
        if (!settled.ok) throw new ToolhostCallError(settled.error);
        yield settled.result ?? null;
      },
    };
    tools[name] = tool as unknown as Tool;
  }
  sessions.set(tools, session);
  return tools;
}

/**
 * Opens a session and builds its ToolSet with the given `jsonSchema` (the `ai` package in use); answers in
 * `messages` are recorded first. ./ai-sdk.ts's toolhostTools is this with `ai`'s own jsonSchema.
 */
export async function openAiSdkTools(
  ctx: AdapterContext,
  options: ToolhostToolsOptions & { messages?: readonly unknown[] },
  jsonSchema: JsonSchemaFactory,
): Promise<ToolSet> {
  const session = AdapterSession.open(ctx, options, AI_SDK_SURFACE);
  if (options.messages) await session.recordAnswers(approvalAnswersIn(options.messages));
  return buildAiSdkTools(session, jsonSchema);
}
