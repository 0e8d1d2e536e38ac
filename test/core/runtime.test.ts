import { describe, expect, it } from "vitest";
import { Tool, type ToolDef, ToolRegistry, ToolResult } from "../../src/core/custom-tools.js";
import { ToolExecutionError, ToolTimeoutError } from "../../src/core/errors.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryToolSettingsStore } from "../../src/core/stores.js";
import { trigger } from "../../src/core/trigger.js";
import type { RegisteredTool, ToolContext } from "../../src/core/types.js";
import { recordingLogger } from "../helpers/runtime.js";

function setup() {
  const registry = new ToolRegistryStore();
  const store = new MemoryToolSettingsStore();
  const logger = recordingLogger();
  const runtime = new ToolRuntime({ registry, store, logger, dataDir: "/tmp/toolhost-runtime-test" });
  return { registry, store, logger, runtime };
}

function echoTool(
  overrides: Partial<RegisteredTool> = {},
  settings: Partial<RegisteredTool["settings"]> = {},
): RegisteredTool {
  return {
    definition: {
      name: "echo",
      description: "Echo",
      parameters: {
        type: "object",
        properties: { text: { type: "string" }, times: { type: "integer", minimum: 1, default: 1 } },
        required: ["text"],
      },
    },
    settings: {
      title: "Echo",
      description: "Echo",
      category: "interaction",
      enabledByDefault: true,
      canDisable: true,
      defaultParameters: { suffix: "!" },
      parameterDescriptors: [{ name: "suffix", type: "string", description: "s" }],
      ...settings,
    },
    execute: async (args, ctx) => {
      const { text, times } = args as { text: string; times: number };
      return { out: `${text.repeat(times)}${ctx.settings.values.suffix}`, cwd: ctx.workingDirectory };
    },
    ...overrides,
  };
}

describe("registry", () => {
  it("throws on a duplicate name", () => {
    const { registry } = setup();
    registry.register(echoTool());
    expect(() => registry.register(echoTool())).toThrow(/already registered/);
  });
  it("rejects invalid names and non-object schemas", () => {
    const { registry } = setup();
    expect(() =>
      registry.register(
        echoTool({ definition: { name: "bad name", description: "", parameters: { type: "object" } } }),
      ),
    ).toThrow(/Invalid tool name/);
    expect(() =>
      registry.register(echoTool({ definition: { name: "ok", description: "", parameters: { type: "string" } } })),
    ).toThrow(/type "object"/);
  });
});

