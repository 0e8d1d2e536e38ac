import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { type FakeServer, PNG_1x1, startFakeOpenAI } from "./fakes.js";

let server: TestServer | undefined;
let fake: FakeServer | undefined;
const saved = { key: process.env.OPENAI_API_KEY, base: process.env.OPENAI_BASE_URL };
afterEach(async () => {
  await server?.stop();
  await fake?.close();
  server = undefined;
  fake = undefined;
  for (const [name, value] of [
    ["OPENAI_API_KEY", saved.key],
    ["OPENAI_BASE_URL", saved.base],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe("generate_image through the HTTP service", () => {
  it("stores the image in the database and serves it to its owner only", async () => {
    fake = await startFakeOpenAI();
    process.env.OPENAI_API_KEY = "sk-test";
    process.env.OPENAI_BASE_URL = fake.baseUrl;
    server = await startTestServer();
    const res = await server.api("/api/tools/generate_image/execute", {
      method: "POST",
      json: { arguments: { prompt: "a red square", count: 1 } },
    });
    const outcome = (await res.json()) as { ok: boolean; result: { images: { url: string }[] } };
    expect(outcome.ok).toBe(true);
    const url = outcome.result.images[0]?.url;
    expect(url).toMatch(/^\/api\/images\/[0-9a-f-]{36}$/);

    const image = await server.api(url as string);
    expect(image.status).toBe(200);
    expect(image.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await image.arrayBuffer()).equals(PNG_1x1)).toBe(true);

    const other = await server.ctx.tokens.create("someone-else");
    expect((await server.api(url as string, { token: other.token })).status).toBe(404);
    expect((await server.api(url as string, { token: null })).status).toBe(401);
  });
});
