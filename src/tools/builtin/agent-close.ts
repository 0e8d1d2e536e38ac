/**
 * agent_close: cancels one of the caller's sub-agents (at any depth below it) together with all of its
 * descendants — their model streams and tool processes stop — and frees their running slots. What they produced
 * so far is kept, with status `cancelled`.
 */
import { agentServiceFrom } from "../../core/agents.js";
import { storedTextCheck } from "../../core/arg-parsing.js";
import { defineTool } from "../../core/settings-declaration.js";
import type { RegisteredTool } from "../../core/types.js";

export const agentCloseTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the agent limits (depth, count, rate) bound it.
  approval: { default: "allow" },
  definition: {
    name: "agent_close",
    description:
      "Cancel a sub-agent you spawned (or one below it) and everything it spawned; frees their slots. Returns the ids that were stopped.",
    parameters: {
      type: "object",
      properties: { agentId: { type: "string", description: "The sub-agent to close." } },
      required: ["agentId"],
      additionalProperties: false,
    },
  },
  settings: {
    title: "Sub-agents: close",
    description: "Lets the model cancel sub-agents it started, with all their descendants.",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
  },
  validateArguments: storedTextCheck("agentId"),
  async execute(args, context) {
    const { agentId } = args as { agentId: string };
    return agentServiceFrom(context.services, "agent_close").close(agentId);
  },
});
