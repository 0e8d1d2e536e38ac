/**
 * Chat routes: create a chat bound to a working directory, provider and model; read it with its messages; send a
 * message and receive the tool loop's events as Server-Sent Events. Every chat is per user: another user's chat is a
 * 404. A client that disconnects stops the turn and its tools; a pending approval stays pending (unless the message
 * said `onDisconnect: "cancel"`) and answering it resumes the turn.
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import Type from "typebox";
import { type ApprovalResponder, TurnSuspended } from "../../app/approvals/service.js";
import { type ChatService, ChatService as Service } from "../../app/chat-service.js";
import { CHAT_PROVIDERS } from "../../app/chat-types.js";
import type { AppContext } from "../../app/context.js";
import { type AuthEnv, HttpError, readJsonBody, sendJson } from "../http.js";
import { ErrorBody } from "../schemas.js";
import { ChatStreamEventSchema } from "../stream-events.js";
import { ApprovalListResponse, approvalView } from "./approvals.js";

/** Body of POST /api/chats. */
export const CreateChatBody = Type.Object(
  {
    workingDirectory: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          "Server-side directory the chat binds: absolute, or relative to your first chat root (TOOLHOST_CHAT_ROOTS). Must exist and be a directory, and lie within the chat roots when they are set (then it is required).",
      }),
    ),
    provider: Type.Union(
      CHAT_PROVIDERS.map((p) => Type.Literal(p)),
      {
        description:
          "Wire format: openai (Responses), openai-chat (Chat Completions, any compatible server), gemini, anthropic.",
      },
    ),
    model: Type.String({ minLength: 1, maxLength: 200, description: "Provider model id, e.g. gpt-5.4-mini." }),
    title: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

/** Body of POST /api/chats/:id/messages. */
export const SendMessageBody = Type.Object(
  {
    content: Type.String({ minLength: 1, maxLength: 200_000, description: "The user's message." }),
    onAsk: Type.Optional(
      Type.Union([Type.Literal("wait"), Type.Literal("deny")], {
        description:
          "When the approval policy asks about a call: wait (default) for an answer through POST /api/approvals/:id (the stream shows approval_requested) until it expires (TOOLHOST_APPROVAL_TIMEOUT_SECONDS, default 15 min), or deny at once (for callers nobody watches).",
      }),
    ),
    onDisconnect: Type.Optional(
      Type.Union([Type.Literal("keep"), Type.Literal("cancel")], {
        description:
          "When this stream's client disconnects: keep (default) leaves a pending approval pending — answering it later (POST /api/approvals/:id, toolhost approvals, the settings page) resumes and completes the turn, whose messages are then stored with the chat — or cancel the turn and its pending approvals at once. Either way a turn that waits for no approval is cancelled.",
      }),
    ),
  },
  { additionalProperties: false },
);

const Nullable = (schema: ReturnType<typeof Type.String>) => Type.Union([schema, Type.Null()]);

/** A chat as the API returns it. */
export const ChatSchema = Type.Object({
  id: Type.String(),
  title: Nullable(Type.String()),
  workingDirectory: Nullable(Type.String()),
  provider: Nullable(Type.String()),
  model: Nullable(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

/** Body of PATCH /api/chats/:id. */
export const RenameChatBody = Type.Object(
  {
    title: Type.Union([Type.String({ maxLength: 200 }), Type.Null()], {
      description: "The chat's new title; null (or blank) clears it.",
    }),
  },
  { additionalProperties: false },
);

/** GET /api/chats response: one page. */
export const ChatListResponse = Type.Object({
  chats: Type.Array(ChatSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()], {
    description: "Pass as `cursor` for the next page; null on the last page.",
  }),
});

/** A stored provider-neutral message. */
export const ChatMessageSchema = Type.Object({
  id: Type.String(),
  seq: Type.Integer(),
  createdAt: Type.String(),
  role: Type.Union([Type.Literal("user"), Type.Literal("assistant"), Type.Literal("tool")]),
  content: Type.Optional(Type.String({ description: "user and assistant text" })),
  toolCalls: Type.Optional(
    Type.Array(Type.Object({ id: Type.String(), name: Type.String(), arguments: Type.String() }), {
      description: "assistant: the tool calls it made (arguments as raw JSON text)",
    }),
  ),
  results: Type.Optional(
    Type.Array(Type.Object({ id: Type.String(), name: Type.String(), ok: Type.Boolean(), content: Type.String() }), {
      description: "tool: the results fed back, one per call",
    }),
  ),
  providerData: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description: "assistant: opaque provider data echoed back on the next turn (item ids, thought signatures)",
    }),
  ),
});

