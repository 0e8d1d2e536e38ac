/** Tools that cannot work on this host (e.g. no API key) are not offered to models, and settings say why. */
import { describe, expect, it } from "vitest";
import { ToolSettingsService } from "../../src/app/tool-settings-service.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { RegisteredTool } from "../../src/core/types.js";
import { recordingLogger } from "../helpers/runtime.js";

function keyedTool(name: string): RegisteredTool {
  return {
    definition: { name, description: "needs a key", parameters: { type: "object", properties: {} } },
    settings: {
      title: name,
      description: "needs a key",
      category: "image",
      enabledByDefault: true,
      canDisable: true,
      defaultParameters: {},
      parameterDescriptors: [],
    },
    unavailableReason: (services) => (services.key ? undefined : "No key: set EXAMPLE_API_KEY."),
    execute: async () => "ok",
  };
}

describe("RegisteredTool.unavailableReason", () => {
  it("an enabled tool without its key is left out of the offered tools; with the key it is offered", async () => {
    for (const [services, offered] of [
      [{}, false],
      [{ key: "k" }, true],
    ] as const) {
      const registry = new ToolRegistryStore();
      registry.register(keyedTool("needs_key"));
      const store = new MemoryToolSettingsStore();
      const logger = recordingLogger();
      const runtime = new ToolRuntime({ registry, store, logger, services, dataDir: "/tmp/toolhost-availability" });
      const { definitions } = await runtime.getEnabledToolRuntime("u");
      expect(definitions.some((d) => d.name === "needs_key")).toBe(offered);
      const descriptor = await new ToolSettingsService(registry, store, logger, services).get("u", "needs_key");
      expect(descriptor.enabled).toBe(true);
      expect(descriptor.unavailableReason).toBe(offered ? undefined : "No key: set EXAMPLE_API_KEY.");
    }
  });
});