describe("executeTool", () => {
  it("runs a tool with parsed arguments, defaults and merged settings", async () => {
    const { registry, runtime, store } = setup();
    registry.register(echoTool());
    await store.save("u1", "echo", { enabled: null, parameters: { suffix: "?" } });
    const outcome = await runtime.executeTool("echo", '{"text":"hi","times":null}', {
      userId: "u1",
      workingDirectory: "/tmp",
    });
    expect(outcome).toMatchObject({ ok: true, result: { out: "hi?", cwd: "/tmp" } });
  });

  it("refuses an unknown tool with not_found", async () => {
    const { runtime } = setup();
    const outcome = await runtime.executeTool("nope", {}, { userId: "u" });
    expect(outcome).toMatchObject({ ok: false, error: { code: "not_found" } });
  });

  it("refuses a disabled tool with access_denied and says how to enable it", async () => {
    const { registry, runtime, store } = setup();
    registry.register(echoTool());
    await store.save("u", "echo", { enabled: false, parameters: {} });
    const outcome = await runtime.executeTool("echo", { text: "x" }, { userId: "u" });
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe("access_denied");
      expect(outcome.error.message).toMatch(/settings set echo --enable/);
    }
  });

  it("falls back to defaults when saved settings are corrupt, and logs it", async () => {
    const { registry, runtime, store, logger } = setup();
    registry.register(echoTool());
    await store.save("u", "echo", { enabled: null, parameters: { suffix: 42 } });
    const outcome = await runtime.executeTool("echo", { text: "a" }, { userId: "u" });
    expect(outcome).toMatchObject({ ok: true, result: { out: "a!" } });
    expect(logger.lines.some((l) => l.level === "warn" && /invalid/.test(l.msg ?? ""))).toBe(true);
  });

  it.each([
    ['{"text": 5}', /"text": must be string/],
    ['{"text": null}', /Missing required argument "text"/],
    ["{}", /Missing required argument "text"/],
    ['{"text":"a","times":"2"}', /"times": must be integer/],
    ['{"text":"a","times":0}', /"times": must be >= 1/],
    ['{"text":"a","loud":true}', /Unknown argument "loud"; expected one of: text, times/],
    ["{not json", /not valid JSON/],
    ["[1,2]", /must be a JSON object/],
  ])("rejects malformed arguments %s as validation_failed", async (args, message) => {
    const { registry, runtime } = setup();
    registry.register(echoTool());
    const outcome = await runtime.executeTool("echo", args, { userId: "u" });
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe("validation_failed");
      expect(outcome.error.message).toMatch(message);
    }
  });

  it("times out a slow tool with the timeout code, and the tool sees the reason", async () => {
    const { registry, runtime } = setup();
    let reason: unknown;
    registry.register(
      echoTool({
        timeoutMs: () => 50,
        execute: (_args, ctx: ToolContext) =>
          new Promise((resolve) => {
            ctx.signal.addEventListener("abort", () => {
              reason = ctx.signal.reason;
            });
            setTimeout(resolve, 5_000).unref();
          }),
      }),
    );
    const outcome = await runtime.executeTool("echo", { text: "x" }, { userId: "u" });
    expect(outcome).toMatchObject({ ok: false, error: { code: "timeout" } });
    expect(reason).toBeInstanceOf(ToolTimeoutError);
  });

  it("a timeout names timeoutSeconds as the way out only to a tool that has that setting", async () => {
    const hang = () => new Promise((resolve) => setTimeout(resolve, 5_000).unref());
    const { registry, runtime } = setup();
    registry.register(echoTool({ timeoutMs: () => 20, execute: hang }));
    registry.register(
      echoTool(
        { definition: { ...echoTool().definition, name: "slow" }, timeoutMs: () => 20, execute: hang },
        {
          defaultParameters: {},
          parameterDescriptors: [
            { name: "timeoutSeconds", type: "integer", description: "budget", min: 1, max: 60, default: 30 },
          ],
        },
      ),
    );
    const fixed = await runtime.executeTool("echo", { text: "x" }, { userId: "u" });
    expect(fixed).toMatchObject({ ok: false, error: { code: "timeout" } });
    if (!fixed.ok) {
      expect(fixed.error.message).not.toMatch(/timeoutSeconds/);
      expect(fixed.error.message).toMatch(/Narrow the request/);
    }
    const settable = await runtime.executeTool("slow", { text: "x" }, { userId: "u" });
    expect(settable).toMatchObject({ ok: false, error: { code: "timeout" } });
    if (!settable.ok) expect(settable.error.message).toMatch(/raise timeoutSeconds in the tool settings/);
  });

  it("reports a parent abort as aborted, never as a timeout", async () => {
    const { registry, runtime } = setup();
    registry.register(echoTool({ execute: () => new Promise((resolve) => setTimeout(resolve, 5_000).unref()) }));
    const controller = new AbortController();
    const pending = runtime.executeTool("echo", { text: "x" }, { userId: "u", signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    expect(await pending).toMatchObject({ ok: false, error: { code: "aborted" } });
  });

  it("a tool that first reads its signal after the call timed out gets it already aborted, with the reason", async () => {
    const { registry, runtime } = setup();
    let seen: AbortSignal | undefined;
    let finish: () => void = () => {};
    const late = new Promise<void>((resolve) => {
      finish = resolve;
    });
    registry.register(
      echoTool({
        timeoutMs: () => 20,
        execute: (_args, ctx: ToolContext) =>
          new Promise((resolve) => {
            setTimeout(() => {
              seen = ctx.signal;
              finish();
              resolve({ out: "late" });
            }, 60).unref();
          }),
      }),
    );
    expect(await runtime.executeTool("echo", { text: "x" }, { userId: "u" })).toMatchObject({
      ok: false,
      error: { code: "timeout" },
    });
    await late;
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toBeInstanceOf(ToolTimeoutError);
  });

  it("gives tools read-only settings, and a saved change reaches the next call", async () => {
    const { registry, runtime, store } = setup();
    const seen: ToolContext["settings"][] = [];
    registry.register(
      echoTool({
        execute: async (args, ctx: ToolContext) => {
          seen.push(ctx.settings);
          return { out: `${(args as { text: string }).text}${ctx.settings.values.suffix}` };
        },
      }),
    );
    expect(await runtime.executeTool("echo", { text: "a" }, { userId: "u" })).toMatchObject({ result: { out: "a!" } });
    expect(Object.isFrozen(seen[0]?.values)).toBe(true);
    await store.save("u", "echo", { enabled: null, parameters: { suffix: "?" } });
    expect(await runtime.executeTool("echo", { text: "a" }, { userId: "u" })).toMatchObject({ result: { out: "a?" } });
  });

  it("classifies a thrown plain Error as execution_failed", async () => {
    const { registry, runtime } = setup();
    registry.register(
      echoTool({
        execute: async () => {
          throw new Error("disk on fire");
        },
      }),
    );
    expect(await runtime.executeTool("echo", { text: "x" }, { userId: "u" })).toMatchObject({
      ok: false,
      error: { code: "execution_failed", message: "disk on fire" },
    });
  });

  it("getEnabledToolRuntime yields enabled tools with settings-aware definitions", async () => {
    const { registry, runtime, store } = setup();
    registry.register(echoTool());
    registry.register(
      echoTool(
        {
          definition: { name: "off", description: "", parameters: { type: "object" } },
          buildDefinition: () => ({ name: "off", description: "built", parameters: { type: "object" } }),
        },
        { enabledByDefault: false },
      ),
    );
    expect((await runtime.getEnabledToolRuntime("u")).definitions.map((d) => d.name)).toEqual(["echo"]);
    await store.save("u", "off", { enabled: true, parameters: {} });
    const enabled = await runtime.getEnabledToolRuntime("u");
    expect(enabled.definitions.map((d) => d.description)).toEqual(["Echo", "built"]);
  });
});

