/**
 * generate_image: creates one or more images with an image generation model during a chat turn.
 *
 * - Parameters: prompt (required), count (1–4), quality, model.
 * - Settings: declared in src/tools/image/settings.ts (timeoutSeconds, maxImagesPerCall, defaultQuality,
 *   defaultModel, letAiDecideQuality — when false, `quality` is not offered to the model: buildDefinition —,
 *   provider).
 * - Execution: plans with createGenerateImageToolPlan(), calls the provider once per image through its official
 *   SDK (src/tools/image/providers.ts), stores each image under the data directory through
 *   `context.services.imageStore` (files only when the host gives none), streams `image_generated` /
 *   `image_failed` progress events, and returns one summary naming each image by URL and path. The budget aborts
 *   outstanding requests; images already made are still reported.
 */
import { credentialSourceFor } from "../../core/credentials.js";
import { defineTool } from "../../core/settings-declaration.js";
import type { EffectiveToolSettings, RegisteredTool, ToolDefinition } from "../../core/types.js";
import type { GenerateImageArgs } from "../image/plan.js";
import { GENERATE_IMAGE_SETTINGS, MAX_IMAGES_PER_CALL } from "../image/settings.js";
import { IMAGE_QUALITIES, type ImageGenerationHostConfig, type ImageStore } from "../image/types.js";

const DESCRIPTION =
  "Generates images from a text description and stores them. Returns a summary naming each image by URL and file path, and what failed and why.";

function properties(withQuality: boolean): NonNullable<ToolDefinition["parameters"]["properties"]> {
  return {
    prompt: { type: "string", description: "Detailed description of the image to generate." },
    count: {
      type: "integer",
      description: "How many images to generate (1–4). Default 1.",
      minimum: 1,
      maximum: MAX_IMAGES_PER_CALL,
    },
    ...(withQuality
      ? {
          quality: {
            type: "string",
            enum: [...IMAGE_QUALITIES],
            description: "Image quality: auto, low, medium or high. Higher is slower. Default: the user's setting.",
          },
        }
      : {}),
    model: {
      type: "string",
      description: "Image model, e.g. gpt-image-1, dall-e-3 or gemini-2.5-flash-image. Default: the user's setting.",
    },
  };
}

const definition: ToolDefinition = {
  name: "generate_image",
  description: DESCRIPTION,
  parameters: { type: "object", properties: properties(true), required: ["prompt"] },
};

/** generate_image's definition for these settings: without `quality` when letAiDecideQuality is false. */
export function buildGenerateImageDefinition(settings: EffectiveToolSettings): ToolDefinition {
  if (settings.values.letAiDecideQuality !== false) return definition;
  return { ...definition, parameters: { type: "object", properties: properties(false), required: ["prompt"] } };
}

function isImageStore(value: unknown): value is ImageStore {
  return typeof value === "object" && value !== null && typeof (value as ImageStore).save === "function";
}

/**
 * Why generate_image cannot make images on this host, or undefined when it can: neither the host configuration
 * (`services.imageGeneration`) nor the provider credentials (environment or config file, through the same reader
 * chats use) give OpenAI or Gemini a key. The reason names the variables to set. A tool without a usable provider
 * is not offered to models (it would only fail).
 */
export function imageProvidersUnavailable(services: Record<string, unknown>): string | undefined {
  const host = services.imageGeneration as ImageGenerationHostConfig | undefined;
  if (host?.providers?.openai || host?.providers?.gemini || host?.openai?.apiKey || host?.gemini?.apiKey)
    return undefined;
  let source: ReturnType<typeof credentialSourceFor>;
  try {
    source = credentialSourceFor(services);
  } catch {
    return undefined; // no credential reader registered: the host wires providers itself; do not guess
  }
  const missing: string[] = [];
  for (const provider of ["openai", "gemini"] as const) {
    try {
      source.credentials(provider);
      return undefined;
    } catch (error) {
      missing.push((error as Error).message);
    }
  }
  return `No image provider has an API key. ${missing.join(" ")}`;
}

/** The generate_image tool as registered. */
export const generateImageTool: RegisteredTool = defineTool({
  // Approval: allowed by default (nothing a rule could match).
  approval: { default: "allow" },
  definition,
  buildDefinition: buildGenerateImageDefinition,
  settings: {
    title: "Image generation",
    description: "Lets the model create images with OpenAI or Gemini image models.",
    category: "image",
    annotations: { destructiveHint: false, openWorldHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...GENERATE_IMAGE_SETTINGS],
  },
  managesOwnTimeout: true,
  unavailableReason: imageProvidersUnavailable,
  // The planning, the provider clients and the image store load on the first call (registration is metadata only).
  async execute(args, context) {
    const [{ createGenerateImageToolPlan }, { createImageProvider }, { runGenerateImagePlan }, { FileImageStore }] =
      await Promise.all([
        import("../image/plan.js"),
        import("../image/providers.js"),
        import("../image/run.js"),
        import("../image/file-image-store.js"),
      ]);
    const plan = createGenerateImageToolPlan(args as GenerateImageArgs, context.settings);
    const host = context.services.imageGeneration as ImageGenerationHostConfig | undefined;
    const provider = createImageProvider(plan.provider, host, credentialSourceFor(context.services));
    const store = isImageStore(context.services.imageStore)
      ? context.services.imageStore
      : new FileImageStore(context.dataDir);
    return runGenerateImagePlan(plan, context, { provider, store });
  },
});