/** The turn running in a chat: its id and the instance that owns it. */
export const RunningTurnSchema = Type.Union(
  [
    Type.Object({
      id: Type.String(),
      owner: Nullable(
        Type.String({
          description:
            "The server instance running it (host:pid:nonce); null while it is handed over or waits for approvals",
        }),
      ),
      state: Type.Union([Type.Literal("running"), Type.Literal("waiting_for_approval")], {
        description:
          "running: on an instance now; waiting_for_approval: stopped at asks nobody has answered yet (its client left); an answer resumes it, POST /cancel ends it",
      }),
    }),
    Type.Null(),
  ],
  {
    description:
      "The chat's unfinished turn (on any instance), or null; while there is one, a new message is refused (409)",
  },
);

/** GET /api/chats/:id response. */
export const ChatWithMessagesSchema = Type.Intersect([
  ChatSchema,
  Type.Object({ messages: Type.Array(ChatMessageSchema), turn: RunningTurnSchema }),
]);

/** POST /api/chats/:id/cancel response. */
export const CancelTurnResponse = Type.Object({
  cancelled: Type.Boolean({ description: "Whether a turn was running (it stops within a second wherever it runs)." }),
  turnId: Type.Union([Type.String(), Type.Null()], { description: "The cancelled turn's id; null when none ran." }),
});

const json = (schema: unknown) => ({ "application/json": { schema } });
const error = (description: string) => ({ description, content: json(ErrorBody) });
const secured = { security: [{ bearerAuth: [] }] };
const chatId = { name: "id", in: "path", required: true, schema: { type: "string" } };

