/**
 * Image providers behind generate_image, through their official SDKs:
 *
 * - OpenAI Images (`openai` SDK, `images.generate`, one image per request, base64 output): gpt-image-* models
 *   return `b64_json` by default; dall-e-2/3 are asked for `response_format: "b64_json"` (a URL answer is refused,
 *   never downloaded).
 * - Gemini image models (`@google/genai`, `models.generateContent` with `responseModalities: ["IMAGE"]`), whose
 *   answer carries the image as an `inlineData` part. Imagen (`imagen-*`) is refused: this SDK version serves
 *   `generateImages` only on Vertex AI.
 *
 * Keys and base URLs come from the host configuration (`context.services.imageGeneration`), else from the same
 * credential reader chats use (the provider table's: OPENAI_API_KEY / GEMINI_API_KEY or GOOGLE_API_KEY, the
 * *_BASE_URL variables, or the config file). Neither is a per-user setting: a user-chosen base URL would receive
 * the host's API key.
 */
// The SDKs load on first use, not at import time: every CLI command and MCP session imports the built-ins.
import type { GoogleGenAI } from "@google/genai";
import type OpenAI from "openai";
import { credentialSourceFor, type ProviderCredentialSource } from "../../core/credentials.js";
import { ToolArgumentError, ToolError, ToolExecutionError } from "../../core/errors.js";
import type {
  ImageGenerationHostConfig,
  ImageProvider,
  ImageProviderConnection,
  ImageProviderName,
  ImageQuality,
  ProviderImage,
  ProviderImageRequest,
} from "./types.js";

/** Model-name prefixes that select a provider when the `provider` setting is "auto". */
const PREFIXES: ReadonlyArray<[string, ImageProviderName]> = [
  ["gpt-image", "openai"],
  ["chatgpt-image", "openai"],
  ["dall-e", "openai"],
  ["gemini", "gemini"],
];

/**
 * The provider for a model: the `provider` setting when it is not "auto", else by model-name prefix
 * (gpt-image-*, chatgpt-image-*, dall-e-* → openai; gemini-* → gemini). Throws ToolArgumentError for a model no
 * prefix matches, naming the known families, and for Imagen models (served only through Vertex AI).
 */
export function resolveImageProvider(model: string, setting: string = "auto"): ImageProviderName {
  const lower = model.toLowerCase();
  if (lower.startsWith("imagen") && setting !== "openai") {
    throw new ToolArgumentError(
      `Invalid argument "model": Imagen models (${model}) are only served through Vertex AI, which Toolhost does not use. Use a Gemini image model such as gemini-2.5-flash-image.`,
      { argument: "model", rule: "image_model" },
    );
  }
  if (setting === "openai" || setting === "gemini") return setting;
  const hit = PREFIXES.find(([prefix]) => lower.startsWith(prefix));
  if (!hit) {
    throw new ToolArgumentError(
      `Invalid argument "model": ${JSON.stringify(model)} is not an image model Toolhost knows. Use an OpenAI image model (gpt-image-1, dall-e-3) or a Gemini image model (gemini-2.5-flash-image), or omit "model" to use the default.`,
      { argument: "model", rule: "image_model" },
    );
  }
  return hit[1];
}

function connection(
  name: ImageProviderName,
  host: ImageProviderConnection | undefined,
  source: ProviderCredentialSource,
): Required<Pick<ImageProviderConnection, "apiKey">> & ImageProviderConnection {
  if (host?.apiKey) return { ...host, apiKey: host.apiKey };
  const found = source.credentials(name);
  const baseUrl = host?.baseUrl ?? found.baseURL;
  return { ...host, apiKey: found.apiKey, ...(baseUrl ? { baseUrl } : {}) };
}

/** Quality for the OpenAI request: GPT image models take it as is; dall-e-3 has standard/hd; dall-e-2 none. */
export function openAiQuality(
  model: string,
  quality: ImageQuality,
): "low" | "medium" | "high" | "standard" | "hd" | "auto" | undefined {
  const lower = model.toLowerCase();
  if (lower.startsWith("dall-e-2")) return undefined;
  if (lower.startsWith("dall-e")) return quality === "auto" ? undefined : quality === "high" ? "hd" : "standard";
  return quality;
}

function decodeBase64(data: string, provider: string): Uint8Array {
  const bytes = Buffer.from(data, "base64");
  if (bytes.length === 0) throw new ToolExecutionError(`${provider} returned an empty image.`);
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

/** OpenAI Images through the `openai` SDK. */
export class OpenAiImageProvider implements ImageProvider {
  readonly name = "openai" as const;
  readonly #conn: ImageProviderConnection & { apiKey: string };
  #client?: Promise<OpenAI>;

  /** `conn.apiKey` is required; `baseUrl` defaults to the SDK's own (api.openai.com/v1). */
  constructor(conn: ImageProviderConnection & { apiKey: string }) {
    this.#conn = conn;
  }

  #sdk(): Promise<OpenAI> {
    const conn = this.#conn;
    this.#client ??= import("openai").then(
      ({ default: OpenAIClient }) =>
        new OpenAIClient({
          apiKey: conn.apiKey,
          ...(conn.baseUrl ? { baseURL: conn.baseUrl } : {}),
          maxRetries: conn.maxRetries ?? 1,
        }),
    );
    return this.#client;
  }

  /** One `images.generate` call with n=1; rejects with the SDK's APIError (status and message) on failure. */
  async generate(request: ProviderImageRequest): Promise<ProviderImage> {
    const lower = request.model.toLowerCase();
    const quality = openAiQuality(request.model, request.quality);
    const client = await this.#sdk();
    const response = await client.images.generate(
      {
        model: request.model,
        prompt: request.prompt,
        n: 1,
        ...(quality ? { quality } : {}),
        ...(lower.startsWith("dall-e") ? { response_format: "b64_json" as const } : {}),
      },
      { signal: request.signal },
    );
    const image = response.data?.[0];
    if (!image?.b64_json) {
      throw new ToolExecutionError(
        image?.url
          ? "OpenAI answered with an image URL instead of image data; Toolhost does not download provider URLs."
          : "OpenAI answered without an image.",
      );
    }
    const format = response.output_format;
    return {
      bytes: decodeBase64(image.b64_json, "OpenAI"),
      ...(format ? { mimeType: `image/${format}` } : {}),
      ...(image.revised_prompt ? { revisedPrompt: image.revised_prompt } : {}),
    };
  }
}