class ExchangeRateTool extends Tool {
  get definition(): ToolDef {
    return {
      name: "get_exchange_rate",
      description: "Get the current exchange rate between two currencies.",
      params: [
        { name: "from_currency", type: "string", description: "Base currency (e.g. USD)", required: true },
        { name: "to_currency", type: "string", description: "Target currency (e.g. EUR)", required: true },
        { name: "precision", type: "integer", description: "Digits", required: false },
      ],
    };
  }
  async execute(args: Record<string, unknown>): Promise<ToolResult> {
    if (args.to_currency === "XXX") return ToolResult.fail("Unknown currency XXX; use an ISO 4217 code such as EUR.");
    return ToolResult.ok({ rate: 0.5, pair: `${args.from_currency}/${args.to_currency}` });
  }
}

describe("custom-tool API and trigger (function ids)", () => {
  it("registers a Tool through ToolRegistry and runs it through executeTool", async () => {
    const { registry, runtime } = setup();
    new ToolRegistry(registry).register(new ExchangeRateTool());
    const def = registry.get("get_exchange_rate")?.definition;
    expect(def?.parameters.required).toEqual(["from_currency", "to_currency"]);
    expect(
      await runtime.executeTool("get_exchange_rate", { from_currency: "USD", to_currency: "EUR" }, { userId: "u" }),
    ).toMatchObject({
      ok: true,
      result: { rate: 0.5, pair: "USD/EUR" },
    });
  });

  it("a ToolResult with success false reaches the caller as a retryable classified error", async () => {
    const { registry, runtime } = setup();
    new ToolRegistry(registry).register(new ExchangeRateTool());
    const outcome = await runtime.executeTool(
      "get_exchange_rate",
      { from_currency: "USD", to_currency: "XXX" },
      { userId: "u" },
    );
    expect(outcome).toMatchObject({
      ok: false,
      error: { code: "execution_failed", message: expect.stringMatching(/Unknown currency XXX/) },
    });
  });

  it("ToolResult.asText shows data or the error", () => {
    expect(ToolResult.ok({ a: 1 }).asText()).toBe('{\n  "a": 1\n}');
    expect(ToolResult.ok("plain").asText()).toBe("plain");
    expect(ToolResult.fail("nope").asText()).toBe("Error: nope");
  });

  it("trigger('tool::name') returns the result and throws the classified error", async () => {
    const { registry, runtime, store } = setup();
    new ToolRegistry(registry).register(new ExchangeRateTool());
    registry.register(echoTool({}, { enabledByDefault: false }));
    expect(await trigger("tool::get_exchange_rate", { from_currency: "A", to_currency: "B" }, { runtime })).toEqual({
      rate: 0.5,
      pair: "A/B",
    });
    await expect(
      trigger("tool::get_exchange_rate", { from_currency: "A", to_currency: "XXX" }, { runtime }),
    ).rejects.toBeInstanceOf(ToolExecutionError);
    await expect(trigger("file_read", {}, { runtime })).rejects.toMatchObject({ code: "validation_failed" });
    // Off by default: the host application may still trigger it; explicitly disabled by the user: refused.
    expect(await trigger("tool::echo", { text: "z" }, { runtime })).toMatchObject({ out: "z!" });
    await store.save("local", "echo", { enabled: false, parameters: {} });
    await expect(trigger("tool::echo", { text: "z" }, { runtime })).rejects.toMatchObject({ code: "access_denied" });
  });
});

describe("hostile argument shapes", () => {
  it("rejects absurdly deep nesting as validation_failed, not a stack overflow", async () => {
    const { registry, runtime } = setup();
    registry.register(echoTool());
    const deep = `{"text":"a","extra":${"[".repeat(200_000)}${"]".repeat(200_000)}}`;
    const outcome = await runtime.executeTool("echo", deep, { userId: "u" });
    expect(outcome).toMatchObject({
      ok: false,
      error: { code: "validation_failed", message: expect.stringMatching(/nest deeper/) },
    });
  });

  it("treats a __proto__ key as an ordinary unknown argument", async () => {
    const { registry, runtime } = setup();
    registry.register(echoTool());
    const outcome = await runtime.executeTool("echo", '{"text":"a","__proto__":{"times":3}}', { userId: "u" });
    expect(outcome).toMatchObject({
      ok: false,
      error: { code: "validation_failed", message: expect.stringMatching(/Unknown argument "__proto__"/) },
    });
  });
});
