/**
 * agent_spawn (the "Agent Communication" part of the sub-agent spec): starts a sub-agent from a template; it runs
 * its own tool loop on the given message and answers. Returns `{agentId, response, depth}` plus `status`, `usage`
 * and `template`; with `wait: false` it returns at once with status `running` (collect it with agent_wait).
 *
 * The calling agent, its depth and its tree come from the host's lineage (context.services.agents), never from
 * the arguments: a `parentId` that is not the caller's own id is refused, and omitting it changes nothing.
 */
import {
  AGENT_GRACE_TURN_MS,
  AGENT_SPAWN_SETTING_DESCRIPTORS,
  agentServiceFrom,
  listAgentTemplates,
  MESSAGE_MAX_BYTES,
  spawnLimitsFrom,
} from "../../core/agents.js";
import { AccessDeniedError, LimitExceededError, ToolArgumentError } from "../../core/errors.js";
import { registerTool } from "../../core/registry.js";
import { defineTool } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolDefinition } from "../../core/types.js";

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
  definition,
  buildDefinition,
  settings: {
    title: "Sub-agents: spawn",
    description:
      "Lets the model start sub-agents (from templates) that run their own tool loop; bounded by depth, quota, tree, concurrency, turn, time and token limits.",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: AGENT_SPAWN_SETTING_DESCRIPTORS,
  },
  managesOwnTimeout: true,
  // A waiting spawn lasts at most the child's wall time plus its grace turn; the host enforces both.
  timeoutMs: (args, settings) =>
    args.wait === false ? 30_000 : spawnLimitsFrom(settings.parameters).timeSeconds * 1000 + AGENT_GRACE_TURN_MS,
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
        `parentId "${parentId}" is not your agent id (${agents.agentId}). Omit parentId: a sub-agent's parent is always the agent that spawns it.`,
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
      { template, message, wait: wait !== false },
      spawnLimitsFrom(context.settings.parameters),
      context.signal,
    );
  },
});

registerTool(agentSpawnTool);
