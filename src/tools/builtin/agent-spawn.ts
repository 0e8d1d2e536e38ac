/**
 * agent_spawn: starts a sub-agent from a template; it runs
 * its own tool loop on the given message and answers. Returns `{agentId, response, depth}` plus `status`, `usage`
 * and `template`; with `wait: false` it returns at once with status `running` (collect it with agent_wait).
 *
 * The calling agent, its depth and its tree come from the host's lineage (context.services.agents), never from
 * the arguments: a `parentId` that is not the caller's own id is refused, and omitting it changes nothing.
 */
import {
  AGENT_GRACE_TURN_MS,
  type AgentSpawnLimits,
  agentServiceFrom,
  DEFAULT_AGENT_MAX_TURNS,
  DEFAULT_AGENT_TIME_SECONDS,
  DEFAULT_MAX_CONCURRENT_AGENTS,
  DEFAULT_MAX_SUB_AGENTS,
  DEFAULT_MAX_TREE_AGENTS,
  DEFAULT_TREE_TOKEN_BUDGET,
  listAgentTemplates,
  MAX_AGENT_DEPTH,
  MESSAGE_MAX_BYTES,
} from "../../core/agents.js";
import { storedTextCheck } from "../../core/arg-parsing.js";
import { AccessDeniedError, LimitExceededError, quote, ToolArgumentError } from "../../core/errors.js";
import { defineTool, integerSettings } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolDefinition, ToolParameterDescriptor } from "../../core/types.js";

/** Settings of agent_spawn: the spawn limits (each default is also its ceiling; a user or admin may lower it). */
const SPAWN_SETTINGS: ToolParameterDescriptor[] = [
  {
    name: "maxDepth",
    type: "integer",
    description: "Deepest sub-agent (the chat is depth 0).",
    min: 1,
    max: MAX_AGENT_DEPTH,
    default: MAX_AGENT_DEPTH,
    unit: "levels",
  },
  {
    name: "maxSubAgents",
    type: "integer",
    description: "Sub-agents one agent may spawn in total.",
    min: 1,
    max: DEFAULT_MAX_SUB_AGENTS,
    default: DEFAULT_MAX_SUB_AGENTS,
    unit: "agents",
  },
  {
    name: "maxTreeAgents",
    type: "integer",
    description: "Sub-agents one chat turn may spawn in total, at every depth.",
    min: 1,
    max: DEFAULT_MAX_TREE_AGENTS,
    default: DEFAULT_MAX_TREE_AGENTS,
    unit: "agents",
  },
  {
    name: "maxConcurrent",
    type: "integer",
    description: "Sub-agents of one chat turn running at once.",
    min: 1,
    max: DEFAULT_MAX_CONCURRENT_AGENTS,
    default: DEFAULT_MAX_CONCURRENT_AGENTS,
    unit: "agents",
  },
  {
    name: "maxTurns",
    type: "integer",
    description: "Model turns per run of a sub-agent (then one grace turn to answer).",
    min: 1,
    max: DEFAULT_AGENT_MAX_TURNS,
    default: DEFAULT_AGENT_MAX_TURNS,
    unit: "turns",
  },
  {
    name: "timeSeconds",
    type: "integer",
    description: "Wall time per run of a sub-agent (then one grace turn to answer).",
    min: 1,
    max: DEFAULT_AGENT_TIME_SECONDS,
    default: DEFAULT_AGENT_TIME_SECONDS,
    unit: "seconds",
  },
  {
    name: "tokenBudget",
    type: "integer",
    description:
      "Tokens (input + output) all agents of one chat turn may use; then sub-agents stop with budget_exhausted.",
    min: 1,
    max: DEFAULT_TREE_TOKEN_BUDGET,
    default: DEFAULT_TREE_TOKEN_BUDGET,
    unit: "tokens",
  },
];

/** Spawn limits from agent_spawn's settings, each clamped to its descriptor's range. */
export function spawnLimitsFrom(parameters: Readonly<Record<string, unknown>>): AgentSpawnLimits {
  return integerSettings(parameters, SPAWN_SETTINGS) as unknown as AgentSpawnLimits;
}

const BASE_DESCRIPTION =
  "Spawn a sub-agent from a template to work on a self-contained task with its own tools and context; it answers with a report (response). Use it to split independent work (several agents with wait=false, then agent_wait) or to keep noisy exploration out of your context. A sub-agent sees only the message you give it, so include everything it needs. Returns agentId, response, depth, status (completed, max_turns, timeout, budget_exhausted, cancelled, error; running when wait=false) and usage.";

const definition: ToolDefinition = {
  name: "agent_spawn",
  description: BASE_DESCRIPTION,
  parameters: {
    type: "object",
    properties: {
      template: { type: "string", description: "Template id of the sub-agent (see the list in this description)." },
      message: { type: "string", description: "The task for the sub-agent: everything it needs to know." },
      parentId: {
        type: "string",
        description: "Optional. Your own agent id, for tracking; it must be your own id when given.",
      },
      wait: {
        type: "boolean",
        description: "true (default): wait for the answer. false: return at once with status running.",
        default: true,
      },
    },
    required: ["template", "message"],
    additionalProperties: false,
  },
};

/** The model-facing definition with the list of templates appended. */
function buildDefinition(): ToolDefinition {
  const templates = listAgentTemplates();
  if (templates.length === 0) return definition;
  const list = templates.map((t) => `- ${t.id}: ${t.description}`).join("\n");
  return { ...definition, description: `${BASE_DESCRIPTION}\n\nTemplates:\n${list}` };
}

export const agentSpawnTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the agent limits (depth, count, rate) bound it.
  approval: { default: "allow" },
  definition,
  buildDefinition,
  settings: {
    title: "Sub-agents: spawn",
    description:
      "Lets the model start sub-agents (from templates) that run their own tool loop; bounded by depth, quota, tree, concurrency, turn, time and token limits.",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: SPAWN_SETTINGS,
  },
  managesOwnTimeout: true,
  // A waiting spawn lasts at most the child's wall time plus its grace turn; the host enforces both.
  timeoutMs: (args, settings) =>
    args.wait === false ? 30_000 : spawnLimitsFrom(settings.values).timeSeconds * 1000 + AGENT_GRACE_TURN_MS,
  validateArguments: storedTextCheck("message", "parentId"),
  async execute(args, context) {
    const { template, message, parentId, wait } = args as {
      template: string;
      message: string;
      parentId?: string;
      wait?: boolean;
    };
    const agents = agentServiceFrom(context.services, "agent_spawn");
    if (parentId !== undefined && parentId !== agents.agentId) {
      throw new AccessDeniedError(
        `parentId ${quote(parentId)} is not your agent id (${agents.agentId}). Omit parentId: a sub-agent's parent is always the agent that spawns it.`,
        { argument: "parentId", rule: "lineage" },
      );
    }
    if (message.trim() === "") throw new ToolArgumentError("message must not be empty.", { argument: "message" });
    if (Buffer.byteLength(message, "utf8") > MESSAGE_MAX_BYTES) {
      throw new LimitExceededError(`message exceeds MESSAGE_MAX_BYTES (${MESSAGE_MAX_BYTES} bytes).`, {
        limit: "MESSAGE_MAX_BYTES",
        value: MESSAGE_MAX_BYTES,
        argument: "message",
      });
    }
    return agents.spawn(
      {
        template,
        message,
        wait: wait !== false,
        ...(context.toolCallId !== undefined ? { callId: context.toolCallId } : {}),
      },
      spawnLimitsFrom(context.settings.values),
      context.signal,
    );
  },
});
