/**
 * Process-wide state is explicit: what an application context sets for the whole process (the default runtime
 * behind executeTool/trigger, the template list agent_spawn describes) goes back when it closes.
 */
import { describe, expect, it } from "vitest";
import { createAppContext } from "../../src/app/context.js";
import { listAgentTemplates } from "../../src/core/agents.js";
import { getDefaultRuntime } from "../../src/core/runtime.js";
import { recordingLogger } from "../helpers/runtime.js";
import { tempDir } from "../helpers/temp.js";

describe("an application context's close", () => {
  it("puts back the default runtime and the template catalog it set", async () => {
    const ctx = await createAppContext({ dataDir: tempDir(), logger: recordingLogger(), adminUsers: [] });
    expect(getDefaultRuntime()).toBe(ctx.runtime);
    expect(listAgentTemplates().map((t) => t.id)).toContain("general");
    await ctx.close();
    expect(getDefaultRuntime()).not.toBe(ctx.runtime);
    expect(listAgentTemplates()).toEqual([]);
  });

  it("leaves a newer context's settings alone when an older one closes", async () => {
    const older = await createAppContext({ dataDir: tempDir(), logger: recordingLogger(), adminUsers: [] });
    const newer = await createAppContext({ dataDir: tempDir(), logger: recordingLogger(), adminUsers: [] });
    try {
      await older.close();
      expect(getDefaultRuntime()).toBe(newer.runtime);
      expect(listAgentTemplates().map((t) => t.id)).toContain("general");
    } finally {
      await newer.close();
    }
  });
});
