/**
 * `toolhost/openai-agents`: Toolhost's tools as OpenAI Agents SDK function tools. Each call runs through Toolhost:
 * the user's settings (`isEnabled`), the approval policy (its asks stop the run with `interruptions`), path policy,
 * sandbox, time budget, result cap and audit under the user. See docs/adapters.md.
 */
import { type FunctionTool, tool } from "@openai/agents";
import { type AgentsToolFactory, buildAgentsTools, OPENAI_AGENTS_SURFACE } from "./openai-agents-tools.js";
import { type AdapterContext, AdapterSession, type ToolhostToolsOptions } from "./session.js";

export type { AdapterContext, ToolhostToolsOptions } from "./session.js";

/**
 * The user's enabled Toolhost tools as Agents SDK function tools (disabled tools, tools an admin turned off and tools
 * that cannot work on this host are absent). Each has Toolhost's description and JSON Schema (strict where the
 * schema allows, as for the Responses API; otherwise non-strict, with Toolhost validating the arguments),
 * `isEnabled` from the user's current settings, `needsApproval` true exactly when Toolhost's policy asks about the
 * call — the run stops with `interruptions`; `state.approve(item)` then `run(agent, state)` executes the call once
 * (recorded in Toolhost as approved by `openai-agents:<user>`), `state.reject(item)` runs nothing (recorded as
 * denied when the run resumes) — and an `execute` that honours `details.signal` (a shell's processes are killed).
 * A tool failure or refusal reaches the model as the classified error's JSON `{"error":{"code","message"}}`.
 *
 * No secret of Toolhost's is kept in the tools or the run's context: a serialized RunState holds only the calls,
 * their arguments and the SDK's own approval marks, and Toolhost finds its approval again by the call id.
 *
 * `ctx` is what `createAppContext()` returns. Build the tools per request (they are bound to one user and
 * directory). Throws AccessDeniedError / ToolArgumentError when the working directory cannot be bound, TypeError
 * without a user.
 */
export async function toolhostTools(ctx: AdapterContext, options: ToolhostToolsOptions): Promise<FunctionTool[]> {
  const session = AdapterSession.open(ctx, options, OPENAI_AGENTS_SURFACE);
  return buildAgentsTools(session, tool as AgentsToolFactory);
}
