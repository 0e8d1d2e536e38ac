/**
 * Approval asks answered through MCP elicitation: when a call needs a person's approval and the connected client
 * declared the `elicitation` capability, Toolhost asks the client's user with a form — the tool, why it asks, the (redacted) arguments and a
 * choice of allow once / allow always (when the policy permits it) / deny, plus an optional note for the model.
 * Declining or dismissing the form denies the call. Two transports of the question: a 2025-era connection that saw
 * the initialize (stdio) gets an `elicitation/create` request mid-call; a 2026-07-28 request (Streamable HTTP or
 * stdio) whose envelope declares the capability gets an `input_required` result carrying the form, and its retry
 * carries the answer (see tool-server.ts). A client without elicitation cannot be asked: such asks are refused
 * naming the reason.
 */
import type { ElicitRequestFormParams, ElicitResult, RequestOptions } from "@modelcontextprotocol/server";
import type { ApprovalAnswer, ApprovalRequestView, ApprovalResponder } from "../../app/approvals/service.js";

/** Sends one elicitation request to the client (ctx.mcpReq.elicitInput). */
export type ElicitFunction = (params: ElicitRequestFormParams, options?: RequestOptions) => Promise<ElicitResult>;

/** The form shown for one ask. */
export function approvalForm(request: ApprovalRequestView): ElicitRequestFormParams {
  const choices = request.allowAlways ? ["allow_once", "allow_always", "deny"] : ["allow_once", "deny"];
  const titles = { allow_once: "Allow once", allow_always: "Always allow this", deny: "Deny" } as const;
  const rule = request.rule ? ` (rule ${request.rule.decision} "${request.rule.match}")` : "";
  return {
    mode: "form",
    message: [
      `Toolhost asks before running "${request.tool}": ${request.reason}${rule}`,
      request.subjects.length > 0 ? `It concerns: ${request.subjects.join(", ")}` : "",
      `Arguments: ${request.preview}`,
      request.workingDirectory ? `Working directory: ${request.workingDirectory}` : "",
      `Unanswered, the call is refused at ${request.expiresAt}.`,
    ]
      .filter(Boolean)
      .join("\n"),
    requestedSchema: {
      type: "object",
      properties: {
        decision: {
          type: "string",
          title: "Decision",
          oneOf: choices.map((c) => ({ const: c, title: titles[c as keyof typeof titles] })),
          default: "deny",
        },
        message: { type: "string", title: "Note for the assistant (optional)", maxLength: 500 },
      },
      required: ["decision"],
    },
  };
}

/**
 * A responder that asks through elicitation. `clientName` names the client in the recorded answer
 * (`decidedBy: "mcp:<client>"`). An elicitation that fails (the client errored, the call was cancelled) leaves
 * the ask to the API answer path by returning undefined only when cancelled; otherwise it denies.
 */
export function elicitationResponder(elicit: ElicitFunction, clientName: string): ApprovalResponder {
  return {
    async answer(request, signal): Promise<ApprovalAnswer | undefined> {
      const decidedBy = `mcp:${clientName}`;
      let result: ElicitResult;
      try {
        result = await elicit(approvalForm(request), { signal });
      } catch (error) {
        if (signal.aborted) return undefined;
        return {
          decision: "deny",
          message: `Asking the user through the MCP client failed (${(error as Error)?.message ?? String(error)}); the call was not run.`,
          decidedBy,
        };
      }
      return answerFrom(result, request, decidedBy);
    },
  };
}

/**
 * The answer an elicitation result gives to an ask: accept with a decision the form offered (else deny); decline or
 * dismiss denies. `decidedBy` names the client (`mcp:<client>`).
 */
export function answerFrom(result: ElicitResult, request: ApprovalRequestView, decidedBy: string): ApprovalAnswer {
  if (result.action !== "accept") {
    return {
      decision: "deny",
      message:
        result.action === "decline"
          ? "The user declined this call."
          : "The user dismissed the approval prompt; the call was not run.",
      decidedBy,
    };
  }
  const content = (result.content ?? {}) as { decision?: unknown; message?: unknown };
  const allowed = request.allowAlways ? ["allow_once", "allow_always", "deny"] : ["allow_once", "deny"];
  const decision = allowed.includes(String(content.decision))
    ? (content.decision as ApprovalAnswer["decision"])
    : "deny";
  const message = typeof content.message === "string" && content.message.trim() ? content.message.trim() : undefined;
  return { decision, ...(message ? { message } : {}), decidedBy };
}
