/**
 * Loopback fakes of the image providers, speaking their documented wire formats, for the official SDKs to talk to.
 *
 * - OpenAI Images: `POST /v1/images/generations` → `{ created, data: [{ b64_json, revised_prompt? }], ... }`;
 *   errors as `{ error: { message, type, param, code } }`.
 * - Gemini: `POST /v1beta/models/{model}:generateContent` → `{ candidates: [{ content: { role: "model", parts:
 *   [{ text }, { inlineData: { mimeType, data } }] }, finishReason, index }], usageMetadata, modelVersion }`;
 *   errors as `{ error: { code, message, status } }`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A 1×1 PNG. */
export const PNG_1x1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

/** A request the fake received. */
export interface SeenRequest {
  n: number;
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: any;
}

/** What the fake does with the nth request (1-based): answer, or hang until the client goes away. */
export type FakeAction = { status: number; body: unknown } | "hang";

/** A running fake. */
export interface FakeServer {
  baseUrl: string;
  requests: SeenRequest[];
  /** Requests whose client closed the connection before any answer (cancelled). */
  cancelled: number;
  /** Resolves once `count` requests were cancelled. */
  waitForCancelled(count: number): Promise<void>;
  close(): Promise<void>;
}

async function startFake(prefix: string, route: (req: SeenRequest) => FakeAction): Promise<FakeServer> {
  const requests: SeenRequest[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const state = { cancelled: 0 };
  const sockets = new Set<import("node:net").Socket>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const seen: SeenRequest = {
        n: requests.length + 1,
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: text ? JSON.parse(text) : undefined,
      };
      requests.push(seen);
      const action = route(seen);
      if (action === "hang") {
        res.on("close", () => {
          if (!res.writableEnded) {
            state.cancelled += 1;
            for (const w of waiters.filter((w) => state.cancelled >= w.count)) w.resolve();
          }
        });
        return;
      }
      res.writeHead(action.status, { "content-type": "application/json" });
      res.end(JSON.stringify(action.body));
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${prefix}`,
    requests,
    get cancelled() {
      return state.cancelled;
    },
    waitForCancelled(count: number) {
      if (state.cancelled >= count) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push({ count, resolve }));
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** OpenAI Images success body for one image. */
export function openAiImageBody(bytes: Buffer = PNG_1x1, revisedPrompt?: string) {
  return {
    created: Math.floor(Date.now() / 1000),
    background: "opaque",
    output_format: "png",
    quality: "medium",
    size: "1024x1024",
    data: [{ b64_json: bytes.toString("base64"), ...(revisedPrompt ? { revised_prompt: revisedPrompt } : {}) }],
    usage: {
      input_tokens: 12,
      input_tokens_details: { image_tokens: 0, text_tokens: 12 },
      output_tokens: 1056,
      total_tokens: 1068,
    },
  };
}

/** OpenAI's documented moderation refusal. */
export const OPENAI_POLICY_ERROR = {
  status: 400,
  body: {
    error: {
      message: "Your request was rejected as a result of our safety system.",
      type: "image_generation_user_error",
      param: null,
      code: "content_policy_violation",
    },
  },
} as const;

/** Starts an OpenAI Images fake; the SDK's baseURL is `fake.baseUrl` (ends in /v1). */
export function startFakeOpenAI(
  route: (req: SeenRequest) => FakeAction = () => ({ status: 200, body: openAiImageBody() }),
) {
  return startFake("/v1", (req) => {
    if (req.method !== "POST" || req.url !== "/v1/images/generations") {
      return {
        status: 404,
        body: { error: { message: `Unknown path ${req.url}`, type: "invalid_request_error", param: null, code: null } },
      };
    }
    return route(req);
  });
}

/** Gemini generateContent success body with one image part. */
export function geminiImageBody(model: string, bytes: Buffer = PNG_1x1) {
  return {
    candidates: [
      {
        content: {
          role: "model",
          parts: [
            { text: "Here is your image." },
            { inlineData: { mimeType: "image/png", data: bytes.toString("base64") } },
          ],
        },
        finishReason: "STOP",
        index: 0,
      },
    ],
    usageMetadata: {
      promptTokenCount: 9,
      candidatesTokenCount: 1290,
      totalTokenCount: 1299,
      promptTokensDetails: [{ modality: "TEXT", tokenCount: 9 }],
      candidatesTokensDetails: [{ modality: "IMAGE", tokenCount: 1290 }],
    },
    modelVersion: model,
    responseId: "fake-response-id",
  };
}

/** Starts a Gemini fake; the SDK's httpOptions.baseUrl is `fake.baseUrl` (the SDK adds /v1beta/models/...). */
export function startFakeGemini(
  route: (req: SeenRequest, model: string) => FakeAction = (_req, model) => ({
    status: 200,
    body: geminiImageBody(model),
  }),
) {
  return startFake("", (req) => {
    const match = /^\/v1beta\/models\/([^/:?]+):generateContent(\?.*)?$/.exec(req.url);
    if (req.method !== "POST" || !match) {
      return { status: 404, body: { error: { code: 404, message: `Unknown path ${req.url}`, status: "NOT_FOUND" } } };
    }
    return route(req, decodeURIComponent(match[1]!));
  });
}
