/**
 * The mapped tools survive each official SDK unchanged (the SDKs are the clients): every mapper's output is passed to
 * its SDK, which sends it to a loopback HTTP server started here; the server records the request body and answers 400.
 * The tools in the recorded body must equal the mapper output exactly.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ToolDefinition } from "../../src/core/types.js";
import {
  toolDefsToAnthropic,
  toolDefsToChatCompletions,
  toolDefsToGeminiFunctionDeclarations,
  toolDefsToGeminiInteractions,
  toolDefsToResponsesAPI,
} from "../../src/providers/tool-mapper.js";

const defs: ToolDefinition[] = [
  {
    name: "read_file",
    description: "Reads a file.",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", minLength: 1 },
        startLine: { type: "integer", minimum: 1 },
        mode: { type: "string", enum: ["text", "base64"] },
        range: {
          type: "object",
          properties: { from: { type: "integer" }, to: { type: "integer" } },
          required: ["from"],
        },
      },
      required: ["path"],
    },
  },
  {
    name: "mcp.notes/search",
    description: "Searches notes.",
    parameters: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      anyOf: [
        { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
        {
          type: "object",
          properties: { tag: { type: ["string", "null"] }, level: { type: "integer", enum: [1, 2] } },
          required: ["tag"],
        },
      ],
    },
  },
];

let server: Server;
let baseURL: string;
const requests: { url: string; body: Record<string, unknown> }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = "";
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", () => {
      requests.push({ url: req.url ?? "", body: JSON.parse(text || "{}") });
      res.writeHead(400, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: { message: "recorded", code: 400, status: "INVALID_ARGUMENT", type: "invalid_request_error" },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Runs `send` (expected to fail with the server's 400) and returns the body the server recorded. */
async function recorded(send: () => Promise<unknown>): Promise<{ url: string; body: Record<string, unknown> }> {
  const before = requests.length;
  await expect(send()).rejects.toThrow(/recorded|400/);
  expect(requests.length).toBe(before + 1);
  return requests[before]!;
}

describe("mapped tools reach the wire unchanged through the official SDKs", () => {
  it("OpenAI Responses (openai SDK)", async () => {
    const tools = toolDefsToResponsesAPI(defs);
    expect(tools.map((t) => [t.name, t.strict])).toEqual([
      ["read_file", true],
      ["mcp_notes_search", false],
    ]);
    const client = new OpenAI({ apiKey: "test", baseURL, maxRetries: 0 });
    const { url, body } = await recorded(() => client.responses.create({ model: "m", input: "hi", tools }));
    expect(url).toBe("/responses");
    expect(body.tools).toEqual(tools);
  });

  it("Chat Completions (openai SDK), default and strict", async () => {
    const client = new OpenAI({ apiKey: "test", baseURL, maxRetries: 0 });
    for (const tools of [toolDefsToChatCompletions(defs), toolDefsToChatCompletions(defs, { strict: true })]) {
      const { url, body } = await recorded(() =>
        client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], tools }),
      );
      expect(url).toBe("/chat/completions");
      expect(body.tools).toEqual(tools);
    }
  });

  it("Gemini Interactions (@google/genai interactions.create)", async () => {
    const tools = toolDefsToGeminiInteractions(defs);
    const client = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: baseURL } });
    const { url, body } = await recorded(() =>
      client.interactions.create({ model: "gemini-test", input: "hi", tools }),
    );
    expect(url).toMatch(/\/interactions$/);
    expect(body.tools).toEqual(tools);
  });

  it.each(["jsonSchema", "openapi"] as const)(
    "Gemini generateContent functionDeclarations, %s dialect",
    async (dialect) => {
      const functionDeclarations = toolDefsToGeminiFunctionDeclarations(defs, { dialect });
      const field = dialect === "jsonSchema" ? "parametersJsonSchema" : "parameters";
      for (const decl of functionDeclarations) expect(decl).toHaveProperty(field);
      const client = new GoogleGenAI({ apiKey: "test", httpOptions: { baseUrl: baseURL } });
      const { url, body } = await recorded(() =>
        client.models.generateContent({
          model: "gemini-test",
          contents: "hi",
          config: { tools: [{ functionDeclarations }] },
        }),
      );
      expect(url).toMatch(/models\/gemini-test:generateContent$/);
      expect(body.tools).toEqual([{ functionDeclarations }]);
    },
  );

  it("Anthropic Messages (@anthropic-ai/sdk)", async () => {
    const tools = toolDefsToAnthropic(defs);
    expect(tools[1]!.input_schema.type).toBe("object");
    expect(tools[1]!.input_schema).not.toHaveProperty("anyOf");
    const client = new Anthropic({ apiKey: "test", baseURL, maxRetries: 0 });
    const { url, body } = await recorded(() =>
      client.messages.create({ model: "m", max_tokens: 16, messages: [{ role: "user", content: "hi" }], tools }),
    );
    expect(url).toBe("/v1/messages");
    expect(body.tools).toEqual(tools);
  });
});
