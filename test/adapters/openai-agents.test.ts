/**
 * toolhost/openai-agents with the real OpenAI Agents SDK: `run()` drives an agent whose model is a scripted
 * implementation of the SDK's Model interface (it answers each turn with the tool calls of a script, then text),
 * for @openai/agents 0.14 (the newest on Node 20) and the current release (Node 22 and later; it declares Node >= 22,
 * so on Node 20 its cases are skipped — CI runs the suite on Node 24 as well).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolhostTools as publicToolhostTools } from "../../src/adapters/openai-agents.js";
import {
  type AgentsToolFactory,
  buildAgentsTools,
  OPENAI_AGENTS_SURFACE,
} from "../../src/adapters/openai-agents-tools.js";
import { AdapterSession, type ToolhostToolsOptions } from "../../src/adapters/session.js";
import type { AppContext } from "../../src/app/context.js";
import { registerTool } from "../../src/core/registry.js";
import { LARGEST_MAX_RESULT_BYTES } from "../../src/core/result-cap.js";
import { defineTool } from "../../src/core/settings-declaration.js";
import {
  adapterContext,
  alive,
  allowBash,
  askBeforeWrites,
  auditOf,
  chatCompletionsServer,
  eventually,
  NODE_MAJOR,
  SLEEP_COMMAND,
  sleeperPid,
  workDirectory,
} from "./helpers.js";

let ctx: AppContext;

beforeAll(async () => {
  ctx = await adapterContext();
  // A tool whose result is larger than the largest output cap a user may set.
  registerTool(
    defineTool({
      definition: {
        name: "big_output",
        description: "Answers with two megabytes of text.",
        parameters: { type: "object", properties: {}, additionalProperties: false },
      },
      async execute() {
        return "x".repeat(2 * LARGEST_MAX_RESULT_BYTES);
      },
    }),
  );
});

afterAll(async () => {
  await ctx?.close();
});

type Call = { id: string; tool: string; input: unknown };

/**
 * The SDK's Model interface, scripted: the n-th request is answered with `turns[n]` (function calls), later ones
 * with the text "done". Every request is kept (its input: what the model saw; its tools: what it was offered).
 */
function scriptedModel(agents: any, turns: Call[][]) {
  const requests: any[] = [];
  const respond = (request: any) => {
    requests.push(request);
    const turn = turns[requests.length - 1];
    const output = turn
      ? turn.map((c) => ({
          type: "function_call",
          callId: c.id,
          name: c.tool,
          arguments: JSON.stringify(c.input),
          status: "completed",
        }))
      : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }];
    return { usage: new agents.Usage(), output, responseId: `resp_${requests.length}` };
  };
  const model = {
    async getResponse(request: any) {
      return respond(request);
    },
    async *getStreamedResponse(request: any) {
      const response = respond(request);
      yield {
        type: "response_done",
        response: {
          id: response.responseId,
          usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
          output: response.output,
        },
      };
    },
  };
  return { model, requests };
}

/** The function_call_output items of a model request's input, by call id. */
function outputsIn(request: any): Map<string, string> {
  const out = new Map<string, string>();
  const input = Array.isArray(request.input) ? request.input : [];
  for (const item of input) {
    if (item.type === "function_call_result") {
      const text = typeof item.output === "string" ? item.output : (item.output?.text ?? JSON.stringify(item.output));
      out.set(item.callId, text);
    }
  }
  return out;
}

