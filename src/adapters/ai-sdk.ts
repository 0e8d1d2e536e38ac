/**
 * `toolhost/ai-sdk`: Toolhost's tools as a Vercel AI SDK ToolSet, for `generateText`, `streamText` and agents of
 * `ai` 6 and 7. Each call runs through Toolhost: the user's settings, the approval policy (its asks become the
 * SDK's approval requests), path policy, sandbox, time budget, result cap and audit under the user. See
 * docs/adapters.md.
 */

import type { ToolSet } from "ai";
import { jsonSchema } from "ai";
import { classifyForAiSdk, type JsonSchemaFactory, openAiSdkTools, sessionOf } from "./ai-sdk-tools.js";
import type { AdapterContext, ToolhostToolsOptions } from "./session.js";

export { ToolhostCallError, type ToolhostProgress } from "./ai-sdk-tools.js";
export type { AdapterContext, ToolhostToolsOptions } from "./session.js";

/** Options of the AI SDK's toolhostTools. */
export interface AiSdkToolsOptions extends ToolhostToolsOptions {
  /**
   * The request's messages (ModelMessage[], as passed to generateText/streamText). Approval responses in them are
   * recorded in Toolhost at once — a denial too, which the SDK otherwise answers without calling any tool.
   */
  messages?: readonly unknown[];
}

/**
 * The user's enabled Toolhost tools as an AI SDK ToolSet, keyed by tool name (disabled tools, tools an admin turned
 * off and tools that cannot work on this host are absent). Each has Toolhost's description and JSON Schema input
 * (validated by Toolhost: malformed input fails as `validation_failed`), a `needsApproval` that is true exactly
 * when Toolhost's policy asks about the call (stable for the same call id, so the SDK's re-check of an approved call
 * agrees), and an `execute` that runs the call through Toolhost's approval gate with the SDK's abort signal,
 * yields the tool's progress as preliminary results and throws a {@link ToolhostCallError} (the model sees the
 * classified error) when the call fails or is refused.
 *
 * `ctx` is what `createAppContext()` returns. Build the set per request (it is bound to one user and directory).
 * Throws AccessDeniedError / ToolArgumentError when the working directory cannot be bound, TypeError without a user.
 */
export async function toolhostTools(ctx: AdapterContext, options: AiSdkToolsOptions): Promise<ToolSet> {
  return openAiSdkTools(ctx, options, jsonSchema as unknown as JsonSchemaFactory);
}

/** An AI SDK 7 approval status, as `toolApproval` returns it. */
export type ToolhostApprovalStatus =
  | "approved"
  | { type: "user-approval"; reason?: string }
  | { type: "denied"; reason?: string };

/** The per-tool functions of AI SDK 7's call-level `toolApproval` option. */
export type ToolhostToolApproval = Record<
  string,
  (input: unknown, options: { toolCallId: string; messages?: unknown }) => Promise<ToolhostApprovalStatus>
>;

/**
 * AI SDK 7's call-level approval for a ToolSet made by {@link toolhostTools}: pass it as
 * `toolApproval: toolhostToolApproval(tools)` (spread it into an object of your own for your other tools). Maps
 * Toolhost's policy per call: allow → `approved`, ask → `user-approval` (with the reason, shown to the approver),
 * deny → `denied` (with the reason; the refusal is audited). An ask stays `user-approval` when the SDK checks the
 * approved call again. Throws TypeError for a ToolSet toolhostTools did not make.
 */
export function toolhostToolApproval(tools: ToolSet): ToolhostToolApproval {
  const session = sessionOf(tools);
  if (!session) throw new TypeError("toolhostToolApproval needs the ToolSet that toolhostTools returned.");
  const approval: ToolhostToolApproval = {};
  for (const name of Object.keys(tools)) {
    approval[name] = async (input, options) => {
      const decided = await classifyForAiSdk(session, name, input, options);
      if (decided.decision === "allow") return "approved";
      if (decided.decision === "ask")
        return { type: "user-approval", ...(decided.reason ? { reason: decided.reason } : {}) };
      return { type: "denied", reason: decided.outcome.error.message };
    };
  }
  return approval;
}
