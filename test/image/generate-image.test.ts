import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ToolAbortedError, ToolTimeoutError } from "../../src/core/errors.js";
import type { ToolProgressEvent } from "../../src/core/types.js";
import { generateImageTool } from "../../src/tools/builtin/generate-image.js";
import type { GenerateImageResult } from "../../src/tools/image/run.js";
import { until } from "../helpers/until.js";
import {
  type FakeServer,
  geminiImageBody,
  OPENAI_POLICY_ERROR,
  openAiImageBody,
  PNG_1x1,
  startFakeGemini,
  startFakeOpenAI,
} from "./fakes.js";
import { directContext, imageRuntime, tempDataDir } from "./helpers.js";

let data: ReturnType<typeof tempDataDir>;
const fakes: FakeServer[] = [];
const savedEnv = { ...process.env };

beforeEach(() => {
  data = tempDataDir();
  for (const key of ["OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GEMINI_BASE_URL", "GOOGLE_API_KEY"]) {
    delete process.env[key];
  }
  // Never the developer's own config file.
  process.env.TOOLHOST_CONFIG = join(data.dir, "no-config.json");
});
afterEach(async () => {
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
  await Promise.all(fakes.splice(0).map((f) => f.close()));
  data.cleanup();
});

async function track<T extends FakeServer>(fake: Promise<T>): Promise<T> {
  const f = await fake;
  fakes.push(f);
  return f;
}

describe("generate_image with OpenAI Images", () => {
  it("makes 3 images where one fails: each outcome is streamed, the summary says what failed and why", async () => {
    const fake = await track(
      startFakeOpenAI((req) => (req.n === 2 ? OPENAI_POLICY_ERROR : { status: 200, body: openAiImageBody() })),
    );
    const { runtime } = imageRuntime(data.dir);
    const events: ToolProgressEvent[] = [];
    const outcome = await runtime.executeTool(
      "generate_image",
      JSON.stringify({ prompt: "a lighthouse at dusk", count: 3, quality: "high" }),
      {
        userId: "alice",
        onProgress: (e) => events.push(e),
        services: { imageGeneration: { openai: { apiKey: "sk-test-openai", baseUrl: fake.baseUrl } } },
      },
    );
    expect(outcome.ok).toBe(true);
    const result = (outcome as { result: GenerateImageResult }).result;

    // One request per image, n=1, with the planned model and quality, authenticated with the key.
    expect(fake.requests).toHaveLength(3);
    for (const req of fake.requests) {
      expect(req.body).toMatchObject({ model: "gpt-image-1", prompt: "a lighthouse at dusk", n: 1, quality: "high" });
      expect(req.body).not.toHaveProperty("response_format");
      expect(req.headers.authorization).toBe("Bearer sk-test-openai");
    }

    // Per-image outcomes streamed.
    expect(events.map((e) => e.kind).sort()).toEqual(["image_failed", "image_generated", "image_generated"]);
    const failedEvent = events.find((e) => e.kind === "image_failed")!;
    expect(failedEvent.message).toMatch(/content_policy_violation/);
    expect(failedEvent.data).toMatchObject({ code: "execution_failed", provider: "openai" });

    // The summary.
    expect(result.images).toHaveLength(2);
    expect(result.failures).toHaveLength(1);
    expect(result.failures[0]?.reason).toMatch(/OpenAI 400 content_policy_violation: Your request was rejected/);
    expect(result.summary).toMatch(/^Generated 2 of 3 images with gpt-image-1/);
    expect(result.summary).toMatch(/failed \(execution_failed\): OpenAI 400 content_policy_violation/);
    for (const image of result.images) {
      expect(image.url).toBe(`/api/images/${image.id}`);
      expect(image.path).toBe(join(data.dir, "images", "alice", `${image.id}.png`));
      expect(result.summary).toContain(image.url);
      expect(readFileSync(image.path as string).equals(PNG_1x1)).toBe(true);
      expect(image.mimeType).toBe("image/png");
    }
    const indexes = [...result.images.map((i) => i.index), ...result.failures.map((f) => f.index)].sort();
    expect(indexes).toEqual([1, 2, 3]);
  });

  it("asks dall-e models for b64_json with their own quality names, and reports the revised prompt", async () => {
    const fake = await track(
      startFakeOpenAI(() => ({ status: 200, body: openAiImageBody(PNG_1x1, "A tall lighthouse.") })),
    );
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool(
      "generate_image",
      { prompt: "a lighthouse", model: "dall-e-3", quality: "high" },
      { userId: "alice", services: { imageGeneration: { openai: { apiKey: "k", baseUrl: fake.baseUrl } } } },
    );
    expect(outcome.ok).toBe(true);
    expect(fake.requests[0]?.body).toMatchObject({
      model: "dall-e-3",
      quality: "hd",
      response_format: "b64_json",
      n: 1,
    });
    expect((outcome as { result: GenerateImageResult }).result.images[0]?.revisedPrompt).toBe("A tall lighthouse.");
  });

  it("refuses a provider answer that is not an image, storing nothing", async () => {
    const fake = await track(
      startFakeOpenAI(() => ({ status: 200, body: openAiImageBody(Buffer.from("<svg onload=alert(1)></svg>")) })),
    );
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool(
      "generate_image",
      { prompt: "x" },
      { userId: "alice", services: { imageGeneration: { openai: { apiKey: "k", baseUrl: fake.baseUrl } } } },
    );
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error.message).toMatch(/not a PNG, JPEG, WebP or GIF/);
    expect(existsSync(join(data.dir, "images", "alice"))).toBe(false);
  });

  it("fails clearly, naming the variable and the config-file entry (not the server's path), when no OpenAI key is configured", async () => {
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool("generate_image", { prompt: "x" }, { userId: "alice" });
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe("execution_failed");
      // The same message a chat gives (one credential reader for every provider user).
      expect(outcome.error.message).toBe(
        "No API key for provider openai: set OPENAI_API_KEY in the environment, or providers.openai.apiKey in the config file (TOOLHOST_CONFIG).",
      );
      expect(outcome.error.details).toMatchObject({ variables: ["OPENAI_API_KEY"], rule: "missing_api_key" });
      // Users and models learn nothing about the server's files.
      expect(JSON.stringify(outcome.error)).not.toContain(process.env.TOOLHOST_CONFIG);
    }
  });

  it("reads the key and base URL from the config file, as chats do", async () => {
    const fake = await track(startFakeOpenAI());
    writeFileSync(
      process.env.TOOLHOST_CONFIG!,
      JSON.stringify({ providers: { openai: { apiKey: "sk-from-file", baseURL: fake.baseUrl } } }),
    );
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool("generate_image", { prompt: "x" }, { userId: "alice" });
    expect(outcome.ok).toBe(true);
    expect(fake.requests[0]?.headers.authorization).toBe("Bearer sk-from-file");
  });

  it("takes the key and base URL from OPENAI_API_KEY / OPENAI_BASE_URL", async () => {
    const fake = await track(startFakeOpenAI());
    process.env.OPENAI_API_KEY = "sk-from-env";
    process.env.OPENAI_BASE_URL = fake.baseUrl;
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool("generate_image", { prompt: "x" }, { userId: "alice" });
    expect(outcome.ok).toBe(true);
    expect(fake.requests[0]?.headers.authorization).toBe("Bearer sk-from-env");
  });
});

