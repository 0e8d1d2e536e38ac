/**
 * agent_send (the "Agent Communication" part of the sub-agent spec): queues a message from the calling agent to
 * another agent of its tree, with spam prevention (MESSAGE_MAX_BYTES, MESSAGE_QUEUE_MAX, AGENT_PAIR_RATE_LIMIT).
 * Returns `{sent, targetAgentId}` plus the message id, the target's queue depth and how it is delivered: at the
 * start of the target's next model turn, or — for an idle target — in a turn started for it, whose answer is
 * queued back to the sender.
 */
import { AGENT_SEND_SETTING_DESCRIPTORS, agentServiceFrom, sendLimitsFrom } from "../../core/agents.js";
import { AccessDeniedError, LimitExceededError, ToolArgumentError } from "../../core/errors.js";
import { registerTool } from "../../core/registry.js";
import { defineTool } from "../../core/settings-declaration.js";
import type { RegisteredTool } from "../../core/types.js";

export const agentSendTool: RegisteredTool = defineTool({
  definition: {
    name: "agent_send",
    description:
      "Send a message to another agent of your tree (a sub-agent you spawned, your parent, a sibling). It is read at the start of the target's next model turn; an idle target starts a turn for it and its answer comes back to you as a message. Returns sent, targetAgentId, messageId, queueDepth and delivery.",
    parameters: {
      type: "object",
      properties: {
        agentId: { type: "string", description: "Your own agent id (the sender)." },
        targetAgentId: { type: "string", description: "The receiving agent's id." },
        message: { type: "string", description: "Message content (at most 100 KB)." },
      },
      required: ["agentId", "targetAgentId", "message"],
      additionalProperties: false,
    },
  },
  settings: {
    title: "Sub-agents: send",
    description: "Lets agents of one tree message each other, with size, queue and per-pair rate limits.",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: AGENT_SEND_SETTING_DESCRIPTORS,
  },
  async execute(args, context) {
    const { agentId, targetAgentId, message } = args as { agentId: string; targetAgentId: string; message: string };
    const agents = agentServiceFrom(context.services, "agent_send");
    if (agentId !== agents.agentId) {
      throw new AccessDeniedError(
        `agentId "${agentId}" is not your agent id (${agents.agentId}); an agent sends only as itself.`,
        { argument: "agentId", rule: "lineage" },
      );
    }
    if (message === "") throw new ToolArgumentError("message must not be empty.", { argument: "message" });
    const limits = sendLimitsFrom(context.settings.parameters);
    const bytes = Buffer.byteLength(message, "utf8");
    if (bytes > limits.messageMaxBytes) {
      throw new LimitExceededError(
        `Message is ${bytes} bytes; MESSAGE_MAX_BYTES is ${limits.messageMaxBytes}. Shorten it or send the essentials.`,
        { limit: "MESSAGE_MAX_BYTES", value: limits.messageMaxBytes, argument: "message" },
      );
    }
    return agents.send({ targetAgentId, message }, limits);
  },
});

registerTool(agentSendTool);
