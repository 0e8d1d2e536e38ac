/** Settings that only apply together with another one take effect when set alone, or are refused saying why. */
import { describe, expect, it } from "vitest";
import { ToolSettingsService } from "../../src/app/tool-settings-service.js";
import { defaultRegistry } from "../../src/core/registry.js";
import { memoryRuntime } from "../helpers/runtime.js";

function setup() {
  const { runtime, store, logger } = memoryRuntime();
  return { runtime, settings: new ToolSettingsService(defaultRegistry, store, logger) };
}

describe("allowedCommands of shell_exec", () => {
  it("setting the list alone switches allowlistPreset to custom, so the list is what runs", async () => {
    const { runtime, settings } = setup();
    const updated = await settings.update(
      "admin",
      "shell_exec",
      { enabled: true, parameters: { allowedCommands: ["echo"] } },
      { admin: true },
    );
    expect(updated.parameters).toMatchObject({ allowlistPreset: "custom", allowedCommands: ["echo"] });
    const ctx = { userId: "admin", workingDirectory: "/tmp" };
    const echo = await runtime.executeTool("shell_exec", { argv: ["echo", "hi"] }, ctx);
    expect(echo.ok).toBe(true);
    // "ls" is on the default list but not on this user's own list any more.
    const ls = await runtime.executeTool("shell_exec", { argv: ["ls"] }, ctx);
    expect(ls.ok).toBe(false);
    if (!ls.ok) expect(ls.error.code).toBe("access_denied");
  });

  it("a conflicting preset in the same update is refused with the reason; resetting the list keeps the preset", async () => {
    const { settings } = setup();
    await expect(
      settings.update(
        "admin",
        "shell_exec",
        { parameters: { allowedCommands: ["git"], allowlistPreset: "strict" } },
        { admin: true },
      ),
    ).rejects.toMatchObject({
      code: "invalid_settings",
      message: expect.stringMatching(
        /"allowedCommands" of "shell_exec" is used only when "allowlistPreset" is "custom"/,
      ),
    });
    await settings.update("admin", "shell_exec", { parameters: { allowlistPreset: "strict" } }, { admin: true });
    const reset = await settings.update(
      "admin",
      "shell_exec",
      { parameters: { allowedCommands: null } },
      { admin: true },
    );
    expect(reset.parameters.allowlistPreset).toBe("strict");
  });
});