describe("generate_image with Gemini image models", () => {
  it("round-trips generateContent inlineData images and reports a blocked one", async () => {
    const fake = await track(
      startFakeGemini((req, model) =>
        req.n === 1
          ? {
              status: 200,
              body: { candidates: [{ finishReason: "IMAGE_SAFETY", index: 0 }], modelVersion: model },
            }
          : { status: 200, body: geminiImageBody(model) },
      ),
    );
    process.env.GEMINI_API_KEY = "gemini-test-key";
    process.env.GEMINI_BASE_URL = fake.baseUrl;
    const { runtime } = imageRuntime(data.dir);
    const events: ToolProgressEvent[] = [];
    const outcome = await runtime.executeTool(
      "generate_image",
      { prompt: "a banana in space", count: 2, model: "gemini-2.5-flash-image" },
      { userId: "alice", onProgress: (e) => events.push(e) },
    );
    expect(outcome.ok).toBe(true);
    const result = (outcome as { result: GenerateImageResult }).result;
    expect(fake.requests).toHaveLength(2);
    for (const req of fake.requests) {
      expect(req.url).toBe("/v1beta/models/gemini-2.5-flash-image:generateContent");
      expect(req.headers["x-goog-api-key"]).toBe("gemini-test-key");
      expect(req.body.contents[0].parts[0].text).toBe("a banana in space");
      expect(req.body.generationConfig.responseModalities).toEqual(["IMAGE"]);
    }
    expect(result.provider).toBe("gemini");
    expect(result.images).toHaveLength(1);
    expect(readFileSync(result.images[0]!.path as string).equals(PNG_1x1)).toBe(true);
    expect(result.failures[0]?.reason).toMatch(/IMAGE_SAFETY/);
    expect(events.map((e) => e.kind).sort()).toEqual(["image_failed", "image_generated"]);
  });

  it("reports a Gemini API error with its status and message", async () => {
    const fake = await track(
      startFakeGemini(() => ({
        status: 400,
        body: {
          error: { code: 400, message: "API key not valid. Please pass a valid API key.", status: "INVALID_ARGUMENT" },
        },
      })),
    );
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool(
      "generate_image",
      { prompt: "x", model: "gemini-2.5-flash-image" },
      { userId: "alice", services: { imageGeneration: { gemini: { apiKey: "bad", baseUrl: fake.baseUrl } } } },
    );
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error.message).toMatch(/Gemini 400 INVALID_ARGUMENT: API key not valid/);
  });

  it("fails clearly, naming GEMINI_API_KEY, when it is not set", async () => {
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool(
      "generate_image",
      { prompt: "x", model: "gemini-2.5-flash-image" },
      { userId: "a" },
    );
    expect(!outcome.ok && outcome.error.message).toMatch(
      /^No API key for provider gemini: set GEMINI_API_KEY \(or GOOGLE_API_KEY\) in the environment, or providers\.gemini\.apiKey in /,
    );
  });

  it("accepts GOOGLE_API_KEY, as chats do", async () => {
    const fake = await track(startFakeGemini((_req, model) => ({ status: 200, body: geminiImageBody(model) })));
    process.env.GOOGLE_API_KEY = "google-key";
    process.env.GEMINI_BASE_URL = fake.baseUrl;
    const { runtime } = imageRuntime(data.dir);
    const outcome = await runtime.executeTool(
      "generate_image",
      { prompt: "x", model: "gemini-2.5-flash-image" },
      { userId: "a" },
    );
    expect(outcome.ok).toBe(true);
    expect(fake.requests[0]?.headers["x-goog-api-key"]).toBe("google-key");
  });
});

