/**
 * generate_image's settings, declared once: the planner reads them (lenient, with these defaults and ranges) and
 * the tool lists them in its settings metadata.
 */
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type { ToolParameterDescriptor } from "../../core/types.js";
import { IMAGE_QUALITIES } from "./types.js";

/** Hard ceiling on images per call (the `count` argument's maximum). */
export const MAX_IMAGES_PER_CALL = 4;
/** Default of the defaultModel setting. */
export const DEFAULT_IMAGE_MODEL = "gpt-image-1";
/** Values of the `provider` setting. */
export const IMAGE_PROVIDER_SETTINGS = ["auto", "openai", "gemini"] as const;

/** maxImagesPerCall: most images one call may make. */
export const MAX_IMAGES_PER_CALL_DESCRIPTOR: ToolParameterDescriptor = {
  name: "maxImagesPerCall",
  type: "integer",
  description: "Most images one call may make; a larger count is reduced to this.",
  min: 1,
  max: MAX_IMAGES_PER_CALL,
  default: MAX_IMAGES_PER_CALL,
};

/** defaultQuality: the quality used when the model gives none. */
export const DEFAULT_QUALITY_DESCRIPTOR: ToolParameterDescriptor = {
  name: "defaultQuality",
  type: "string",
  description: "Quality used when the model gives none, or always when letAiDecideQuality is off.",
  allowedValues: IMAGE_QUALITIES,
  default: "auto",
};

/** defaultModel: the image model used when the model gives none. */
export const DEFAULT_MODEL_DESCRIPTOR: ToolParameterDescriptor = {
  name: "defaultModel",
  type: "string",
  description: "Image model used when the model gives none (gpt-image-1, dall-e-3, gemini-2.5-flash-image, …).",
  default: DEFAULT_IMAGE_MODEL,
};

/** letAiDecideQuality: whether the model may choose the quality. */
export const LET_AI_DECIDE_QUALITY_DESCRIPTOR: ToolParameterDescriptor = {
  name: "letAiDecideQuality",
  type: "boolean",
  description: "Offer the quality parameter to the model; when off, defaultQuality always applies.",
  default: true,
};

/** provider: which image provider serves every model, or auto. */
export const IMAGE_PROVIDER_DESCRIPTOR: ToolParameterDescriptor = {
  name: "provider",
  type: "string",
  description: "Provider for every model (openai, gemini), or auto to choose by model name prefix.",
  allowedValues: IMAGE_PROVIDER_SETTINGS,
  default: "auto",
};

/** Every generate_image setting, in the order the settings page shows them. */
export const GENERATE_IMAGE_SETTINGS: readonly ToolParameterDescriptor[] = [
  TIMEOUT_SECONDS_DESCRIPTOR,
  MAX_IMAGES_PER_CALL_DESCRIPTOR,
  DEFAULT_QUALITY_DESCRIPTOR,
  DEFAULT_MODEL_DESCRIPTOR,
  LET_AI_DECIDE_QUALITY_DESCRIPTOR,
  IMAGE_PROVIDER_DESCRIPTOR,
];
