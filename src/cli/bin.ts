#!/usr/bin/env node
/**
 * The `toolhost` executable: runs the command line of ./main.ts with the process's arguments. Kept apart from
 * main.ts so that importing the program (tests drive `main(argv)` in-process) does not run it.
 */
import nodeModule from "node:module";
import { asksForVersion, VERSION } from "../version.js";
import { raiseWasmTieringBudget } from "./v8-flags.js";

// `toolhost --version` loads nothing else (main() answers it too, for callers that run it in-process).
if (asksForVersion(process.argv.slice(2))) {
  process.stdout.write(`${VERSION}\n`);
  process.exit(0);
}

// Node 22.1+ caches the code it compiles for the modules loaded after this call (the application context, the
// command's modules) on disk, so the next process skips compiling them (`NODE_COMPILE_CACHE` picks the directory,
// `NODE_DISABLE_COMPILE_CACHE=1` turns it off). Node 20 has no such API: nothing happens there. Here in the
// executable, not in main(), so tests driving main() in their own process are not affected.
try {
  (nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();
} catch {
  // A cache directory that cannot be created only costs the speed-up.
}

// The shell parser's WebAssembly lexer is not recompiled after the first line (see the function).
raiseWasmTieringBudget();

const { main } = await import("./main.js");
await main();