function suite(
  load: () => Promise<any>,
  build: (agents: any, options: ToolhostToolsOptions) => Promise<any[]>,
  v: string,
) {
  let agents: any;
  beforeAll(async () => {
    agents = await load();
    agents.setTracingDisabled(true);
  });
  const agentWith = (tools: any[], model: any) =>
    new agents.Agent({ name: "assistant", instructions: "Use the tools.", model, tools });

  it("a listing reaches the model; a disabled tool is absent; a path outside is refused; the audit names the user", async () => {
    const user = `list-${v}`;
    const work = workDirectory();
    await ctx.settings.update(user, "glob", { enabled: false });
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model, requests } = scriptedModel(agents, [
      [
        { id: "c1", tool: "list_directory", input: { path: "." } },
        { id: "c2", tool: "read_file", input: { path: "/etc/hostname" } },
      ],
    ]);
    const result = await agents.run(agentWith(tools, model), "What is here?");
    expect(result.finalOutput).toBe("done");
    const offered = requests[0].tools.map((t: any) => t.name);
    expect(offered).toContain("list_directory");
    expect(offered).not.toContain("glob");
    // The sub-agent tools need the calling agent of a chat turn, which a framework's run has not: not offered.
    expect(offered.filter((name: string) => name.startsWith("agent_"))).toEqual([]);
    const outputs = outputsIn(requests[1]);
    expect(outputs.get("c1")).toContain("notes.txt");
    expect(JSON.parse(outputs.get("c2")!).error.code).toBe("access_denied");
    const audit = (await auditOf(ctx, user)).sort((a, b) => a.tool.localeCompare(b.tool));
    expect(audit.map((a) => [a.tool, a.errorCode, a.userId, (a.details as any)?.surface])).toEqual([
      ["list_directory", null, user, OPENAI_AGENTS_SURFACE],
      ["read_file", "access_denied", user, OPENAI_AGENTS_SURFACE],
    ]);
    // Disabled during the run: isEnabled reads the user's settings, so the next turn no longer offers it.
    await ctx.settings.update(user, "list_directory", { enabled: false });
    const later = scriptedModel(agents, []);
    await agents.run(agentWith(tools, later.model), "again");
    expect(later.requests[0].tools.map((t: any) => t.name)).not.toContain("list_directory");
  });

  it("a tool turned off during a run is gone from the next turn, also when the model reports no usage", async () => {
    const user = `turns-${v}`;
    const work = workDirectory();
    const tools = await build(agents, { userId: user, workingDirectory: work });
    // A Chat Completions server on loopback that reports no usage; glob is turned off while the first turn runs.
    const server = await chatCompletionsServer(
      [[{ id: "call_a", tool: "list_directory", input: { path: "." } }]],
      async (n) => {
        if (n === 1) await ctx.settings.update(user, "glob", { enabled: false });
      },
    );
    try {
      const { default: OpenAI } = await import("openai");
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: "test", maxRetries: 0 });
      const model = new agents.OpenAIChatCompletionsModel(client, "fake");
      const result = await agents.run(agentWith(tools, model), "list it");
      expect(result.finalOutput).toBe("done");
      const offered = server.requests.map((r) => (r.tools ?? []).map((t) => t.function.name).includes("glob"));
      expect(offered).toEqual([true, false]);
    } finally {
      await server.close();
    }
  });

  it("an ask interrupts the run; approved, the resumed run (from a serialized state) writes the file exactly once", async () => {
    const user = `approve-${v}`;
    const work = workDirectory();
    await askBeforeWrites(ctx, user);
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model, requests } = scriptedModel(agents, [
      [{ id: "w1", tool: "write_file", input: { path: "out.txt", content: "approved\n" } }],
    ]);
    const agent = agentWith(tools, model);
    const first = await agents.run(agent, "write it");
    expect(first.interruptions.map((i: any) => i.rawItem.callId)).toEqual(["w1"]);
    expect(existsSync(join(work, "out.txt"))).toBe(false);
    const serialized = first.state.toString();
    // Nothing of Toolhost's secrets travels with the run: not the approval key, not the approval's MAC.
    const [pending] = await ctx.approvals.listPending(user);
    expect(serialized).not.toContain(ctx.approvals.key().toString("hex"));
    expect(serialized).not.toContain(pending!.hmac);
    expect(serialized).not.toContain(pending!.id);

    // Another request: tools built again, the state restored from its string.
    const again = agentWith(await build(agents, { userId: user, workingDirectory: work }), model);
    const state = await agents.RunState.fromString(again, serialized);
    for (const item of state.getInterruptions()) state.approve(item);
    const second = await agents.run(again, state);
    expect(second.finalOutput).toBe("done");
    expect(readFileSync(join(work, "out.txt"), "utf8")).toBe("approved\n");
    expect(outputsIn(requests.at(-1)).get("w1")).toContain("out.txt");
    const record = await ctx.approvals.repository.get(pending!.id);
    expect([record?.status, record?.decidedBy]).toEqual(["used", `openai-agents:${user}`]);
    const writes = (await auditOf(ctx, user)).filter((a) => a.tool === "write_file" && a.outcome === "ok");
    expect(writes.map((a) => [a.approval, a.approvedBy, (a.details as any)?.surface])).toEqual([
      ["allow_once", `openai-agents:${user}`, OPENAI_AGENTS_SURFACE],
    ]);
  });

  it("an approved state whose call arguments were changed runs nothing; a policy deny never interrupts or runs", async () => {
    const user = `tamper-${v}`;
    const work = workDirectory();
    await askBeforeWrites(ctx, user);
    await ctx.settings.update(user, "apply_patch", { parameters: { approval: "deny" } });
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model, requests } = scriptedModel(agents, [
      [
        { id: "t1", tool: "write_file", input: { path: "asked.txt", content: "asked\n" } },
        { id: "t2", tool: "apply_patch", input: { patch: "*** Begin Patch\n*** Add File: p.txt\n+x\n*** End Patch" } },
      ],
    ]);
    const first = await agents.run(agentWith(tools, model), "write it");
    expect(first.interruptions.map((i: any) => i.rawItem.callId)).toEqual(["t1"]);
    const tampered = first.state.toString().replaceAll("asked.txt", "other.txt");
    // Twice: the ask the first attempt made for the changed arguments was never shown, so no answer decides it.
    for (const attempt of [1, 2]) {
      const again = agentWith(await build(agents, { userId: user, workingDirectory: work }), model);
      const state = await agents.RunState.fromString(again, tampered);
      for (const item of state.getInterruptions()) state.approve(item);
      await agents.run(again, state);
      expect(existsSync(join(work, "other.txt")), `attempt ${attempt}`).toBe(false);
    }
    expect(existsSync(join(work, "asked.txt"))).toBe(false);
    expect(existsSync(join(work, "p.txt"))).toBe(false);
    const outputs = outputsIn(requests.at(-1));
    expect(JSON.parse(outputs.get("t1")!).error.code).toBe("denied_by_policy");
    expect(JSON.parse(outputs.get("t2")!).error.code).toBe("denied_by_policy");
  });

  it("a provider that reuses call ids: a later call with the same id is asked about on its own", async () => {
    const user = `reuse-${v}`;
    const work = workDirectory();
    await askBeforeWrites(ctx, user);
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model } = scriptedModel(agents, [
      [{ id: "call_0", tool: "list_directory", input: { path: "." } }],
      [{ id: "call_0", tool: "write_file", input: { path: "r.txt", content: "r\n" } }],
    ]);
    const agent = agentWith(tools, model);
    let first: any;
    try {
      first = await agents.run(agent, "write it");
    } catch (error) {
      // The current release refuses a reused call id itself, before the call reaches a tool: nothing is asked about
      // and nothing is written.
      expect(v).toBe("current");
      expect((error as Error).message).toMatch(/call_0 was reused/);
      expect(existsSync(join(work, "r.txt"))).toBe(false);
      expect(await ctx.approvals.listPending(user)).toEqual([]);
      return;
    }
    expect(first.interruptions.map((i: any) => i.name)).toEqual(["write_file"]);
    // Asked in Toolhost too (the SDK itself then pairs results with calls by id, so its resume is its own affair).
    const pending = await ctx.approvals.listPending(user);
    expect(pending.map((p) => [p.toolCallId, p.tool])).toEqual([["call_0", "write_file"]]);
    expect((await auditOf(ctx, user)).map((a) => [a.tool, a.outcome])).toEqual([
      ["list_directory", "ok"],
      ["write_file", "denied"],
    ]);
  });

  it("a result cut at the user's largest output cap still tells the model where its full output is", async () => {
    const user = `cap-${v}`;
    await ctx.settings.update(user, "big_output", {
      parameters: { maxResultBytes: LARGEST_MAX_RESULT_BYTES },
    });
    const tools = await build(agents, { userId: user, workingDirectory: workDirectory() });
    const { model, requests } = scriptedModel(agents, [[{ id: "g1", tool: "big_output", input: {} }]]);
    await agents.run(agentWith(tools, model), "go");
    const output = outputsIn(requests.at(-1)).get("g1")!;
    expect(output).toMatch(/spill:[0-9a-f]+/);
    expect(output).not.toContain("[truncated: the result was");
  });

  it("alwaysApprove runs nothing Toolhost asks about, and the model is told not to call again", async () => {
    const user = `always-${v}`;
    const work = workDirectory();
    await askBeforeWrites(ctx, user);
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model, requests } = scriptedModel(agents, [
      [{ id: "a1", tool: "write_file", input: { path: "one.txt", content: "1\n" } }],
      [{ id: "a2", tool: "write_file", input: { path: "two.txt", content: "2\n" } }],
    ]);
    const agent = agentWith(tools, model);
    const first = await agents.run(agent, "write them");
    for (const item of first.interruptions) first.state.approve(item, { alwaysApprove: true });
    await agents.run(agent, first.state);
    // The call that was asked about ran; the next one, approved by the SDK without asking Toolhost, did not.
    expect(readFileSync(join(work, "one.txt"), "utf8")).toBe("1\n");
    expect(existsSync(join(work, "two.txt"))).toBe(false);
    const refusal = JSON.parse(outputsIn(requests.at(-1)).get("a2")!).error;
    expect(refusal.code).toBe("denied_by_policy");
    expect(refusal.message).toContain("alwaysApprove");
    expect(refusal.message).toContain("do not call the tool again in this run");
  });

  it("a rejection runs nothing; Toolhost records the denial when the run resumes", async () => {
    const user = `reject-${v}`;
    const work = workDirectory();
    await askBeforeWrites(ctx, user);
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model, requests } = scriptedModel(agents, [
      [{ id: "r1", tool: "write_file", input: { path: "no.txt", content: "x" } }],
    ]);
    const agent = agentWith(tools, model);
    const first = await agents.run(agent, "write it");
    for (const item of first.interruptions) first.state.reject(item, { message: "not now" });
    const second = await agents.run(agent, first.state);
    expect(second.finalOutput).toBe("done");
    expect(existsSync(join(work, "no.txt"))).toBe(false);
    expect(outputsIn(requests.at(-1)).get("r1")).toContain("not now");
    const record = await ctx.approvals.repository.findForCall("r1", { userId: user });
    expect([record?.status, record?.decidedBy, record?.message]).toEqual([
      "denied",
      `openai-agents:${user}`,
      "not now",
    ]);
    const writes = (await auditOf(ctx, user)).filter((a) => a.tool === "write_file");
    expect(writes.map((a) => [a.outcome, a.errorCode, a.approval, a.approvedBy, (a.details as any)?.surface])).toEqual([
      ["denied", "denied_by_policy", "pending", "policy", OPENAI_AGENTS_SURFACE],
      ["denied", "denied_by_user", "deny", `openai-agents:${user}`, OPENAI_AGENTS_SURFACE],
    ]);
  });

  it("aborting the run (details.signal) kills the shell's processes", async () => {
    const user = `abort-${v}`;
    const work = workDirectory();
    await allowBash(ctx, user);
    const tools = await build(agents, { userId: user, workingDirectory: work });
    const { model } = scriptedModel(agents, [[{ id: "b1", tool: "bash", input: { command: SLEEP_COMMAND } }]]);
    const controller = new AbortController();
    const running = agents
      .run(agentWith(tools, model), "sleep", { signal: controller.signal })
      .catch((e: unknown) => e);
    const pid = await sleeperPid(work);
    expect(alive(pid)).toBe(true);
    controller.abort();
    await eventually(() => !alive(pid), 2000, "the shell to be gone after the abort");
    await running;
    await eventually(
      async () =>
        (await auditOf(ctx, user)).some(
          // The line is written once the shell stopped, after the call returned: it still names the framework.
          (a) =>
            a.tool === "bash" && a.errorCode === "aborted" && (a.details as any)?.surface === OPENAI_AGENTS_SURFACE,
        ),
      5000,
      "the aborted call's audit line",
    );
  });
}

describe.concurrent("toolhost/openai-agents with @openai/agents 0.14", () => {
  // The public entry (its tool() is the installed @openai/agents).
  suite(
    () => import("@openai/agents"),
    (_agents, options) => publicToolhostTools(ctx, options),
    "014",
  );
});

(NODE_MAJOR < 22 ? describe.skip : describe.concurrent)(
  "toolhost/openai-agents with the current @openai/agents (needs Node >= 22; skipped on older Node)",
  () => {
    // Built with that release's own tool(), as toolhostTools does where @openai/agents is that release.
    suite(
      () => import("openai-agents-current"),
      (agents, options) =>
        buildAgentsTools(AdapterSession.open(ctx, options, OPENAI_AGENTS_SURFACE), agents.tool as AgentsToolFactory),
      "current",
    );
  },
);
