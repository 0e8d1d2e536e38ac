import { describe, expect, it } from "vitest";
import { ToolArgumentError } from "../../src/core/errors.js";
import { getDefaultToolSettings } from "../../src/core/settings-policy.js";
import type { JsonSchema } from "../../src/core/types.js";
import { isStrictCompatible, strictSchemaProblems, toStrictSchema } from "../../src/providers/strict-schema.js";
import { buildGenerateImageDefinition, generateImageTool } from "../../src/tools/builtin/generate-image.js";
import { createGenerateImageToolPlan } from "../../src/tools/image/plan.js";
import { openAiQuality, resolveImageProvider } from "../../src/tools/image/providers.js";
import { imageRuntime, tempDataDir } from "./helpers.js";

const settings = (parameters: Record<string, unknown> = {}) => {
  const d = getDefaultToolSettings(generateImageTool);
  return { enabled: true, values: { ...d.values, ...parameters } };
};

function walk(schema: JsonSchema, visit: (node: JsonSchema) => void) {
  visit(schema);
  for (const child of Object.values(schema.properties ?? {})) walk(child, visit);
}

describe("generate_image definition", () => {
  it("is plain JSON Schema: object, simple properties, integer count 1–4, quality as a string enum", () => {
    const params = generateImageTool.definition.parameters;
    expect(params.type).toBe("object");
    expect(params.required).toEqual(["prompt"]);
    expect(Object.keys(params.properties ?? {}).sort()).toEqual(["count", "model", "prompt", "quality"]);
    expect(params.properties?.count).toMatchObject({ type: "integer", minimum: 1, maximum: 4 });
    expect(params.properties?.quality).toMatchObject({ type: "string", enum: ["auto", "low", "medium", "high"] });
    walk(params, (node) => {
      for (const banned of ["oneOf", "anyOf", "allOf", "not", "$ref"]) expect(node).not.toHaveProperty(banned);
      expect(typeof node.type === "string").toBe(true);
    });
  });

  it("passes strict-mode derivation, with and without quality", () => {
    for (const def of [
      generateImageTool.definition,
      buildGenerateImageDefinition(settings({ letAiDecideQuality: false })),
    ]) {
      const strict = toStrictSchema(def.parameters);
      expect(strictSchemaProblems(strict)).toEqual([]);
      expect(isStrictCompatible(strict)).toBe(true);
    }
  });

  it("has the seed's settings with their defaults and ranges", () => {
    const byName = Object.fromEntries(generateImageTool.settings.parameterDescriptors.map((d) => [d.name, d]));
    expect(byName.timeoutSeconds).toMatchObject({ type: "integer", min: 5, max: 600, default: 30 });
    expect(Object.keys(byName)).toEqual(
      expect.arrayContaining([
        "timeoutSeconds",
        "maxImagesPerCall",
        "defaultQuality",
        "defaultModel",
        "letAiDecideQuality",
      ]),
    );
    expect(generateImageTool.settings.category).toBe("image");
    expect(generateImageTool.settings.defaultParameters.timeoutSeconds).toBe(30);
  });

  it("letAiDecideQuality false removes quality from the definition the model is given", async () => {
    expect(
      buildGenerateImageDefinition(settings({ letAiDecideQuality: false })).parameters.properties,
    ).not.toHaveProperty("quality");
    const { dir, cleanup } = tempDataDir();
    try {
      const { runtime, store } = imageRuntime(dir);
      // generate_image is offered to models only when an image provider has a key.
      Object.assign(runtime.services, { imageGeneration: { openai: { apiKey: "test-key" } } });
      await store.save("bob", "generate_image", { enabled: null, parameters: { letAiDecideQuality: false } });
      const bob = await runtime.getEnabledToolRuntime("bob");
      const carol = await runtime.getEnabledToolRuntime("carol");
      expect(bob.definitions[0]?.parameters.properties).not.toHaveProperty("quality");
      expect(carol.definitions[0]?.parameters.properties).toHaveProperty("quality");
      // A model that sends quality anyway is told the argument does not exist for this user.
      const outcome = await runtime.executeTool(
        "generate_image",
        { prompt: "a cat", quality: "high" },
        { userId: "bob" },
      );
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) expect(outcome.error).toMatchObject({ code: "validation_failed" });
      expect(!outcome.ok && outcome.error.message).toContain('"quality"');
    } finally {
      cleanup();
    }
  });
});

