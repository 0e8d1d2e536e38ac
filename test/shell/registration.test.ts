/** Which shell tools are registered: only those whose interpreter exists; powershell only on Windows. */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { filterEnvironment, sanitizePathVariable } from "../../src/tools/shell/env.js";
import { findInterpreter, registerShellTools } from "../../src/tools/shell/shell-tool.js";
import { tempDir } from "./helpers.js";

let root: string;
let cleanup: () => void;

function fakeBin(dir: string, name: string, mode = 0o755): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  writeFileSync(file, "#!/bin/sh\nexit 0\n");
  chmodSync(file, mode);
  return file;
}

beforeAll(() => {
  ({ dir: root, cleanup } = tempDir());
});
afterAll(() => cleanup());

describe("registerShellTools", () => {
  it("registers nothing when no interpreter is on PATH", () => {
    const registry = new ToolRegistryStore();
    mkdirSync(join(root, "empty"));
    expect(registerShellTools({ registry, pathValue: join(root, "empty"), platform: "linux" })).toEqual([]);
    expect(registerShellTools({ registry, pathValue: undefined, platform: "linux" })).toEqual([]);
    expect(registry.list()).toEqual([]);
  });

  it("registers zsh when a zsh executable is on PATH, and ignores non-executable files and relative entries", () => {
    const bin = join(root, "bin1");
    const zsh = fakeBin(bin, "zsh");
    fakeBin(bin, "bash", 0o644);
    const registry = new ToolRegistryStore();
    expect(registerShellTools({ registry, pathValue: `relative/dir:${bin}`, platform: "linux" })).toEqual(["zsh"]);
    expect(registry.get("zsh")?.settings.enabledByDefault).toBe(false);
    expect(findInterpreter("zsh", bin, "linux")).toBe(zsh);
    expect(findInterpreter("bash", bin, "linux")).toBeNull();
  });

  it("never registers powershell off Windows, even when pwsh is on PATH", () => {
    const bin = join(root, "bin2");
    fakeBin(bin, "pwsh");
    fakeBin(bin, "powershell");
    const registry = new ToolRegistryStore();
    expect(registerShellTools({ registry, pathValue: bin, platform: "linux" })).toEqual([]);
    expect(registerShellTools({ registry, pathValue: bin, platform: "darwin" })).toEqual([]);
  });

  it("on Windows prefers pwsh, then powershell", () => {
    const both = join(root, "win-both");
    const pwsh = fakeBin(both, "pwsh.EXE");
    fakeBin(both, "powershell.EXE");
    expect(findInterpreter("powershell", both, "win32")).toBe(pwsh);
    const only = join(root, "win-only");
    const legacy = fakeBin(only, "powershell.EXE");
    expect(findInterpreter("powershell", only, "win32")).toBe(legacy);
    const registry = new ToolRegistryStore();
    expect(registerShellTools({ registry, pathValue: only, platform: "win32" })).toEqual(["powershell"]);
  });

  it("registerBuiltinTools registers bash (present here), shell_exec, and no powershell on Linux; twice is once", async () => {
    const { registerBuiltinTools } = await import("../../src/tools/index.js");
    const registry = new ToolRegistryStore();
    registerBuiltinTools(registry);
    const count = registry.list().length;
    registerBuiltinTools(registry);
    expect(registry.list()).toHaveLength(count);
    expect(registry.get("bash")).toBeDefined();
    expect(registry.get("shell_exec")).toBeDefined();
    expect(registry.get("zsh") !== undefined).toBe(findInterpreter("zsh") !== null);
    if (process.platform !== "win32") expect(registry.get("powershell")).toBeUndefined();
  });

  it("importing a tool's module registers nothing; a name held by another tool stops registerBuiltinTools whole", async () => {
    // A fresh module graph: its process-wide registry stays empty when a built-in's module (and its imports) load.
    vi.resetModules();
    const fresh = await import("../../src/core/registry.js");
    await import("../../src/tools/builtin/grep.js");
    await import("../../src/tools/builtin/read-file.js");
    expect(fresh.defaultRegistry.list()).toEqual([]);
    vi.resetModules();
    const registry = new ToolRegistryStore();
    registry.register({
      definition: { name: "grep", description: "not the built-in", parameters: { type: "object", properties: {} } },
      execute: async () => "mine",
    });
    const { registerBuiltinTools } = await import("../../src/tools/index.js");
    expect(() => registerBuiltinTools(registry)).toThrow(/grep already registered by another tool/);
    expect(registry.list().map((t) => t.definition.name)).toEqual(["grep"]);
  });
});

describe("environment filter", () => {
  it("keeps only allowlisted names, drops relative PATH entries, and adds the fixed variables", () => {
    const env = filterEnvironment(
      {
        PATH: `.::bin:/usr/bin:/bin`,
        HOME: "/home/u",
        OPENAI_API_KEY: "sk",
        GH_TOKEN: "t",
        LC_API_KEY: "x",
        LANG: "C",
      },
      "linux",
    );
    expect(env).toEqual({
      PATH: "/usr/bin:/bin",
      HOME: "/home/u",
      LANG: "C",
      PAGER: "cat",
      GIT_PAGER: "cat",
      GIT_TERMINAL_PROMPT: "0",
    });
    expect(sanitizePathVariable(undefined)).toBe("");
  });
});