describe("generate_image time budget", () => {
  it("when the budget runs out, outstanding requests are cancelled on the wire and made images are kept", async () => {
    const fake = await track(
      startFakeOpenAI((req) => (req.n === 1 ? { status: 200, body: openAiImageBody() } : "hang")),
    );
    const controller = new AbortController();
    const { context, events } = directContext(data.dir, controller.signal, {
      imageGeneration: { openai: { apiKey: "k", baseUrl: fake.baseUrl } },
    });
    const running = generateImageTool.execute({ prompt: "slow", count: 3 }, context) as Promise<GenerateImageResult>;
    await until(
      () => fake.requests.length >= 3 && events.some((e) => e.kind === "image_generated"),
      "three requests and a first image",
    );
    controller.abort(new ToolTimeoutError("budget ran out"));
    const result = await running;
    await fake.waitForCancelled(2);
    expect(fake.cancelled).toBe(2);
    expect(result.images).toHaveLength(1);
    expect(result.failures.map((f) => f.code)).toEqual(["timeout", "timeout"]);
    expect(result.summary).toMatch(/time budget ran out/);
    expect(events.filter((e) => e.kind === "image_failed")).toHaveLength(2);
  });

  // The runtime's timeoutSeconds budget (5 s, the minimum) cancelling a slow provider end to end is checked in
  // test/tools/time-budget.test.ts, with the other tools' budget checks.

  it("the budget cancels outstanding Gemini requests on the wire too", async () => {
    const fake = await track(startFakeGemini(() => "hang"));
    const controller = new AbortController();
    const { context, events } = directContext(data.dir, controller.signal, {
      imageGeneration: { gemini: { apiKey: "k", baseUrl: fake.baseUrl } },
    });
    const running = generateImageTool.execute({ prompt: "slow", count: 2, model: "gemini-2.5-flash-image" }, context);
    await until(() => fake.requests.length >= 2, "two requests");
    controller.abort(new ToolTimeoutError("budget ran out"));
    await expect(running).rejects.toMatchObject({
      code: "timeout",
      message: expect.stringMatching(/Generated 0 of 2/),
    });
    await fake.waitForCancelled(2);
    expect(events.map((e) => e.kind)).toEqual(["image_failed", "image_failed"]);
  });

  it("a caller cancel aborts the requests and is reported as aborted, not as a timeout", async () => {
    const fake = await track(startFakeOpenAI(() => "hang"));
    const controller = new AbortController();
    const { context } = directContext(data.dir, controller.signal, {
      imageGeneration: { openai: { apiKey: "k", baseUrl: fake.baseUrl } },
    });
    const running = generateImageTool.execute({ prompt: "slow", count: 2 }, context);
    await until(() => fake.requests.length >= 2, "two requests");
    controller.abort(new ToolAbortedError());
    await expect(running).rejects.toBeInstanceOf(ToolAbortedError);
    await fake.waitForCancelled(2);
  });
});
