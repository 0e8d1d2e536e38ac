/**
 * Sub-agent routes: the user's agents (filter by chat), one agent with its status, usage and transcript, cancel
 * an agent with its descendants, and the templates. Every agent is per user: another user's agent is a 404.
 */
import { Hono } from "hono";
import Type from "typebox";
import { summarizeTemplate } from "../../agents/templates.js";
import type { AppContext } from "../../app/context.js";
import { quote } from "../../core/errors.js";
import type { AgentRecord } from "../../storage/agent-records.js";
import { type AuthEnv, HttpError } from "../http.js";
import { ErrorBody } from "../schemas.js";

/** An agent as the API returns it (no user id, no internal counters). */
export function agentView(a: AgentRecord) {
  return {
    id: a.id,
    chatId: a.chatId,
    parentId: a.parentId,
    rootId: a.rootId,
    depth: a.depth,
    path: a.path,
    template: a.template,
    provider: a.provider,
    model: a.model,
    status: a.status,
    owner: a.status === "running" ? a.instanceId : null,
    task: a.task,
    response: a.result,
    note: a.note,
    usage: a.usage,
    queueDepth: a.queueDepth,
    createdAt: a.createdAt,
    finishedAt: a.finishedAt,
  };
}

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

/** An agent in API responses. */
export const AgentSchema = Type.Object({
  id: Type.String(),
  chatId: Nullable(Type.String()),
  parentId: Nullable(Type.String()),
  rootId: Type.String(),
  depth: Type.Integer(),
  path: Type.String({ description: "Agent ids from the chat turn's root agent down to this one, joined by /" }),
  template: Type.String(),
  provider: Nullable(Type.String()),
  model: Nullable(Type.String()),
  status: Type.String({
    description: "running, completed, max_turns, timeout, budget_exhausted, cancelled, error or interrupted",
  }),
  owner: Nullable(
    Type.String({
      description:
        "While running: the server instance that runs it (host:pid:nonce, the owner of its chat turn); null otherwise",
    }),
  ),
  task: Type.String(),
  response: Nullable(Type.String()),
  note: Nullable(Type.String()),
  usage: Type.Object({
    inputTokens: Type.Integer(),
    outputTokens: Type.Integer(),
    turns: Type.Integer(),
    toolCalls: Type.Integer(),
    durationMs: Type.Integer(),
  }),
  queueDepth: Type.Integer(),
  createdAt: Type.String(),
  finishedAt: Nullable(Type.String()),
});

const json = (schema: unknown) => ({ "application/json": { schema } });
const error = (description: string) => ({ description, content: json(ErrorBody) });
const secured = { security: [{ bearerAuth: [] }] };
const agentId = { name: "id", in: "path", required: true, schema: { type: "string" } };

/** OpenAPI path items of the agent routes. */
export const agentOpenApiPaths: Record<string, unknown> = {
  "/api/agents": {
    get: {
      ...secured,
      summary: "The user's sub-agents, newest first.",
      parameters: [
        { name: "chatId", in: "query", required: false, schema: { type: "string" }, description: "Only this chat's" },
        { name: "limit", in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: 1000 } },
      ],
      responses: { 200: { description: "Agents", content: json(Type.Object({ agents: Type.Array(AgentSchema) })) } },
    },
  },
  "/api/agents/templates": {
    get: {
      ...secured,
      summary:
        "The agent templates agent_spawn offers (built-in general, the config file's, the templates directory's).",
      responses: {
        200: { description: "Templates", content: json(Type.Object({ templates: Type.Array(Type.Unknown()) })) },
        422: error("A template is invalid (the message names the file and field)"),
      },
    },
  },
  "/api/agents/{id}": {
    get: {
      ...secured,
      parameters: [agentId],
      summary: "One agent: status, usage, response and its conversation (transcript).",
      responses: {
        200: {
          description: "The agent",
          content: json(Type.Intersect([AgentSchema, Type.Object({ transcript: Type.Array(Type.Unknown()) })])),
        },
        404: error("No such agent for this user"),
      },
    },
  },
  "/api/agents/{id}/cancel": {
    post: {
      ...secured,
      parameters: [agentId],
      summary: "Cancel an agent and all its descendants (their model streams and tool processes stop).",
      responses: {
        200: {
          description: "What was cancelled",
          content: json(
            Type.Object({ closed: Type.Boolean(), agentId: Type.String(), cancelled: Type.Array(Type.String()) }),
          ),
        },
        404: error("No such agent for this user"),
      },
    },
  },
};

/** Routes mounted at /api/agents. */
export function agentRoutes(ctx: AppContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.get("/", async (c) => {
    const limitText = c.req.query("limit");
    const limit = limitText === undefined ? undefined : Number(limitText);
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000)) {
      throw new HttpError(400, "bad_request", "limit must be an integer from 1 to 1000.");
    }
    const agents = await ctx.agents.list(c.get("userId"), { chatId: c.req.query("chatId") || undefined, limit });
    return c.json({ agents: agents.map(agentView) });
  });

  app.get("/templates", (c) => c.json({ templates: ctx.agents.templates.list().map(summarizeTemplate) }));

  app.get("/:id", async (c) => {
    const agent = await ctx.agents.get(c.get("userId"), c.req.param("id"));
    if (agent?.kind !== "child") {
      throw new HttpError(404, "not_found", `No agent ${quote(c.req.param("id"))} for this user.`);
    }
    return c.json({ ...agentView(agent), transcript: agent.transcript });
  });

  app.post("/:id/cancel", async (c) => c.json(await ctx.agents.cancel(c.get("userId"), c.req.param("id"))));

  return app;
}
