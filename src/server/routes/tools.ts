/**
 * Tool execution route: POST /api/tools/:toolName/execute runs a tool for the authenticated user through the
 * approval gate and executeTool (settings, argument validation, time budget, metrics), optionally in a chat's
 * context.
 */
import { Hono } from "hono";
import { runGatedCall } from "../../app/approvals/one-off.js";
import type { AppContext } from "../../app/context.js";
import { outcomeJsonText } from "../../core/execution/run.js";
import { markCheckedJson, TOOL_ARGUMENT_LIMITS } from "../../core/json-limits.js";
import { type AuthEnv, HttpError, readJsonBody, sendJson, sendJsonText } from "../http.js";
import { ExecuteToolBody, ExecuteToolResponse, ToolListResponse } from "../schemas.js";

/** Routes to list the user's enabled tools and to execute one. */
export function toolRoutes(ctx: AppContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get("/", async (c) => {
    const enabled = await ctx.runtime.getEnabledToolRuntime(c.get("userId"));
    return sendJson(c, ToolListResponse, { tools: enabled.definitions });
  });
  app.post("/:toolName/execute", async (c) => {
    const userId = c.get("userId");
    const body = await readJsonBody<{
      arguments?: unknown;
      workingDirectory?: string;
      chatId?: string;
      approvalId?: string;
      onAsk?: "return" | "wait";
    }>(
      c,
      ExecuteToolBody,
      // The arguments plus a few small fields: the tool-argument limits apply to the whole body.
      TOOL_ARGUMENT_LIMITS,
      { toolArguments: true },
    );
    // Parsed from text that passed the argument limits: the runtime need not walk the arguments again.
    markCheckedJson(body.arguments, TOOL_ARGUMENT_LIMITS);
    // The one binder decides (chat roots, admins); a call in a chat uses the chat's directory.
    const caller = { userId, admin: ctx.admins.isAdmin(userId) };
    let workingDirectory: string | null;
    if (body.chatId) {
      const chat = await ctx.chats.get(userId, body.chatId);
      if (!chat) throw new HttpError(404, "not_found", `No chat "${body.chatId}" for this user.`);
      workingDirectory = ctx.binder.forChat(chat, body.workingDirectory, caller);
    } else {
      workingDirectory = body.workingDirectory === undefined ? null : ctx.binder.bind(body.workingDirectory, caller);
    }
    const controller = new AbortController();
    c.req.raw.signal?.addEventListener("abort", () => controller.abort(), { once: true });
    // Through the approval gate: an ask returns its pending approval id (or waits, with onAsk "wait").
    const toolName = c.req.param("toolName");
    const outcome = await runGatedCall(toolName, body.arguments ?? {}, {
      runtime: ctx.runtime,
      approvals: ctx.approvals,
      userId,
      chatId: body.chatId ?? null,
      workingDirectory,
      signal: controller.signal,
      onAsk: body.onAsk ?? "return",
      ...(body.approvalId ? { approvalId: body.approvalId } : {}),
    });
    // Every tool outcome is 200 (a missing file, spill or approval included): 404 only for a tool that does not exist.
    const unknownTool = !outcome.ok && outcome.error.code === "not_found" && !ctx.runtime.registry.get(toolName);
    if (unknownTool) {
      // The runtime's message speaks to a model ("call one of the tools you were given"); this caller is a client.
      const message = `Unknown tool ${JSON.stringify(toolName.slice(0, 200))}. List your enabled tools with GET /api/tools, every tool with GET /api/settings/tools.`;
      return sendJsonText(
        c,
        ExecuteToolResponse,
        JSON.stringify({ ...outcome, error: { ...outcome.error, message } }),
        404,
      );
    }
    // The result's JSON text from the run stage, when it kept one (large results): not serialized a second time.
    return sendJsonText(c, ExecuteToolResponse, outcomeJsonText(outcome), 200);
  });
  return app;
}
