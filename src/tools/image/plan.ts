/**
 * createGenerateImageToolPlan, generate_image's planning step: turns parsed arguments and the user's effective settings
 * into the list of images to make, with the count clamped by maxImagesPerCall, the quality and the model resolved, and
 * the provider chosen. Pure apart from reading settings; does no I/O.
 */
import { ToolArgumentError } from "../../core/errors.js";
import { booleanSetting, integerSetting, stringSetting } from "../../core/settings-declaration.js";
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type { EffectiveToolSettings } from "../../core/types.js";
import { resolveImageProvider } from "./providers.js";
import {
  DEFAULT_IMAGE_MODEL,
  DEFAULT_MODEL_DESCRIPTOR,
  DEFAULT_QUALITY_DESCRIPTOR,
  IMAGE_PROVIDER_DESCRIPTOR,
  LET_AI_DECIDE_QUALITY_DESCRIPTOR,
  MAX_IMAGES_PER_CALL,
  MAX_IMAGES_PER_CALL_DESCRIPTOR,
} from "./settings.js";
import { IMAGE_QUALITIES, type ImageProviderName, type ImageQuality } from "./types.js";

/** Longest prompt accepted, in characters (the GPT image models' limit). */
export const MAX_PROMPT_LENGTH = 32_000;

/** Parsed generate_image arguments (nulls already removed by the runtime). */
export interface GenerateImageArgs {
  prompt: string;
  count?: number;
  quality?: string;
  model?: string;
}

/** One image to make; `index` is 1-based, as reported to the model and in progress events. */
export interface PlannedImage {
  index: number;
}

/** What one generate_image call will do. */
export interface GenerateImageToolPlan {
  prompt: string;
  model: string;
  /** Where `model` came from. */
  modelSource: "argument" | "setting";
  provider: ImageProviderName;
  quality: ImageQuality;
  qualitySource: "argument" | "setting";
  /** The count the model asked for (default 1). */
  requestedCount: number;
  /** The images to make: min(requestedCount, maxImagesPerCall). */
  images: PlannedImage[];
  /** Time budget in milliseconds (the timeoutSeconds setting × 1000). */
  budgetMs: number;
  /** Human-readable adjustments made while planning (clamped count, ignored quality), for the summary. */
  notes: string[];
}

/**
 * Plans a generate_image call. Settings are read leniently (invalid stored values fall back to defaults);
 * arguments strictly. Throws ToolArgumentError for an empty or over-long prompt, a count outside 1–4, an unknown
 * quality, and a model no provider serves.
 */
export function createGenerateImageToolPlan(
  args: GenerateImageArgs,
  settings: EffectiveToolSettings,
): GenerateImageToolPlan {
  const p = settings.values;
  const notes: string[] = [];

  const prompt = typeof args.prompt === "string" ? args.prompt.trim() : "";
  if (!prompt) {
    throw new ToolArgumentError('Missing required argument "prompt": describe the image to generate.', {
      argument: "prompt",
      rule: "required",
    });
  }
  if (prompt.length > MAX_PROMPT_LENGTH) {
    throw new ToolArgumentError(
      `Invalid argument "prompt": ${prompt.length} characters is longer than the ${MAX_PROMPT_LENGTH} allowed; shorten it.`,
      { argument: "prompt", rule: "maxLength" },
    );
  }

  const requestedCount = args.count ?? 1;
  if (!Number.isInteger(requestedCount) || requestedCount < 1 || requestedCount > MAX_IMAGES_PER_CALL) {
    throw new ToolArgumentError(
      `Invalid argument "count": must be an integer from 1 to ${MAX_IMAGES_PER_CALL}, got ${requestedCount}.`,
      {
        argument: "count",
        rule: "range",
      },
    );
  }
  const maxImages = integerSetting(p, MAX_IMAGES_PER_CALL_DESCRIPTOR);
  const count = Math.min(requestedCount, maxImages);
  if (count < requestedCount) {
    notes.push(
      `Asked for ${requestedCount} images; this user's maxImagesPerCall setting allows ${maxImages}, so ${count} were planned.`,
    );
  }

  const defaultQuality = stringSetting(p, DEFAULT_QUALITY_DESCRIPTOR) as ImageQuality;
  const letAiDecide = booleanSetting(p, LET_AI_DECIDE_QUALITY_DESCRIPTOR);
  let quality = defaultQuality;
  let qualitySource: "argument" | "setting" = "setting";
  if (args.quality !== undefined) {
    if (!letAiDecide) {
      notes.push(`The quality argument was ignored: quality is set by the user (${defaultQuality}).`);
    } else if (!(IMAGE_QUALITIES as readonly string[]).includes(args.quality)) {
      throw new ToolArgumentError(
        `Invalid argument "quality": must be one of ${IMAGE_QUALITIES.map((q) => JSON.stringify(q)).join(", ")}, got ${JSON.stringify(args.quality)}.`,
        { argument: "quality", rule: "enum" },
      );
    } else {
      quality = args.quality as ImageQuality;
      qualitySource = "argument";
    }
  }

  const argModel = typeof args.model === "string" ? args.model.trim() : "";
  const model = argModel || stringSetting(p, DEFAULT_MODEL_DESCRIPTOR).trim() || DEFAULT_IMAGE_MODEL;
  const provider = resolveImageProvider(model, stringSetting(p, IMAGE_PROVIDER_DESCRIPTOR));

  const seconds = integerSetting(p, TIMEOUT_SECONDS_DESCRIPTOR);
  return {
    prompt,
    model,
    modelSource: argModel ? "argument" : "setting",
    provider,
    quality,
    qualitySource,
    requestedCount,
    images: Array.from({ length: count }, (_, i) => ({ index: i + 1 })),
    budgetMs: seconds * 1000,
    notes,
  };
}

export {
  DEFAULT_IMAGE_MODEL,
  IMAGE_PROVIDER_SETTINGS,
  MAX_IMAGES_PER_CALL,
} from "./settings.js";
