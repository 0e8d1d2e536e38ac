import { describe, expect, it } from "vitest";
import { ToolParameterError, ToolSettingsError } from "../../src/core/errors.js";
import { integerSetting } from "../../src/core/settings-declaration.js";
import {
  getDefaultToolSettings,
  getSafeEffectiveToolSettings,
  getToolDefinitionsForTools,
  mergeToolSettings,
  normalizeToolParameters,
  TIMEOUT_SECONDS_DESCRIPTOR,
} from "../../src/core/settings-policy.js";
import type { RegisteredTool } from "../../src/core/types.js";
import { recordingLogger } from "../helpers/runtime.js";

function tool(overrides: Partial<RegisteredTool["settings"]> = {}, name = "sample"): RegisteredTool {
  return {
    definition: { name, description: "d", parameters: { type: "object", properties: {} } },
    settings: {
      title: "Sample",
      description: "A sample tool",
      category: "system",
      enabledByDefault: true,
      canDisable: true,
      defaultParameters: { timeoutSeconds: 30, mode: "fast", verbose: false, roots: [] },
      parameterDescriptors: [
        { name: "timeoutSeconds", type: "integer", description: "t", min: 5, max: 600 },
        { name: "mode", type: "string", description: "m", allowedValues: ["fast", "slow"] },
        { name: "verbose", type: "boolean", description: "v" },
        { name: "roots", type: "string[]", description: "r", max: 3 },
        { name: "ratio", type: "number", description: "n", min: 0, max: 1 },
      ],
      ...overrides,
    },
    execute: async () => null,
  };
}

describe("normalizeToolParameters", () => {
  const rejected: [string, Record<string, unknown>, RegExp][] = [
    ["unknown name", { nope: 1 }, /Unknown parameter "nope".*known parameters: timeoutSeconds/],
    ["integer given a string", { timeoutSeconds: "60" }, /"timeoutSeconds".*must be an integer/],
    ["integer given a fraction", { timeoutSeconds: 7.5 }, /"timeoutSeconds".*must be an integer/],
    ["below min", { timeoutSeconds: 4 }, /Invalid value 4 for parameter "timeoutSeconds".*at least 5/],
    ["above max", { timeoutSeconds: 601 }, /601.*"timeoutSeconds".*at most 600/],
    ["disallowed value", { mode: "turbo" }, /"turbo".*"mode".*one of "fast", "slow"/],
    ["boolean given a string", { verbose: "true" }, /"verbose".*true or false/],
    ["list given a string", { roots: "/srv" }, /"roots".*list of strings/],
    ["list too long", { roots: ["a", "b", "c", "d"] }, /"roots".*list length must be at most 3/],
    ["number not finite", { ratio: Number.POSITIVE_INFINITY }, /"ratio".*finite number/],
    ["number out of range", { ratio: 1.5 }, /"ratio".*at most 1/],
  ];
  it.each(rejected)("rejects %s", (_label, params, message) => {
    const t = tool();
    expect(() => normalizeToolParameters(t, params)).toThrow(ToolParameterError);
    expect(() => normalizeToolParameters(t, params)).toThrow(message);
  });

  const accepted: [string, Record<string, unknown>][] = [
    ["bounds inclusive (min)", { timeoutSeconds: 5 }],
    ["bounds inclusive (max)", { timeoutSeconds: 600 }],
    ["allowed value", { mode: "slow" }],
    ["boolean", { verbose: true }],
    ["list", { roots: ["/a", "/b"] }],
    ["number", { ratio: 0.5 }],
    ["empty", {}],
  ];
  it.each(accepted)("accepts %s", (_label, params) => {
    expect(normalizeToolParameters(tool(), params)).toEqual(params);
  });

  it("errors carry the invalid_settings code and name the parameter", () => {
    try {
      normalizeToolParameters(tool(), { timeoutSeconds: 0 });
      expect.unreachable();
    } catch (error) {
      expect((error as ToolParameterError).code).toBe("invalid_settings");
      expect((error as ToolParameterError).details).toMatchObject({ parameter: "timeoutSeconds" });
    }
  });
});

