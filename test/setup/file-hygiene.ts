/**
 * Runs around every test file (vitest `setupFiles`). Workers keep their modules from one file to the next
 * (`isolate: false` in vitest.config.ts), so what one file changes in process-wide state would reach the files
 * after it. This puts back, after each file: the environment variables (in place — the object stays
 * `process.env`), the working directory, and the tools of the shared default registry (a file that registers a
 * tool of its own through `registerTool` leaves no trace).
 */
import { afterAll } from "vitest";
import { raiseWasmTieringBudget } from "../../src/cli/v8-flags.js";
import { defaultRegistry } from "../../src/core/registry.js";
// The built-in tools register themselves on import: load them first, so they are part of what stays.
import { registerBuiltinTools } from "../../src/tools/index.js";

registerBuiltinTools();

// As the toolhost executable does: the shell parser's WebAssembly lexer is not recompiled by V8's optimizing
// compiler after the first line a worker parses (~1 s of CPU per worker, on background threads).
raiseWasmTieringBudget();

const env = { ...process.env };
const cwd = process.cwd();
const tools = new Set(defaultRegistry.list().map((t) => t.definition.name));

afterAll(() => {
  for (const key of Object.keys(process.env)) if (!(key in env)) delete process.env[key];
  for (const [key, value] of Object.entries(env)) if (process.env[key] !== value) process.env[key] = value;
  if (process.cwd() !== cwd) process.chdir(cwd);
  for (const tool of defaultRegistry.list())
    if (!tools.has(tool.definition.name)) defaultRegistry.unregister(tool.definition.name);
});
