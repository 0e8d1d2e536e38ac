/**
 * generate_image (000_6d817c25d4590fa9.txt, "Built-in Tools" → "generate_image"): creates one or more images with
 * an image generation model during a chat turn.
 *
 * - Parameters: prompt (required), count (1–4), quality, model.
 * - Settings: timeoutSeconds (5–600 s, default 30 s), maxImagesPerCall, defaultQuality, defaultModel,
 *   letAiDecideQuality (when false, `quality` is not offered to the model: buildDefinition), provider.
 * - Execution: plans with createGenerateImageToolPlan(), calls the provider once per image through its official
 *   SDK (src/tools/image/providers.ts), stores each image under the data directory through
 *   `context.services.imageStore` (files only when the host gives none), streams `image_generated` /
 *   `image_failed` progress events, and returns one summary naming each image by URL and path. The budget aborts
 *   outstanding requests; images already made are still reported.
 */
import { registerTool } from "../../core/registry.js";
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type {
  EffectiveToolSettings,
  RegisteredTool,
  ToolDefinition,
  ToolParameterDescriptor,
} from "../../core/types.js";
import { FileImageStore } from "../image/file-image-store.js";
import {
  createGenerateImageToolPlan,
  DEFAULT_IMAGE_MODEL,
  type GenerateImageArgs,
  IMAGE_PROVIDER_SETTINGS,
  MAX_IMAGES_PER_CALL,
} from "../image/plan.js";
import { createImageProvider } from "../image/providers.js";
import { runGenerateImagePlan } from "../image/run.js";
import { IMAGE_QUALITIES, type ImageGenerationHostConfig, type ImageStore } from "../image/types.js";

const parameterDescriptors: ToolParameterDescriptor[] = [
  TIMEOUT_SECONDS_DESCRIPTOR,
  {
    name: "maxImagesPerCall",
    type: "integer",
    description: "Most images one call may make; a larger count is reduced to this.",
    min: 1,
    max: MAX_IMAGES_PER_CALL,
    default: MAX_IMAGES_PER_CALL,
  },
  {
    name: "defaultQuality",
    type: "string",
    description: "Quality used when the model gives none, or always when letAiDecideQuality is off.",
    allowedValues: IMAGE_QUALITIES,
    default: "auto",
  },
  {
    name: "defaultModel",
    type: "string",
    description: "Image model used when the model gives none (gpt-image-1, dall-e-3, gemini-2.5-flash-image, …).",
    default: DEFAULT_IMAGE_MODEL,
  },
  {
    name: "letAiDecideQuality",
    type: "boolean",
    description: "Offer the quality parameter to the model; when off, defaultQuality always applies.",
    default: true,
  },
  {
    name: "provider",
    type: "string",
    description: "Provider for every model (openai, gemini), or auto to choose by model name prefix.",
    allowedValues: IMAGE_PROVIDER_SETTINGS,
    default: "auto",
  },
];

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
  if (settings.parameters.letAiDecideQuality !== false) return definition;
  return { ...definition, parameters: { type: "object", properties: properties(false), required: ["prompt"] } };
}

function isImageStore(value: unknown): value is ImageStore {
  return typeof value === "object" && value !== null && typeof (value as ImageStore).save === "function";
}

/** The generate_image tool as registered. */
export const generateImageTool: RegisteredTool = {
  definition,
  buildDefinition: buildGenerateImageDefinition,
  settings: {
    title: "Image generation",
    description: "Lets the model create images with OpenAI or Gemini image models.",
    category: "image",
    enabledByDefault: true,
    canDisable: true,
    defaultParameters: Object.fromEntries(parameterDescriptors.map((d) => [d.name, d.default])),
    parameterDescriptors,
  },
  managesOwnTimeout: true,
  async execute(args, context) {
    const plan = createGenerateImageToolPlan(args as GenerateImageArgs, context.settings);
    const host = context.services.imageGeneration as ImageGenerationHostConfig | undefined;
    const provider = createImageProvider(plan.provider, host);
    const store = isImageStore(context.services.imageStore)
      ? context.services.imageStore
      : new FileImageStore(context.dataDir);
    return runGenerateImagePlan(plan, context, { provider, store });
  },
};

registerTool(generateImageTool);
