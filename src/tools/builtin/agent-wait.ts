/**
 * agent_wait: waits until the named sub-agents (default: all of the children the caller spawned) finish, and
 * returns their statuses, answers and usage; `timedOut` is true when some were still running at the deadline.
 * Bounded: `timeoutMs` defaults to 30 s and may be at most 1 hour (and at least the `minTimeoutMs` setting).
 */
import { agentServiceFrom, DEFAULT_AGENT_WAIT_MS, MAX_AGENT_WAIT_MS } from "../../core/agents.js";
import { storedTextCheck } from "../../core/arg-parsing.js";
import { defineTool, integerSetting } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolParameterDescriptor } from "../../core/types.js";

const MIN_TIMEOUT: ToolParameterDescriptor = {
  name: "minTimeoutMs",
  type: "integer",
  description: "Shortest wait a model may ask for (shorter requests wait this long).",
  min: 0,
  max: DEFAULT_AGENT_WAIT_MS,
  default: 1000,
  unit: "milliseconds",
};

/** Settings of agent_wait. */
const WAIT_SETTINGS: ToolParameterDescriptor[] = [MIN_TIMEOUT];

/**
 * How long a call waits: its `timeoutMs` (default DEFAULT_AGENT_WAIT_MS), raised to the user's `minTimeoutMs` and
 * at most MAX_AGENT_WAIT_MS. The one rule both the wait and its time budget follow.
 */
export function waitMsOf(
  args: Readonly<Record<string, unknown>>,
  parameters: Readonly<Record<string, unknown>>,
): number {
  const asked = typeof args.timeoutMs === "number" ? args.timeoutMs : DEFAULT_AGENT_WAIT_MS;
  return Math.min(MAX_AGENT_WAIT_MS, Math.max(integerSetting(parameters, MIN_TIMEOUT), asked));
}

export const agentWaitTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the agent limits (depth, count, rate) bound it.
  approval: { default: "allow" },
  definition: {
    name: "agent_wait",
    description:
      "Wait for sub-agents you spawned (with wait=false) to finish. Returns each one's status, response and usage, and timedOut=true when some are still running at the deadline (call again, or agent_close them).",
    parameters: {
      type: "object",
      properties: {
        agentIds: {
          type: "array",
          items: { type: "string" },
          description: "Agents to wait for (your descendants). Default: all the sub-agents you spawned yourself.",
        },
        timeoutMs: {
          type: "integer",
          minimum: 0,
          maximum: MAX_AGENT_WAIT_MS,
          default: DEFAULT_AGENT_WAIT_MS,
          description: "How long to wait at most, in milliseconds (default 30000, at most 3600000).",
        },
      },
      additionalProperties: false,
    },
  },
  settings: {
    title: "Sub-agents: wait",
    description: "Lets the model wait, boundedly, for the sub-agents it started in the background.",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: WAIT_SETTINGS,
  },
  managesOwnTimeout: true,
  // The wait ends on its own at its deadline; the budget leaves it time to answer.
  timeoutMs: (args, settings) => waitMsOf(args, settings.values) + 5_000,
  validateArguments: storedTextCheck("agentIds"),
  async execute(args, context) {
    const { agentIds, timeoutMs } = args as { agentIds?: string[]; timeoutMs?: number };
    const agents = agentServiceFrom(context.services, "agent_wait");
    return agents.wait({ agentIds, timeoutMs: waitMsOf({ timeoutMs }, context.settings.values) }, context.signal);
  },
});
