import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadProviderFileConfig, providerConfigPath, providerCredentials } from "../../src/providers/index.js";
import { tempDir } from "../helpers/server.js";

function configFile(content: string): string {
  const path = join(tempDir("toolhost-config-"), "config.json");
  writeFileSync(path, content);
  return path;
}

describe("provider keys from a config file", () => {
  it("reads keys and base URLs from the file; the environment wins", () => {
    const TOOLHOST_CONFIG = configFile(
      JSON.stringify({
        providers: {
          openai: { apiKey: "sk-file", baseURL: "http://127.0.0.1:1/v1" },
          anthropic: { apiKey: "sk-ant-file" },
        },
      }),
    );
    expect(providerCredentials("openai", { TOOLHOST_CONFIG })).toEqual({
      apiKey: "sk-file",
      baseURL: "http://127.0.0.1:1/v1",
    });
    expect(providerCredentials("openai-chat", { TOOLHOST_CONFIG })).toEqual({
      apiKey: "sk-file",
      baseURL: "http://127.0.0.1:1/v1",
    });
    expect(providerCredentials("anthropic", { TOOLHOST_CONFIG, ANTHROPIC_API_KEY: "sk-env" })).toEqual({
      apiKey: "sk-env",
    });
    // Named by its variable, never by its path (a non-admin must not learn where the server keeps its files).
    expect(() => providerCredentials("gemini", { TOOLHOST_CONFIG })).toThrow(
      /GEMINI_API_KEY.*providers\.gemini\.apiKey in the config file \(TOOLHOST_CONFIG\)/,
    );
    expect(() => providerCredentials("gemini", { TOOLHOST_CONFIG })).not.toThrow(TOOLHOST_CONFIG);
  });

  it("a missing file is no configuration; a broken one is an error naming the file", () => {
    expect(loadProviderFileConfig({ TOOLHOST_CONFIG: "/nonexistent/toolhost.json" })).toEqual({});
    const broken = configFile("{oops");
    expect(() => loadProviderFileConfig({ TOOLHOST_CONFIG: broken })).toThrow(new RegExp(`${broken}.*not valid JSON`));
    const wrongType = configFile(JSON.stringify({ providers: { openai: { apiKey: 42 } } }));
    expect(() => loadProviderFileConfig({ TOOLHOST_CONFIG: wrongType })).toThrow(
      /providers\.openai\.apiKey must be a string/,
    );
    expect(() => loadProviderFileConfig({ TOOLHOST_CONFIG: configFile("[]") })).toThrow(/must be a JSON object/);
  });

  it("defaults to the XDG config directory", () => {
    expect(providerConfigPath({ XDG_CONFIG_HOME: "/x" })).toBe("/x/toolhost/config.json");
  });
});

describe("the config file, read again when it changes", () => {
  it("sees a rewritten key, a new file and a removed one on the next read", async () => {
    const { rmSync, renameSync } = await import("node:fs");
    const TOOLHOST_CONFIG = configFile(JSON.stringify({ providers: { openai: { apiKey: "sk-one" } } }));
    expect(providerCredentials("openai", { TOOLHOST_CONFIG }).apiKey).toBe("sk-one");
    // Same size, rewritten in place.
    writeFileSync(TOOLHOST_CONFIG, JSON.stringify({ providers: { openai: { apiKey: "sk-two" } } }));
    expect(providerCredentials("openai", { TOOLHOST_CONFIG }).apiKey).toBe("sk-two");
    // Replaced by rename, as editors and the CLI write files.
    writeFileSync(`${TOOLHOST_CONFIG}.tmp`, JSON.stringify({ providers: { openai: { apiKey: "sk-three-longer" } } }));
    renameSync(`${TOOLHOST_CONFIG}.tmp`, TOOLHOST_CONFIG);
    expect(providerCredentials("openai", { TOOLHOST_CONFIG }).apiKey).toBe("sk-three-longer");
    // Broken: the error, not the last good content.
    writeFileSync(TOOLHOST_CONFIG, "{ not json");
    expect(() => loadProviderFileConfig({ TOOLHOST_CONFIG })).toThrow(/not valid JSON/);
    rmSync(TOOLHOST_CONFIG);
    expect(loadProviderFileConfig({ TOOLHOST_CONFIG })).toEqual({});
  });
});