describe("createGenerateImageToolPlan", () => {
  it("defaults: one image, the default model and quality, 30 s budget", () => {
    const plan = createGenerateImageToolPlan({ prompt: "  a red fox  " }, settings());
    expect(plan).toMatchObject({
      prompt: "a red fox",
      model: "gpt-image-1",
      modelSource: "setting",
      provider: "openai",
      quality: "auto",
      qualitySource: "setting",
      requestedCount: 1,
      budgetMs: 30_000,
    });
    expect(plan.images).toEqual([{ index: 1 }]);
  });

  it("clamps count by maxImagesPerCall and says so", () => {
    const plan = createGenerateImageToolPlan({ prompt: "x", count: 4 }, settings({ maxImagesPerCall: 2 }));
    expect(plan.images.map((i) => i.index)).toEqual([1, 2]);
    expect(plan.requestedCount).toBe(4);
    expect(plan.notes.join(" ")).toMatch(/maxImagesPerCall/);
  });

  it("resolves quality: argument when allowed, setting otherwise", () => {
    expect(createGenerateImageToolPlan({ prompt: "x", quality: "high" }, settings()).quality).toBe("high");
    const fixed = createGenerateImageToolPlan(
      { prompt: "x", quality: "high" },
      settings({ letAiDecideQuality: false, defaultQuality: "low" }),
    );
    expect(fixed).toMatchObject({ quality: "low", qualitySource: "setting" });
    expect(() => createGenerateImageToolPlan({ prompt: "x", quality: "ultra" }, settings())).toThrow(ToolArgumentError);
  });

  it("resolves model and provider by prefix or by the provider setting", () => {
    expect(createGenerateImageToolPlan({ prompt: "x", model: "gemini-2.5-flash-image" }, settings())).toMatchObject({
      provider: "gemini",
      modelSource: "argument",
    });
    expect(createGenerateImageToolPlan({ prompt: "x" }, settings({ defaultModel: "dall-e-3" })).provider).toBe(
      "openai",
    );
    expect(
      createGenerateImageToolPlan({ prompt: "x", model: "my-sdxl" }, settings({ provider: "openai" })).provider,
    ).toBe("openai");
    expect(() => createGenerateImageToolPlan({ prompt: "x", model: "stable-diffusion" }, settings())).toThrow(
      /not an image model/,
    );
    expect(() => resolveImageProvider("imagen-4.0-generate-001")).toThrow(/Vertex AI/);
  });

  it("falls back to defaults for corrupt stored settings, but rejects bad arguments", () => {
    const plan = createGenerateImageToolPlan(
      { prompt: "x", count: 3 },
      settings({ maxImagesPerCall: "lots", defaultQuality: "ultra", timeoutSeconds: 99999 }),
    );
    expect(plan.images).toHaveLength(3);
    expect(plan.quality).toBe("auto");
    expect(plan.budgetMs).toBe(600_000);
    expect(() => createGenerateImageToolPlan({ prompt: "   " }, settings())).toThrow(/prompt/);
    expect(() => createGenerateImageToolPlan({ prompt: "x", count: 5 }, settings())).toThrow(/count/);
    expect(() => createGenerateImageToolPlan({ prompt: "x".repeat(32_001) }, settings())).toThrow(/longer/);
  });

  it("maps quality to what each OpenAI model accepts", () => {
    expect(openAiQuality("gpt-image-1", "medium")).toBe("medium");
    expect(openAiQuality("dall-e-3", "high")).toBe("hd");
    expect(openAiQuality("dall-e-3", "low")).toBe("standard");
    expect(openAiQuality("dall-e-3", "auto")).toBeUndefined();
    expect(openAiQuality("dall-e-2", "high")).toBeUndefined();
  });
});