/** Gemini image models through `@google/genai` (`generateContent`, image returned as an inlineData part). */
export class GeminiImageProvider implements ImageProvider {
  readonly name = "gemini" as const;
  readonly #conn: ImageProviderConnection & { apiKey: string };
  #client?: Promise<GoogleGenAI>;

  /** `conn.apiKey` is required; `baseUrl` defaults to generativelanguage.googleapis.com. */
  constructor(conn: ImageProviderConnection & { apiKey: string }) {
    this.#conn = conn;
  }

  #sdk(): Promise<GoogleGenAI> {
    const conn = this.#conn;
    this.#client ??= import("@google/genai").then(
      ({ GoogleGenAI: Client }) =>
        new Client({ apiKey: conn.apiKey, ...(conn.baseUrl ? { httpOptions: { baseUrl: conn.baseUrl } } : {}) }),
    );
    return this.#client;
  }

  /** One `generateContent` call; rejects with ToolExecutionError naming the block or finish reason when no image came back. */
  async generate(request: ProviderImageRequest): Promise<ProviderImage> {
    if (request.model.toLowerCase().startsWith("imagen")) {
      throw new ToolArgumentError(
        `Invalid argument "model": Imagen models (${request.model}) are only served through Vertex AI, which Toolhost does not use. Use a Gemini image model such as gemini-2.5-flash-image.`,
        { argument: "model", rule: "image_model" },
      );
    }
    const client = await this.#sdk();
    const response = await client.models.generateContent({
      model: request.model,
      contents: [{ role: "user", parts: [{ text: request.prompt }] }],
      config: { responseModalities: ["IMAGE"], abortSignal: request.signal },
    });
    const candidate = response.candidates?.[0];
    const part = candidate?.content?.parts?.find((p) => p.inlineData?.data);
    if (!part?.inlineData?.data) {
      const blocked = response.promptFeedback?.blockReason;
      const text = candidate?.content?.parts
        ?.map((p) => p.text)
        .filter(Boolean)
        .join(" ")
        .slice(0, 300);
      const why = blocked
        ? `the prompt was blocked (${blocked})`
        : candidate?.finishReason && candidate.finishReason !== "STOP"
          ? `generation stopped with ${candidate.finishReason}`
          : "no image part in the answer";
      throw new ToolExecutionError(`Gemini returned no image: ${why}${text ? `; it said: ${text}` : ""}.`, {
        provider: "gemini",
        ...(blocked ? { blockReason: blocked } : {}),
        ...(candidate?.finishReason ? { finishReason: candidate.finishReason } : {}),
      });
    }
    return {
      bytes: decodeBase64(part.inlineData.data, "Gemini"),
      ...(part.inlineData.mimeType ? { mimeType: part.inlineData.mimeType } : {}),
    };
  }
}

/**
 * The provider client for `name`: the host's replacement when `host.providers` has one, else an SDK client built
 * from the host connection or, without a host key, from `credentials` (default: the process-wide source the
 * provider table registers). Throws MissingCredentialsError (code execution_failed) naming the variables and the
 * config-file entry when no key is configured.
 */
export function createImageProvider(
  name: ImageProviderName,
  host: ImageGenerationHostConfig | undefined,
  credentials: ProviderCredentialSource = credentialSourceFor(undefined),
): ImageProvider {
  const custom = host?.providers?.[name];
  if (custom) return custom;
  const conn = connection(name, host?.[name], credentials);
  return name === "openai" ? new OpenAiImageProvider(conn) : new GeminiImageProvider(conn);
}

/** The shape of the openai SDK's APIError (checked structurally, so the SDK need not be loaded to classify). */
function isOpenAiApiError(error: unknown): error is Error & { status?: number; error?: unknown; code?: string | null } {
  return error instanceof Error && "requestID" in error && "headers" in error && "error" in error;
}

/**
 * A short, model-readable reason for a failed image, from a ToolError, an OpenAI APIError (status + message) or a
 * Gemini ApiError (whose message is the JSON error body).
 */
export function describeProviderError(error: unknown): string {
  if (error instanceof ToolError) return error.message;
  if (isOpenAiApiError(error)) {
    const message = (error.error as { message?: string } | undefined)?.message ?? error.message;
    const code = (error.error as { code?: string } | undefined)?.code ?? error.code;
    return `OpenAI ${error.status ?? "error"}${code ? ` ${code}` : ""}: ${message}`;
  }
  if (error instanceof Error) {
    const status = (error as { status?: number }).status;
    if (error.name === "ApiError" && typeof status === "number") {
      try {
        const body = JSON.parse(error.message) as { error?: { message?: string; status?: string } };
        return `Gemini ${status}${body.error?.status ? ` ${body.error.status}` : ""}: ${body.error?.message ?? error.message}`;
      } catch {
        return `Gemini ${status}: ${error.message}`;
      }
    }
    return error.message;
  }
  return String(error);
}
