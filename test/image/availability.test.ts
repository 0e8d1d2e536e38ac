/** generate_image is offered to models only when an image provider has a key. */
import { describe, expect, it } from "vitest";
import "../../src/providers/table.js";
import { MissingCredentialsError } from "../../src/core/credentials.js";
import { imageProvidersUnavailable } from "../../src/tools/builtin/generate-image.js";
import { memoryRuntime } from "../helpers/runtime.js";

const noKeys = {
  credentials(provider: string) {
    throw new MissingCredentialsError(
      provider,
      [provider === "openai" ? "OPENAI_API_KEY" : "GEMINI_API_KEY"],
      "/cfg.json",
    );
  },
};
const geminiOnly = {
  credentials(provider: string) {
    if (provider === "gemini") return { apiKey: "g" };
    throw new MissingCredentialsError(provider, ["OPENAI_API_KEY"], "/cfg.json");
  },
};

describe("generate_image availability", () => {
  it("names the variables when no image provider has a key; any one provider's key is enough", () => {
    const reason = imageProvidersUnavailable({ providerCredentials: noKeys });
    expect(reason).toMatch(/OPENAI_API_KEY/);
    expect(reason).toMatch(/GEMINI_API_KEY/);
    expect(imageProvidersUnavailable({ providerCredentials: geminiOnly })).toBeUndefined();
    expect(
      imageProvidersUnavailable({ providerCredentials: noKeys, imageGeneration: { openai: { apiKey: "k" } } }),
    ).toBeUndefined();
  });

  it("is left out of the tools offered to models without a key, and offered with one", async () => {
    for (const [services, offered] of [
      [{ providerCredentials: noKeys }, false],
      [{ providerCredentials: geminiOnly }, true],
    ] as const) {
      const { runtime } = memoryRuntime();
      Object.assign(runtime.services, services);
      const { definitions } = await runtime.getEnabledToolRuntime("u");
      expect(definitions.some((d) => d.name === "generate_image")).toBe(offered);
      // Other enabled tools are offered either way.
      expect(definitions.some((d) => d.name === "read_file")).toBe(true);
    }
  });
});
