/**
 * The OpenAI Agents SDK's function tools over an AdapterSession, built with the `tool()` of whichever
 * `@openai/agents` the caller loaded. The public entry is ./openai-agents.ts.
 */
import { randomUUID } from "node:crypto";
import type { tool as agentsTool, FunctionTool, RunContext } from "@openai/agents";
import { serializeToolOutcome } from "../loop/serialize.js";
import { toolDefsToResponsesAPI } from "../providers/tool-mapper.js";
import type { AdapterSession, FrameworkAnswer } from "./session.js";

/** The surface name of the Agents SDK adapter in the audit and in recorded approval answers. */
export const OPENAI_AGENTS_SURFACE = "openai-agents";

/** `tool` of the `@openai/agents` package in use. */
export type AgentsToolFactory = typeof agentsTool;

/**
 * The rejections a run's context holds for calls of `names` (`state.reject(item)` puts them there; they travel
 * with the serialized RunState). A rejection of every call of a tool (`alwaysReject`) names no call and is skipped.
 */
export function rejectionsIn(
  runContext: RunContext<unknown> | undefined,
  names: ReadonlySet<string>,
): FrameworkAnswer[] {
  let approvals: Record<string, { rejected?: unknown; messages?: Record<string, string> }> | undefined;
  try {
    approvals = (runContext?.toJSON() as { approvals?: typeof approvals } | undefined)?.approvals;
  } catch {
    return [];
  }
  const answers: FrameworkAnswer[] = [];
  for (const [toolName, record] of Object.entries(approvals ?? {})) {
    if (!names.has(toolName) || !Array.isArray(record?.rejected)) continue;
    for (const callId of record.rejected) {
      if (typeof callId !== "string") continue;
      const reason = record.messages?.[callId];
      answers.push({ toolCallId: callId, approved: false, ...(reason ? { reason } : {}) });
    }
  }
  return answers;
}

/**
 * The approval the run's context holds for the call `callId` of `toolName`: `all` (every call of the tool, the
 * SDK's alwaysApprove), `call` (this one), or undefined.
 */
function approvalIn(
  runContext: RunContext<unknown> | undefined,
  toolName: string,
  callId: string,
): "all" | "call" | undefined {
  try {
    const approved = (runContext?.toJSON() as { approvals?: Record<string, { approved?: unknown }> } | undefined)
      ?.approvals?.[toolName]?.approved;
    if (approved === true) return "all";
    return Array.isArray(approved) && approved.includes(callId) ? "call" : undefined;
  } catch {
    return undefined;
  }
}

/** Builds the function tools of a session's enabled tools (see ./openai-agents.ts for the behaviour). */
export async function buildAgentsTools(session: AdapterSession, tool: AgentsToolFactory): Promise<FunctionTool[]> {
  const listed = await session.list();
  const wire = toolDefsToResponsesAPI(
    listed.map((l) => l.definition),
    { logger: { warn: () => {} } },
  );
  const names = new Set(wire.map((w) => w.name));
  const recorded = new Set<string>();
  // Rejections are recorded once each (a run's context is read on every turn and approval check).
  const recordRejections = async (runContext: RunContext<unknown> | undefined) => {
    const fresh = rejectionsIn(runContext, names).filter((a) => !recorded.has(a.toolCallId));
    if (fresh.length === 0) return;
    for (const a of fresh) recorded.add(a.toolCallId);
    await session.recordAnswers(fresh);
  };
  return listed.map(({ definition }, i) => {
    const name = definition.name;
    const mapped = wire[i]!;
    const options = {
      name: mapped.name,
      description: definition.description,
      parameters: mapped.parameters,
      strict: mapped.strict === true,
      isEnabled: async ({ runContext }: { runContext: RunContext<unknown> }) => {
        await recordRejections(runContext);
        // Read once per turn of the run (the SDK asks every tool when it lists them for a model request).
        return session.isEnabled(name, runContext);
      },
      needsApproval: async (runContext: RunContext<unknown>, input: unknown, callId?: string) => {
        await recordRejections(runContext);
        if (!callId) return true;
        const approved = approvalIn(runContext, mapped.name, callId) !== undefined;
        const decided = await session.classify(name, input, callId, { newCall: !approved });
        // Asked again for a call the run already approved (newer SDK releases check on resume): an ask made only
        // now, for these arguments, was never shown to whoever approved.
        if (decided.decision === "ask" && decided.fresh && approved) {
          await session.refuseApproval(callId, name, input, decided.approvalId);
        }
        return decided.decision === "ask";
      },
      execute: async (
        input: unknown,
        runContext?: RunContext<unknown>,
        details?: { toolCall?: { callId?: string }; signal?: AbortSignal },
      ) => {
        const toolCallId = details?.toolCall?.callId ?? `call_${randomUUID()}`;
        const outcome = await session.run(name, input, {
          toolCallId,
          ...(details?.signal ? { signal: details.signal } : {}),
          ...(approvalIn(runContext, mapped.name, toolCallId) === "all" ? { approvedAll: true } : {}),
        });
        // The model reads the result, or the classified error as JSON, as from Toolhost's own loop.
        return serializeToolOutcome(outcome);
      },
      // Anything that escaped the call (it never throws for a tool failure) reaches the model classified too.
      errorFunction: (_runContext: RunContext<unknown>, error: unknown) =>
        JSON.stringify({
          error: { code: "execution_failed", message: (error as Error)?.message ?? String(error) },
        }),
    };
    return tool(options as unknown as Parameters<AgentsToolFactory>[0]) as unknown as FunctionTool;
  });
}
