/**
 * Approval routes, the HTTP side of the ask round-trip: list the user's pending asks and answer one. `POST
 * /api/approvals/:id {decision: allow_once | allow_always | deny, message?}` → 200 with the decided approval; 404 for
 * an unknown id (or another user's), 409 when it is already decided or has expired. A chat's pending asks are also at
 * `GET /api/chats/:id/approvals` (chats.ts).
 */
import { Hono } from "hono";
import Type from "typebox";
import { ApprovalConflictError, allowsAlways } from "../../app/approvals/service.js";
import type { AppContext } from "../../app/context.js";
import type { ApprovalRecord } from "../../storage/approvals.js";
import { type AuthEnv, HttpError, readJsonBody, sendJson } from "../http.js";
import { ErrorBody } from "../schemas.js";

/** Body of POST /api/approvals/:id. */
export const DecideApprovalBody = Type.Object(
  {
    decision: Type.Union([Type.Literal("allow_once"), Type.Literal("allow_always"), Type.Literal("deny")], {
      description:
        "allow_once runs this call; allow_always also stores an allow rule (visible in the tool's settings), where it makes the same call run without asking next time (else 422); deny feeds a denied_by_user error back to the model.",
    }),
    message: Type.Optional(
      Type.String({ maxLength: 2000, description: "Words for the model, e.g. why not or what to do instead." }),
    ),
  },
  { additionalProperties: false },
);

const Nullable = <T extends Type.TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** An approval as the API returns it. */
export const ApprovalSchema = Type.Object({
  id: Type.String(),
  chatId: Nullable(Type.String()),
  toolCallId: Type.String(),
  tool: Type.String(),
  preview: Type.String({ description: "The call's arguments as JSON, secrets redacted, at most a few KB." }),
  rule: Nullable(Type.Object({ decision: Type.String(), match: Type.String() })),
  reason: Type.String(),
  allowAlways: Type.Boolean({
    description:
      "Whether allow_always is offered: only when the rule it stores would make the same call run without asking next time (sent otherwise, it is refused with 422 saying why).",
  }),
  workingDirectory: Nullable(
    Type.String({ description: "The resolved working directory the call runs in (null: the server's own)." }),
  ),
  agentPath: Nullable(Type.Array(Type.String())),
  status: Type.String({ description: "pending, allowed, denied, expired, cancelled or used" }),
  decision: Nullable(Type.String()),
  message: Nullable(Type.String()),
  decidedBy: Nullable(Type.String()),
  decidedAt: Nullable(Type.String()),
  createdAt: Type.String(),
  expiresAt: Type.String(),
});

/** GET …/approvals response. */
export const ApprovalListResponse = Type.Object({ approvals: Type.Array(ApprovalSchema) });

/** The public view of a stored approval (no HMAC, no hash). */
export function approvalView(record: ApprovalRecord) {
  return {
    id: record.id,
    chatId: record.chatId,
    toolCallId: record.toolCallId,
    tool: record.tool,
    preview: record.preview,
    rule: (record.rule as { decision: string; match: string } | null) ?? null,
    reason: record.reason,
    allowAlways: allowsAlways(record),
    workingDirectory: record.workingDirectory,
    agentPath: record.agentPath,
    status: record.status,
    decision: record.decision,
    message: record.message,
    decidedBy: record.decidedBy,
    decidedAt: record.decidedAt,
    createdAt: record.createdAt,
    expiresAt: record.expiresAt,
  };
}

const json = (schema: unknown) => ({ "application/json": { schema } });
const error = (description: string) => ({ description, content: json(ErrorBody) });
const secured = { security: [{ bearerAuth: [] }] };

/** OpenAPI path items of the approval routes. */
export const approvalOpenApiPaths: Record<string, unknown> = {
  "/api/approvals": {
    get: {
      ...secured,
      summary: "The user's pending approvals (every chat and one-off calls), oldest first.",
      responses: { 200: { description: "Pending approvals", content: json(ApprovalListResponse) } },
    },
  },
  "/api/approvals/{id}": {
    post: {
      ...secured,
      parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
      summary: "Answer a pending approval: allow_once, allow_always (stores an allow rule) or deny.",
      requestBody: { required: true, content: json(DecideApprovalBody) },
      responses: {
        200: { description: "The decided approval", content: json(ApprovalSchema) },
        400: error("Malformed body"),
        403: error("allow_always: the approval rules were set by an admin"),
        404: error("No such approval for this user"),
        409: error("Already decided, used or expired"),
      },
    },
  },
  "/api/chats/{id}/approvals": {
    get: {
      ...secured,
      parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
      summary: "The chat's pending approvals, oldest first.",
      responses: {
        200: { description: "Pending approvals", content: json(ApprovalListResponse) },
        404: error("No such chat for this user"),
      },
    },
  },
};

/** Routes mounted at /api/approvals. */
export function approvalRoutes(ctx: AppContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get("/", async (c) => {
    const pending = await ctx.approvals.listPending(c.get("userId"));
    return sendJson(c, ApprovalListResponse, { approvals: pending.map(approvalView) });
  });
  app.post("/:id", async (c) => {
    const body = await readJsonBody<{ decision: "allow_once" | "allow_always" | "deny"; message?: string }>(
      c,
      DecideApprovalBody,
    );
    const userId = c.get("userId");
    try {
      const record = await ctx.approvals.decide(userId, c.req.param("id"), {
        decision: body.decision,
        ...(body.message !== undefined ? { message: body.message } : {}),
        decidedBy: userId,
        admin: ctx.admins.isAdmin(userId),
      });
      return sendJson(c, ApprovalSchema, approvalView(record));
    } catch (thrown) {
      if (thrown instanceof ApprovalConflictError) {
        throw new HttpError(
          409,
          "conflict",
          thrown.message,
          thrown.approval ? { status: thrown.approval.status } : undefined,
        );
      }
      throw thrown;
    }
  });
  return app;
}
