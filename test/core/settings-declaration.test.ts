import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import {
  booleanSetting,
  defineTool,
  describeSetting,
  integerSetting,
  lazyExecute,
  normalizeToolSettings,
  stringListSetting,
  stringSetting,
} from "../../src/core/settings-declaration.js";
import { mergeToolSettings, normalizeToolParameters } from "../../src/core/settings-policy.js";
import type { ToolDefinition, ToolParameterDescriptor } from "../../src/core/types.js";
import { builtinSettingsReference } from "../../src/tools/settings-reference.js";

const definition: ToolDefinition = {
  name: "sample",
  description: "Does a sample thing.",
  parameters: { type: "object" },
};
const LIMIT: ToolParameterDescriptor = {
  name: "limit",
  type: "integer",
  description: "Most items.",
  min: 1,
  max: 50,
  default: 10,
  unit: "items",
};
const MODE: ToolParameterDescriptor = {
  name: "mode",
  type: "string",
  description: "Mode.",
  allowedValues: ["fast", "slow"],
  default: "fast",
};

describe("a tool declares each setting once", () => {
  it("registers a trivial tool with no settings object at all, with sensible defaults", () => {
    const registry = new ToolRegistryStore();
    const stored = registry.register({ definition, execute: async () => "ok" });
    expect(stored.settings).toMatchObject({
      title: "sample",
      description: "Does a sample thing.",
      category: "interaction",
      enabledByDefault: true,
      canDisable: true,
      defaultParameters: {},
    });
    expect(registry.get("sample")).toBe(stored);
  });

  it("derives defaultParameters from the descriptors", () => {
    const tool = defineTool({
      definition,
      settings: { title: "Sample", parameterDescriptors: [LIMIT, MODE] },
      execute: async () => null,
    });
    expect(tool.settings.defaultParameters).toEqual({ limit: 10, mode: "fast" });
    expect(mergeToolSettings(tool).values).toEqual({ limit: 10, mode: "fast" });
    expect(() => normalizeToolParameters(tool, { limit: 51 })).toThrow(/at most 50/);
  });

  it("accepts the seed's defaultParameters shape: it fills a descriptor without default", () => {
    const { name, type, description } = LIMIT;
    const meta = normalizeToolSettings(definition, {
      parameterDescriptors: [{ name, type, description, min: 1, max: 50 }],
      defaultParameters: { limit: 7 },
    });
    expect(meta.parameterDescriptors[0]?.default).toBe(7);
    expect(meta.defaultParameters).toEqual({ limit: 7 });
  });

  it.each([
    [
      "a default that contradicts the descriptor",
      { parameterDescriptors: [LIMIT], defaultParameters: { limit: 11 } },
      /contradicts/,
    ],
    [
      "a default with no descriptor",
      { parameterDescriptors: [LIMIT], defaultParameters: { other: 1 } },
      /no parameter descriptor/,
    ],
    [
      "a default outside its own range",
      { parameterDescriptors: [{ ...LIMIT, default: 99 }] },
      /default of setting "limit" is invalid.*at most 50/,
    ],
    [
      "a default outside its allowed values",
      { parameterDescriptors: [{ ...MODE, default: "medium" }] },
      /must be one of/,
    ],
    ["min above max", { parameterDescriptors: [{ ...LIMIT, min: 60 }] }, /min 60 above max 50/],
    ["a setting declared twice", { parameterDescriptors: [LIMIT, LIMIT] }, /declared twice/],
  ])("refuses at registration: %s", (_what, settings, message) => {
    expect(() => new ToolRegistryStore().register({ definition, settings, execute: async () => null })).toThrow(
      message,
    );
  });
});

describe("typed readers take range and default from the descriptor", () => {
  it.each([
    [undefined, 10],
    [25, 25],
    [0, 1],
    [1e9, 50],
    [7.8, 7],
    ["12", 10],
    [null, 10],
  ])("integerSetting(%s) → %s", (value, expected) => {
    expect(integerSetting({ limit: value }, LIMIT)).toBe(expected);
  });

  it("string, boolean and list readers fall back to the default on corrupt values", () => {
    expect(stringSetting({ mode: "slow" }, MODE)).toBe("slow");
    expect(stringSetting({ mode: "medium" }, MODE)).toBe("fast");
    expect(stringSetting({ mode: 3 }, MODE)).toBe("fast");
    const flag: ToolParameterDescriptor = { name: "flag", type: "boolean", description: "f", default: true };
    expect(booleanSetting({ flag: false }, flag)).toBe(false);
    expect(booleanSetting({ flag: "no" }, flag)).toBe(true);
    const list: ToolParameterDescriptor = { name: "list", type: "string[]", description: "l", default: ["a"] };
    expect(stringListSetting({ list: ["x", "y"] }, list)).toEqual(["x", "y"]);
    expect(stringListSetting({ list: ["x", 1] }, list)).toEqual(["a"]);
  });

  it("refuses to read a setting whose descriptor has no default of its type", () => {
    expect(() => integerSetting({}, { ...LIMIT, default: undefined })).toThrow(/declares no default/);
  });
});

describe("docs derive from the descriptors", () => {
  it("describeSetting says type, range with unit, default and who may change it", () => {
    expect(describeSetting(LIMIT)).toBe("integer, 1–50 items, default 10");
    expect(describeSetting({ ...MODE, adminOnly: true })).toBe(
      'string, one of "fast", "slow", default "fast", admin only',
    );
  });

  it("docs/settings-reference.md matches the code (run `npm run docs:settings` after changing a setting)", () => {
    const onDisk = readFileSync(new URL("../../docs/settings-reference.md", import.meta.url), "utf8");
    expect(onDisk).toBe(builtinSettingsReference());
  });
});

describe("lazyExecute", () => {
  it("loads the implementation once, on the first call, and tries again after a failed load", async () => {
    let loads = 0;
    const execute = lazyExecute(async () => {
      loads += 1;
      if (loads === 1) throw new Error("not yet");
      return async (args) => ({ echoed: args });
    });
    expect(loads).toBe(0);
    const context = {} as Parameters<typeof execute>[1];
    await expect(execute({ a: 1 }, context)).rejects.toThrow("not yet");
    expect(await execute({ a: 2 }, context)).toEqual({ echoed: { a: 2 } });
    expect(await execute({ a: 3 }, context)).toEqual({ echoed: { a: 3 } });
    expect(loads).toBe(2);
  });
});
