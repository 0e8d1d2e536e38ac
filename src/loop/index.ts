/** The tool loop: runToolLoop, its events, and tool-result serialization. */
export * from "./events.js";
export * from "./gate.js";
export * from "./run-tool-loop.js";
export * from "./serialize.js";
