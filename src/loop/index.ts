/**
 * `toolhost/loop`: the tool loop (provider stream → tool calls → approval → executeTool → results fed back), its
 * events, and the serialization of tool outcomes into conversation results (and back into errors).
 */
export { errorFromSerialized } from "../core/trigger.js";
export type {
  ApprovalRequestedEvent,
  ApprovalResolvedEvent,
  LoopDoneReason,
  LoopErrorCode,
  LoopEvent,
  ToolResultEvent,
} from "./events.js";
export type { GateStep, GateVerdict, LoopStepSnapshot, ToolCallGate } from "./gate.js";
export { DEFAULT_MAX_ITERATIONS, type RunToolLoopOptions, runToolLoop } from "./run-tool-loop.js";
export { serializeToolOutcome, toConversationToolResult } from "./serialize.js";
