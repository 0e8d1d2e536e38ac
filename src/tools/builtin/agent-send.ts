/**
 * agent_send: queues a message from the calling agent to another agent of its tree, with spam prevention (a
 * message size cap, a cap on unread messages, a rate limit per ordered pair of agents).
 * Returns `{sent, targetAgentId}` plus the message id, the target's queue depth and how it is delivered: at the
 * start of the target's next model turn, or — for an idle target — in a turn started for it, whose answer is
 * queued back to the sender.
 */
import {
  AGENT_PAIR_RATE_LIMIT,
  type AgentSendLimits,
  agentServiceFrom,
  MESSAGE_MAX_BYTES,
  MESSAGE_QUEUE_MAX,
} from "../../core/agents.js";
import { storedTextCheck } from "../../core/arg-parsing.js";
import { AccessDeniedError, LimitExceededError, quote, ToolArgumentError } from "../../core/errors.js";
import { defineTool, integerSettings } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolParameterDescriptor } from "../../core/types.js";

/** Settings of agent_send: the messaging limits (each default is also its ceiling). */
const SEND_SETTINGS: ToolParameterDescriptor[] = [
  {
    name: "messageMaxBytes",
    type: "integer",
    description: "Largest message (UTF-8).",
    min: 1,
    max: MESSAGE_MAX_BYTES,
    default: MESSAGE_MAX_BYTES,
    unit: "bytes",
  },
  {
    name: "queueMax",
    type: "integer",
    description: "Unread messages one agent may hold.",
    min: 1,
    max: MESSAGE_QUEUE_MAX,
    default: MESSAGE_QUEUE_MAX,
    unit: "messages",
  },
  {
    name: "pairRatePerMinute",
    type: "integer",
    description: "Messages a minute from one agent to another (sliding window).",
    min: 1,
    max: AGENT_PAIR_RATE_LIMIT,
    default: AGENT_PAIR_RATE_LIMIT,
    unit: "messages/minute",
  },
];

/** Send limits from agent_send's settings, each clamped to its descriptor's range. */
export function sendLimitsFrom(parameters: Readonly<Record<string, unknown>>): AgentSendLimits {
  return integerSettings(parameters, SEND_SETTINGS) as unknown as AgentSendLimits;
}

export const agentSendTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the agent limits (depth, count, rate) bound it.
  approval: { default: "allow" },
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
    parameterDescriptors: SEND_SETTINGS,
  },
  validateArguments: storedTextCheck("message", "agentId", "targetAgentId"),
  async execute(args, context) {
    const { agentId, targetAgentId, message } = args as { agentId: string; targetAgentId: string; message: string };
    const agents = agentServiceFrom(context.services, "agent_send");
    if (agentId !== agents.agentId) {
      throw new AccessDeniedError(
        `agentId ${quote(agentId)} is not your agent id (${agents.agentId}); an agent sends only as itself.`,
        { argument: "agentId", rule: "lineage" },
      );
    }
    if (message === "") throw new ToolArgumentError("message must not be empty.", { argument: "message" });
    const limits = sendLimitsFrom(context.settings.values);
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
