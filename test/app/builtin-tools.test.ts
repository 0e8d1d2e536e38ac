import { describe, expect, it } from "vitest";
import {
  BUILTIN_TOOL_MODULES,
  loadBuiltinTool,
  loadSpillReaderTools,
  SPILL_READER_TOOLS,
} from "../../src/app/builtin-tools.js";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { BUILTIN_TOOLS, registerBuiltinTools } from "../../src/tools/index.js";

describe("the built-in tool catalog (one tool loaded alone)", () => {
  it("names exactly the tools that registerBuiltinTools registers (the shells for every interpreter)", () => {
    const registry = new ToolRegistryStore();
    registerBuiltinTools(registry);
    const shells = ["bash", "zsh", "powershell"];
    expect(Object.keys(BUILTIN_TOOL_MODULES).sort()).toEqual(
      [...BUILTIN_TOOLS.map((t) => t.definition.name), ...shells].sort(),
    );
    // Every tool registerBuiltinTools put there (the shells found on this machine included) has its loader, and
    // declares its own approval profile (core/ keeps no table of the built-ins).
    for (const tool of registry.list()) {
      expect(Object.keys(BUILTIN_TOOL_MODULES)).toContain(tool.definition.name);
      expect(tool.approval?.default, tool.definition.name).toMatch(/^(allow|ask)$/);
    }
  });

  it("registers the one tool in the registry given, and nothing else; refuses other names without loading", async () => {
    const registry = new ToolRegistryStore();
    expect(await loadBuiltinTool("get_current_datetime", registry)).toBe(true);
    expect(registry.list().map((t) => t.definition.name)).toEqual(["get_current_datetime"]);
    expect(await loadBuiltinTool("get_current_datetime", registry)).toBe(true);
    expect(registry.list()).toHaveLength(1);
    expect(await loadBuiltinTool("file_read", registry)).toBe(true);
    expect(registry.list().map((t) => t.definition.name)).toEqual(["file_read", "get_current_datetime"]);
    for (const name of ["mcp__files__read", "constructor", "__proto__"]) {
      expect(await loadBuiltinTool(name, registry)).toBe(false);
    }
    expect(registry.list()).toHaveLength(2);
    // A one-tool process may later open a full context: the built-ins then join the one it loaded.
    registerBuiltinTools(registry);
    expect(registry.list().length).toBeGreaterThan(BUILTIN_TOOLS.length);
  });

  it("lists the built-ins that read spills, and loads exactly those", async () => {
    expect([...SPILL_READER_TOOLS].sort()).toEqual(
      BUILTIN_TOOLS.filter((t) => t.spillReader)
        .map((t) => t.definition.name)
        .sort(),
    );
    const registry = new ToolRegistryStore();
    await loadSpillReaderTools(registry);
    expect(
      registry
        .list()
        .map((t) => t.definition.name)
        .sort(),
    ).toEqual([...SPILL_READER_TOOLS].sort());
  });
});