/** OpenAPI path items of the chat routes, merged into /api/openapi.json. */
export const chatOpenApiPaths: Record<string, unknown> = {
  "/api/chats": {
    get: {
      ...secured,
      summary: "The user's chats, most recently active first, one page at a time.",
      parameters: [
        { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100, default: 50 } },
        { name: "cursor", in: "query", schema: { type: "string" }, description: "nextCursor of the previous page" },
      ],
      responses: {
        200: { description: "One page of chats", content: json(ChatListResponse) },
        400: error("Invalid limit or cursor"),
      },
    },
    post: {
      ...secured,
      summary: "Create a chat bound to a working directory, a provider and a model.",
      requestBody: { required: true, content: json(CreateChatBody) },
      responses: {
        201: { description: "The chat", content: json(ChatSchema) },
        400: error("Malformed body, unknown provider, or a workingDirectory that does not exist or is not a directory"),
        403: error("workingDirectory outside TOOLHOST_CHAT_ROOTS"),
        503: error("The provider is not configured (code provider_not_configured; the message names the key to set)"),
      },
    },
  },
  "/api/chats/{id}": {
    get: {
      ...secured,
      parameters: [chatId],
      summary: "A chat with its messages (tool calls and results included).",
      responses: {
        200: { description: "The chat", content: json(ChatWithMessagesSchema) },
        404: error("No such chat for this user"),
      },
    },
    patch: {
      ...secured,
      parameters: [chatId],
      summary: "Rename a chat.",
      requestBody: { required: true, content: json(RenameChatBody) },
      responses: {
        200: { description: "The renamed chat", content: json(ChatSchema) },
        400: error("Malformed body"),
        404: error("No such chat for this user"),
      },
    },
    delete: {
      ...secured,
      parameters: [chatId],
      summary: "Delete a chat with its messages.",
      responses: {
        204: { description: "Deleted" },
        404: error("No such chat for this user"),
        409: error("A turn of this chat is running or waits for approvals (cancel it first)"),
      },
    },
  },
  "/api/chats/{id}/cancel": {
    post: {
      ...secured,
      parameters: [chatId],
      summary:
        "Cancel the chat's running turn, on whichever instance runs it: its model stream and tools (their processes) stop within a second; its complete steps are kept. A turn that waits for approvals after its client left is cancelled too (its pending asks with it).",
      responses: {
        200: { description: "Whether a turn was running", content: json(CancelTurnResponse) },
        404: error("No such chat for this user"),
      },
    },
  },
  "/api/chats/{id}/events": {
    get: {
      ...secured,
      parameters: [
        chatId,
        {
          name: "after",
          in: "query",
          schema: { type: "integer", minimum: 0 },
          description: "Replay the events after this id (the SSE `id:` of the last one received); default 0: all.",
        },
        {
          name: "Last-Event-ID",
          in: "header",
          schema: { type: "string" },
          description: "Same as `after` (sent by EventSource when it reconnects); `after` wins when both are given.",
        },
      ],
      summary:
        "The chat's turn events as Server-Sent Events, from any instance: every event a turn streams (the same names and data as POST /api/chats/{id}/messages) has an `id:`, numbered per chat and stored in order. Replays the stored events after `after`, then follows the running turn (wherever it runs, also after another instance took it over) and ends after its `done`; ends at once when no turn runs and nothing is left to replay.",
      responses: {
        200: {
          description: "text/event-stream of stored and live turn events",
          content: { "text/event-stream": { schema: { type: "string" } } },
        },
        400: error("after / Last-Event-ID is not a non-negative integer"),
        404: error("No such chat for this user"),
      },
    },
  },
  "/api/chats/{id}/messages": {
    post: {
      ...secured,
      parameters: [chatId],
      summary:
        "Send a message and stream the tool loop as Server-Sent Events. Each event's name is its `type` and its data the JSON event: iteration {n}, text_delta {delta}, tool_call_started {id,name}, tool_call_arguments_delta {id,delta}, tool_call_completed {id,name,arguments}, usage {inputTokens,outputTokens}, finish {reason}, tool_progress {id,name,progress}, tool_result {id,name,ok,result|error,durationMs}, approval_requested {approvalId,toolCallId,tool,preview,subjects,rule,reason,allowAlways,expiresAt,workingDirectory,agentPath?} (answer with POST /api/approvals/{approvalId}), approval_resolved {approvalId,toolCallId,tool,decision,decidedBy}, error {code,message}, and a final done {reason: text|max_iterations|aborted|error, iterations, messages}. Every event has an `id:` (numbered per chat and stored in order): GET /api/chats/{id}/events replays and follows the turn from any instance. Disconnecting stops the turn and its running tools; a pending approval stays pending and answering it resumes and completes the turn (its events on GET /api/chats/{id}/events, its messages on GET /api/chats/{id}); with onDisconnect: cancel it is cancelled and the completed steps are kept. A server that shuts down hands the turn over (error {code: handed_over}, then done): another instance, or this one's next start, continues it. If the server stops while an approval is pending, the approval stays pending and answering it (on any instance, after the restart) resumes the turn.",
      requestBody: { required: true, content: json(SendMessageBody) },
      responses: {
        200: {
          description:
            "text/event-stream of the turn's events: each SSE event is named by its type, and its data is one ChatStreamEvent as JSON (one schema per event type).",
          content: { "text/event-stream": { schema: ChatStreamEventSchema } },
        },
        400: error("Malformed body"),
        404: error("No such chat for this user"),
        409: error("Another turn of this chat is running"),
        503: error("The chat's provider is not configured (e.g. missing API key)"),
      },
    },
  },
};

/** The responder of a caller that asked not to wait: every ask is refused at once, naming why it asks. */
const HEADLESS_DENY: ApprovalResponder = {
  unattended: "The caller asked not to wait for approvals (onAsk: deny).",
  answer: async () => undefined,
};

/** Interval (ms) of SSE comment pings that keep idle connections (long tool runs) open through proxies. */
const PING_INTERVAL_MS = 15_000;

/**
 * Routes mounted at /api/chats. `service` defaults to a ChatService over the context's repository, runtime and
 * working-directory binder, configured from process.env (API keys, base URLs, TOOLHOST_CHAT_MAX_ITERATIONS).
 */