describe("mergeToolSettings", () => {
  it("layers defaults < saved < updates", () => {
    const merged = mergeToolSettings(
      tool(),
      { parameters: { timeoutSeconds: 60, mode: "slow" } },
      { parameters: { timeoutSeconds: 90 } },
    );
    expect(merged).toEqual({
      enabled: true,
      values: { timeoutSeconds: 90, mode: "slow", verbose: false, roots: [] },
    });
  });
  it("takes the enabled state from the latest layer that sets it", () => {
    expect(mergeToolSettings(tool(), { enabled: false }).enabled).toBe(false);
    expect(mergeToolSettings(tool(), { enabled: false }, { enabled: true }).enabled).toBe(true);
    expect(mergeToolSettings(tool({ enabledByDefault: false }), { enabled: null }).enabled).toBe(false);
  });
  it("refuses to disable a tool that cannot be disabled", () => {
    expect(() => mergeToolSettings(tool({ canDisable: false }), null, { enabled: false })).toThrow(ToolSettingsError);
  });
  it("ignores a saved disabled state on a tool that cannot be disabled", () => {
    expect(mergeToolSettings(tool({ canDisable: false }), { enabled: false }).enabled).toBe(true);
  });
  it("does not share the defaults object", () => {
    const t = tool();
    const merged = mergeToolSettings(t);
    (merged.values.roots as string[]).push("x");
    expect(getDefaultToolSettings(t).values.roots).toEqual([]);
  });
});

describe("getSafeEffectiveToolSettings", () => {
  it("falls back to default parameters for corrupt saved settings, logs, and keeps the user's enabled choice", () => {
    const logger = recordingLogger();
    const t = tool();
    const effective = getSafeEffectiveToolSettings(
      t,
      { enabled: false, parameters: { timeoutSeconds: "lots" } },
      logger,
    );
    expect(effective).toEqual({ enabled: false, values: getDefaultToolSettings(t).values });
    expect(logger.lines.some((l) => l.level === "warn")).toBe(true);
  });
  it("returns merged settings when they are valid", () => {
    expect(getSafeEffectiveToolSettings(tool(), { parameters: { mode: "slow" } }).values.mode).toBe("slow");
  });
});

describe("getToolDefinitionsForTools", () => {
  it("keeps enabled tools and uses buildDefinition", () => {
    const a = tool({}, "a");
    const b = tool({ enabledByDefault: false }, "b");
    const c: RegisteredTool = {
      ...tool({}, "c"),
      buildDefinition: (s) => ({ name: "c", description: `mode=${s.values.mode}`, parameters: { type: "object" } }),
    };
    const defs = getToolDefinitionsForTools([a, b, c], new Map([["c", { enabled: true, values: { mode: "slow" } }]]));
    expect(defs.map((d) => d.name)).toEqual(["a", "c"]);
    expect(defs[1]?.description).toBe("mode=slow");
  });
});

describe("integerSetting reads range and default from the descriptor", () => {
  it.each([
    [10, 10],
    [1, 5],
    [1000, 600],
    ["7", 30],
    [Number.NaN, 30],
    [12.9, 12],
    [undefined, 30],
  ])("%s → %s", (value, expected) => {
    expect(integerSetting({ timeoutSeconds: value }, TIMEOUT_SECONDS_DESCRIPTOR)).toBe(expected);
  });
});

describe("getSafeEffectiveToolSettings keeps what is valid", () => {
  it("falls back per parameter and keeps the valid entries of a list", () => {
    const t = tool();
    const logger = recordingLogger();
    const effective = getSafeEffectiveToolSettings(
      t,
      { parameters: { timeoutSeconds: 90, mode: "turbo", roots: ["/a", 7, "/b"], nope: 1 } },
      logger,
    );
    expect(effective.values).toEqual({ timeoutSeconds: 90, mode: "fast", verbose: false, roots: ["/a", "/b"] });
    const warned = logger.lines.find((l) => l.level === "warn")?.obj as { dropped: string[] };
    expect(warned.dropped).toEqual(["mode", "roots (1 of 3 entries)", "nope"]);
  });
});

describe("getSafeEffectiveToolSettings and a stored list longer than its cap", () => {
  it("keeps the first entries up to the cap instead of dropping the whole list (a deny list must not vanish)", () => {
    const logger = recordingLogger();
    const effective = getSafeEffectiveToolSettings(
      tool(),
      { parameters: { roots: ["/a", "/b", "/c", "/d", 5] } },
      logger,
    );
    expect(effective.values.roots).toEqual(["/a", "/b", "/c"]);
    const warned = logger.lines.find((l) => l.level === "warn")?.obj as { dropped: string[] };
    expect(warned.dropped).toEqual(["roots (2 of 5 entries)"]);
  });
});
