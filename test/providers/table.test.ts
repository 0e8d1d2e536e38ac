import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CHAT_PROVIDERS, DEFAULT_CHAT_MODELS, defaultAdapterFactory } from "../../src/app/chat-types.js";
import { credentialSourceFor, MissingCredentialsError, resolveCredentials } from "../../src/core/credentials.js";
import {
  createProviderAdapter,
  describeProviderVariables,
  PROVIDER_TABLE,
  providerCredentials,
  providerEntry,
  tableCredentialSource,
} from "../../src/providers/table.js";
import { tempDir } from "../helpers/server.js";

const noFile = () => ({ TOOLHOST_CONFIG: join(tempDir("toolhost-table-"), "absent.json") });

describe("the provider table", () => {
  it("is what chats offer: ids, default models and adapters all come from it", () => {
    expect(CHAT_PROVIDERS).toEqual(PROVIDER_TABLE.map((e) => e.id));
    for (const entry of PROVIDER_TABLE) {
      expect(DEFAULT_CHAT_MODELS[entry.id]).toBe(entry.defaultModel);
      expect(createProviderAdapter(entry.id, { apiKey: "k" }).name).toBe(entry.id);
      expect(entry.credentials.provider).toBe(entry.id);
      expect(entry.credentials.configKeys[0]).toBe(entry.id);
    }
    expect(() => providerEntry("mistral")).toThrow(/Unknown provider "mistral": use one of openai, openai-chat/);
  });

  it("loads each provider's official SDK through its loader", async () => {
    for (const entry of PROVIDER_TABLE) {
      const sdk = (await entry.sdk.load()) as Record<string, unknown>;
      expect(Object.keys(sdk).length).toBeGreaterThan(0);
    }
  });

  it("declares the capabilities the rest of Toolhost relies on", () => {
    expect(PROVIDER_TABLE.filter((e) => e.capabilities.images).map((e) => e.id)).toEqual(["openai", "gemini"]);
    expect(providerEntry("openai").capabilities.strictTools).toBe("always");
    expect(providerEntry("openai-chat").capabilities.strictTools).toBe("when-official");
  });

  it("gives one error, for chats and tools alike, naming every variable and the config-file entry", () => {
    const env = noFile();
    for (const entry of PROVIDER_TABLE) {
      let thrown: unknown;
      try {
        providerCredentials(entry.id, env);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(MissingCredentialsError);
      const message = (thrown as Error).message;
      for (const variable of entry.credentials.apiKeyEnv) expect(message).toContain(variable);
      expect(message).toContain(`providers.${entry.id}.apiKey in the config file (TOOLHOST_CONFIG)`);
      expect(message).not.toContain(String(env.TOOLHOST_CONFIG));
      // The chat path reports exactly the same text.
      expect(() => defaultAdapterFactory(entry.id, env)).toThrow(message);
    }
  });

  it("reads GOOGLE_API_KEY for gemini and lets openai-chat use a keyless local server", () => {
    expect(providerCredentials("gemini", { ...noFile(), GOOGLE_API_KEY: "g" })).toEqual({ apiKey: "g" });
    expect(providerCredentials("gemini", { ...noFile(), GOOGLE_API_KEY: "g", GEMINI_API_KEY: "first" })).toEqual({
      apiKey: "first",
    });
    expect(providerCredentials("openai-chat", { ...noFile(), OPENAI_BASE_URL: "http://127.0.0.1:1/v1" })).toEqual({
      apiKey: "not-needed",
      baseURL: "http://127.0.0.1:1/v1",
    });
    expect(() => providerCredentials("openai-chat", noFile())).toThrow(/OPENAI_BASE_URL to a server that needs no key/);
  });

  it("does not read the config file when the environment has everything", () => {
    const env = { TOOLHOST_CONFIG: "/proc/self/nonexistent/dir/x.json", ANTHROPIC_API_KEY: "a" };
    expect(providerCredentials("anthropic", env, undefined)).toEqual({ apiKey: "a" });
    expect(resolveCredentials(providerEntry("anthropic").credentials, env)).toEqual({ apiKey: "a" });
  });

  it("is the default credential source tools receive, unless the host passes its own", () => {
    expect(credentialSourceFor(undefined)).toBe(tableCredentialSource);
    const own = { credentials: () => ({ apiKey: "x" }) };
    expect(credentialSourceFor({ providerCredentials: own })).toBe(own);
  });

  it("describes each provider's variables for help texts", () => {
    const lines = describeProviderVariables();
    expect(lines).toHaveLength(PROVIDER_TABLE.length);
    expect(lines.find((l) => l.startsWith("gemini"))).toMatch(/GEMINI_API_KEY \(or GOOGLE_API_KEY\), GEMINI_BASE_URL/);
  });
});
