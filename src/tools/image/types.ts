/**
 * Shared types of generate_image ("generate_image"): the image store the tool writes through, the providers it calls,
 * and the host-level provider configuration.
 */

/** The quality levels the tool offers; mapped per model by each provider (dall-e-3: `high` → `hd`, else `standard`). */
export const IMAGE_QUALITIES = ["auto", "low", "medium", "high"] as const;

/** One of IMAGE_QUALITIES. */
export type ImageQuality = (typeof IMAGE_QUALITIES)[number];

/** The image providers Toolhost talks to through their official SDKs. */
export type ImageProviderName = "openai" | "gemini";

/** What a store is asked to keep: the bytes of one generated image and where it came from. */
export interface ImageToStore {
  userId: string;
  chatId: string | null;
  /** Raw image bytes (PNG, JPEG, WebP or GIF; anything else is refused by the stores). */
  bytes: Uint8Array;
  /** The prompt that produced the image. */
  prompt: string;
  /** The model that produced it, e.g. "gpt-image-1". */
  model: string | null;
}

/** A stored image as the tool reports it. */
export interface StoredImage {
  /** Random UUID (lower-case, 36 characters): the only key the HTTP route accepts. */
  id: string;
  userId: string;
  /** MIME type sniffed from the bytes, e.g. "image/png". */
  mimeType: string;
  /**
   * Absolute path of the file, for a store that writes files (FileImageStore, library use); absent when the bytes
   * are in the database (the server's store): users and models never see a server path.
   */
  path?: string;
  /** Path relative to the data directory, with forward slashes; absent when the bytes are in the database. */
  relativePath?: string;
  /** Where the owner fetches it over the HTTP API: `/api/images/<id>`. */
  url: string;
  /** Size of the file in bytes. */
  size: number;
}

/**
 * Where generated images go. The application context (createAppContext: HTTP service, CLI, MCP server) provides a
 * database-backed one (SqlImageStore) through `context.services.imageStore`; without one the tool falls back to
 * FileImageStore (files only, not served).
 */
export interface ImageStore {
  /**
   * Stores the image (in the database, or as a file written atomically) and records it. Throws ToolExecutionError when the
   * bytes are not a recognised raster image, and the file-system or database error otherwise.
   */
  save(image: ImageToStore): Promise<StoredImage>;
}

/** One image request to a provider. */
export interface ProviderImageRequest {
  prompt: string;
  model: string;
  quality: ImageQuality;
  /** Aborts the HTTP request (time budget or caller cancel). */
  signal: AbortSignal;
}

/** One image a provider returned. */
export interface ProviderImage {
  bytes: Uint8Array;
  /** The MIME type the provider claimed (the store sniffs the bytes anyway). */
  mimeType?: string;
  /** The prompt the provider actually used, when it rewrote it (dall-e-3). */
  revisedPrompt?: string;
}

/** A client for one provider: one call makes exactly one image, so outcomes are per image. */
export interface ImageProvider {
  readonly name: ImageProviderName;
  /** Generates one image; rejects with a ToolError (or the SDK's error) describing why it failed. */
  generate(request: ProviderImageRequest): Promise<ProviderImage>;
}

/** Host-level connection settings of one provider (never per-user: a user-set base URL could capture the key). */
export interface ImageProviderConnection {
  /** API key; default from the environment (OPENAI_API_KEY / GEMINI_API_KEY). */
  apiKey?: string;
  /** Base URL; default from the environment (OPENAI_BASE_URL / GEMINI_BASE_URL), else the provider's own. */
  baseUrl?: string;
  /** Retries of a failed request (OpenAI SDK only); default 1. */
  maxRetries?: number;
}

/**
 * Host configuration of image generation, passed as `context.services.imageGeneration` (the server and CLI set it
 * from their configuration; tests point it at loopback fakes).
 */
export interface ImageGenerationHostConfig {
  openai?: ImageProviderConnection;
  gemini?: ImageProviderConnection;
  /** Replaces the SDK-backed providers entirely (e.g. a host with its own gateway). */
  providers?: Partial<Record<ImageProviderName, ImageProvider>>;
}
