/**
 * The official SDK modules, loaded on first use (importing Toolhost — every CLI command, every MCP session — does
 * not pay for SDKs a chat may never use). The provider table names these loaders; the adapters use them.
 */

/** Loads the `openai` package (Responses and Chat Completions). */
export const loadOpenAISdk = () => import("openai");
/** Loads `@anthropic-ai/sdk` (Messages). */
export const loadAnthropicSdk = () => import("@anthropic-ai/sdk");
/** Loads `@google/genai` (Interactions, generateContent). */
export const loadGoogleGenAISdk = () => import("@google/genai");
