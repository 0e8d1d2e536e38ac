/**
 * Error identity across two copies of Toolhost: a plugin that bundles its own copy throws errors from its copy's
 * classes, and the host's classes still recognize them (`instanceof`, `isInstance`, the runtime's classification),
 * through the `Symbol.for` brands rather than the prototype chain.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import * as host from "../../src/core/errors.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { tool } from "../../src/core/typed-tool.js";
import { tempDir } from "../helpers/server.js";

let plugin: typeof host;

beforeAll(async () => {
  // The plugin's bundled copy: the built errors module (it imports nothing) copied elsewhere and loaded on its own.
  const dir = tempDir("toolhost-plugin-");
  const built = readFileSync(fileURLToPath(new URL("../../dist/core/errors.js", import.meta.url)), "utf8");
  writeFileSync(join(dir, "errors.js"), built.replace(/\n\/\/# sourceMappingURL=.*$/, "\n"));
  plugin = (await import(pathToFileURL(join(dir, "errors.js")).href)) as typeof host;
});

describe("error brands", () => {
  it("the copies are distinct classes, yet instanceof and isInstance recognize the other copy's errors", () => {
    expect(plugin.ToolArgumentError).not.toBe(host.ToolArgumentError);
    const error = new plugin.AccessDeniedError("outside the root", { rule: "restrictPaths" });
    expect(Object.getPrototypeOf(error)).not.toBe(host.AccessDeniedError.prototype);
    expect(error instanceof host.AccessDeniedError).toBe(true);
    expect(error instanceof host.ToolError).toBe(true);
    expect(error instanceof host.BrandedError).toBe(true);
    expect(error instanceof host.NotFoundError).toBe(false);
    expect(host.ToolError.isInstance(error)).toBe(true);
    expect(host.ToolArgumentError.isInstance(error)).toBe(false);
    expect(new host.NotFoundError("x") instanceof plugin.NotFoundError).toBe(true);
    expect(host.toToolError(error)).toBe(error);
    expect(host.toToolError(new Error("plain")).code).toBe("execution_failed");
    expect(host.ToolError.isInstance({ code: "access_denied", message: "duck" })).toBe(false);
    expect(host.ToolError.isInstance(null)).toBe(false);
  });

  it("the brand is a global symbol per class, not serialized, not enumerable", () => {
    const error = new host.ToolTimeoutError("slow", { budgetMs: 5 });
    expect(host.ToolTimeoutError.brand).toBe(Symbol.for("toolhost.error.ToolTimeoutError"));
    expect(host.errorBrand("ToolError")).toBe(host.ToolError.brand);
    expect(Object.keys(error)).not.toContain(host.ToolTimeoutError.brand);
    expect(JSON.parse(JSON.stringify(error))).toEqual({ code: "timeout", message: "slow", details: { budgetMs: 5 } });
    expect(error.name).toBe("ToolTimeoutError");
  });

  it("a host subclass without a brand of its own keeps ordinary instanceof semantics", () => {
    class QuotaError extends host.ToolExecutionError {}
    expect(new QuotaError("over") instanceof QuotaError).toBe(true);
    expect(new host.ToolExecutionError("other") instanceof QuotaError).toBe(false);
    expect(new QuotaError("over") instanceof host.ToolExecutionError).toBe(true);
  });

  it("a plugin tool throwing its copy's error is classified by the host runtime (not execution_failed)", async () => {
    const registry = new ToolRegistryStore();
    registry.register(
      tool({
        name: "plugin_lookup",
        description: "Looks a key up.",
        inputSchema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
        execute: ({ key }) => {
          throw new plugin.NotFoundError(`No entry "${key}".`, { key });
        },
      }),
    );
    const outcome = await new ToolRuntime({ registry }).executeTool("plugin_lookup", { key: "k1" }, { userId: "u" });
    expect(outcome).toMatchObject({
      ok: false,
      error: { code: "not_found", message: 'No entry "k1".', details: { key: "k1" } },
    });
  });
});
