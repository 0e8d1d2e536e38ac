import "../../src/tools/index.js";
import { describe, expect, it } from "vitest";
import { BUILTIN_TOOL_MODULES, loadBuiltinTool } from "../../src/app/builtin-tools.js";
import { listTools, ToolRegistryStore } from "../../src/core/registry.js";

describe("the built-in tool catalog (one tool's module loaded alone)", () => {
  it("names exactly the tools that tools/index.ts registers", () => {
    expect(Object.keys(BUILTIN_TOOL_MODULES).sort()).toEqual(
      listTools()
        .map((t) => t.definition.name)
        .sort(),
    );
  });

  it("loads a built-in's module and reports it registered; refuses other names without loading anything", async () => {
    expect(await loadBuiltinTool("get_current_datetime")).toBe(true);
    expect(await loadBuiltinTool("mcp__files__read")).toBe(false);
    expect(await loadBuiltinTool("constructor")).toBe(false);
    expect(await loadBuiltinTool("__proto__")).toBe(false);
    // Checked against the registry the caller runs: a tool its module did not register there is not reported loaded.
    expect(await loadBuiltinTool("get_current_datetime", new ToolRegistryStore())).toBe(false);
  });
});