export function chatRoutes(ctx: AppContext, service?: ChatService): Hono<AuthEnv> {
  const chats =
    service ??
    new Service({
      chats: ctx.chats,
      runtime: ctx.runtime,
      logger: ctx.logger,
      approvals: ctx.approvals,
      agents: ctx.agents,
      binder: ctx.binder,
      turns: ctx.turns,
    });
  // Turns whose process stopped while they waited for approvals resume here once answered.
  ctx.approvals.setResumer((turn) => void chats.resumeTurn(turn));
  const app = new Hono<AuthEnv>();

  app.get("/", async (c) => {
    const limitText = c.req.query("limit");
    const limit = limitText === undefined ? 50 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      throw new HttpError(400, "bad_request", "limit must be an integer from 1 to 100.");
    const page = await ctx.chats.page(c.get("userId"), { limit, cursor: c.req.query("cursor") || undefined });
    return sendJson(c, ChatListResponse, {
      chats: page.chats.map(({ userId: _u, ...chat }) => chat),
      nextCursor: page.nextCursor,
    });
  });

  app.patch("/:id", async (c) => {
    const body = await readJsonBody<{ title: string | null }>(c, RenameChatBody);
    const title = body.title === null ? null : body.title.trim() || null;
    const renamed = await ctx.chats.rename(c.get("userId"), c.req.param("id"), title);
    if (!renamed) throw new HttpError(404, "not_found", `No chat "${c.req.param("id")}" for this user.`);
    const { userId: _u, ...chat } = renamed;
    return sendJson(c, ChatSchema, chat);
  });

  app.delete("/:id", async (c) => {
    const deleted = await chats.deleteChat(c.get("userId"), c.req.param("id"));
    if (!deleted) throw new HttpError(404, "not_found", `No chat "${c.req.param("id")}" for this user.`);
    return c.body(null, 204);
  });

  app.post("/", async (c) => {
    const body = await readJsonBody<{ workingDirectory?: string; provider: string; model: string; title?: string }>(
      c,
      CreateChatBody,
    );
    const userId = c.get("userId");
    const created = await chats.createChat(userId, body, { admin: ctx.admins.isAdmin(userId) });
    const { userId: _u, ...chat } = created;
    return c.json(chat, 201);
  });

  app.get("/:id", async (c) => {
    const found = await chats.getChat(c.get("userId"), c.req.param("id"));
    if (!found) throw new HttpError(404, "not_found", `No chat "${c.req.param("id")}" for this user.`);
    const { userId: _u, ...chat } = found;
    const running = await ctx.turns.repository.current(found.id);
    const waiting = running ? undefined : await ctx.approvals.repository.activeTurn(found.id);
    const turn = running
      ? { id: running.turnId, owner: running.owner, state: "running" as const }
      : waiting
        ? { id: waiting.id, owner: null, state: "waiting_for_approval" as const }
        : null;
    return c.json({ ...chat, turn });
  });

  app.get("/:id/approvals", async (c) => {
    const userId = c.get("userId");
    const chat = await ctx.chats.get(userId, c.req.param("id"));
    if (!chat) throw new HttpError(404, "not_found", `No chat "${c.req.param("id")}" for this user.`);
    const pending = await ctx.approvals.listPending(userId, chat.id);
    return sendJson(c, ApprovalListResponse, { approvals: pending.map(approvalView) });
  });

  app.post("/:id/messages", async (c) => {
    const body = await readJsonBody<{ content: string; onAsk?: "wait" | "deny"; onDisconnect?: "keep" | "cancel" }>(
      c,
      SendMessageBody,
    );
    const turn = await chats.prepareTurn(
      c.get("userId"),
      c.req.param("id"),
      body.content,
      body.onAsk === "deny" ? { responder: HEADLESS_DENY } : {},
    );
    const controller = new AbortController();
    // A client that leaves suspends the turn (its pending asks stay pending; an answer resumes it) unless it asked
    // to cancel; a turn that waits for no ask stops either way. A server shutting down always suspends.
    const abort = () =>
      controller.abort(body.onDisconnect === "cancel" ? undefined : new TurnSuspended("client_disconnected"));
    const stop = () => controller.abort(new TurnSuspended("server_stopping"));
    c.req.raw.signal?.addEventListener("abort", abort, { once: true });
    // A server shutting down stops the turn and waits until it has stored (or released) its state.
    if (ctx.shutdownSignal.aborted) stop();
    ctx.shutdownSignal.addEventListener("abort", stop, { once: true });
    // A token revoked (or expiring) while the turn streams stops it (a cancel: its asks go with it).
    const unwatchToken = ctx.tokens.watch(c.get("token"), () => controller.abort());
    let finished: () => void = () => {};
    void ctx.track(
      new Promise<void>((resolve) => {
        finished = resolve;
      }),
    );
    return streamSSE(c, async (stream) => {
      stream.onAbort(abort);
      const ping = setInterval(() => {
        if (!stream.aborted) stream.write(": ping\n\n").catch(() => {});
      }, PING_INTERVAL_MS);
      ping.unref?.();
      try {
        // Iterate to the end even after the client left: the turn then stops quickly (its signal is aborted) and
        // its complete steps are stored.
        for await (const event of turn.run(controller.signal)) {
          if (stream.aborted) continue;
          try {
            await stream.writeSSE({ event: event.type, data: JSON.stringify(event), id: String(turn.lastEventId) });
          } catch {
            abort();
          }
        }
      } finally {
        clearInterval(ping);
        c.req.raw.signal?.removeEventListener("abort", abort);
        ctx.shutdownSignal.removeEventListener("abort", stop);
        unwatchToken();
        finished();
      }
    });
  });

  app.post("/:id/cancel", async (c) => {
    const result = await chats.cancelTurn(c.get("userId"), c.req.param("id"));
    return sendJson(c, CancelTurnResponse, result);
  });

  app.get("/:id/events", async (c) => {
    const userId = c.get("userId");
    const chat = await ctx.chats.get(userId, c.req.param("id"));
    if (!chat) throw new HttpError(404, "not_found", `No chat "${c.req.param("id")}" for this user.`);
    const from = c.req.query("after") ?? c.req.header("last-event-id") ?? "0";
    if (!/^\d{1,15}$/.test(from.trim()))
      throw new HttpError(400, "bad_request", "after (or Last-Event-ID) must be a non-negative integer event id.");
    let after = Number(from.trim());
    const leases = ctx.turns.repository;
    const closed = new AbortController();
    const stop = () => closed.abort();
    c.req.raw.signal?.addEventListener("abort", stop, { once: true });
    ctx.shutdownSignal.addEventListener("abort", stop, { once: true });
    return streamSSE(c, async (stream) => {
      stream.onAbort(stop);
      const ping = setInterval(() => {
        if (!stream.aborted) stream.write(": ping\n\n").catch(() => {});
      }, PING_INTERVAL_MS);
      ping.unref?.();
      try {
        // Replay what is stored after `after`, then follow: a turn of this instance wakes the stream when it
        // stores events; another instance's is polled. Ends after the `done` of the last turn.
        while (!closed.signal.aborted && !stream.aborted) {
          const rows = await leases.eventsAfter(chat.id, after);
          let lastDone: string | undefined;
          for (const row of rows) {
            await stream.writeSSE({ event: row.type, data: row.data, id: String(row.seq) });
            after = row.seq;
            lastDone = row.type === "done" ? row.turnId : undefined;
          }
          if (rows.length === 500) continue;
          const current = await leases.current(chat.id);
          if (!current) {
            // Nothing runs: a turn that just ended stored its last events with the end of its lease; read them.
            const tail = await leases.eventsAfter(chat.id, after);
            for (const row of tail) {
              await stream.writeSSE({ event: row.type, data: row.data, id: String(row.seq) });
              after = row.seq;
            }
            // …unless the turn waits for approvals with no instance holding it (its owner died, or it was
            // suspended): answering them resumes it, anywhere, and its events follow.
            if (!(await ctx.approvals.repository.activeTurn(chat.id))) break;
            await ctx.turns.waitForEvents(chat.id, EVENT_POLL_MS, closed.signal);
            continue;
          }
          if (lastDone && lastDone === current.turnId) break;
          await ctx.turns.waitForEvents(chat.id, EVENT_POLL_MS, closed.signal);
        }
      } finally {
        clearInterval(ping);
        c.req.raw.signal?.removeEventListener("abort", stop);
        ctx.shutdownSignal.removeEventListener("abort", stop);
      }
    });
  });

  return app;
}

/** How often the events stream looks for events a turn of another instance stored, in ms. */
const EVENT_POLL_MS = 200;
