#!/usr/bin/env node
/**
 * The `toolhost` executable: runs the command line of ./main.ts with the process's arguments. Kept apart from
 * main.ts so that importing the program (tests drive `main(argv)` in-process) does not run it.
 */
import nodeModule from "node:module";
import v8 from "node:v8";
import { main } from "./main.js";

/**
 * V8's WebAssembly tiering budget (roughly, bytes of WebAssembly a function runs before V8 recompiles it with its
 * optimizing compiler) for this process; V8's default is a few million.
 */
const WASM_TIERING_BUDGET = 1_000_000_000;

// Node 22.1+ caches the code it compiles for the modules loaded after this call (the application context, the
// command's modules) on disk, so the next process skips compiling them (`NODE_COMPILE_CACHE` picks the directory,
// `NODE_DISABLE_COMPILE_CACHE=1` turns it off). Node 20 has no such API: nothing happens there. Here in the
// executable, not in main(), so tests driving main() in their own process are not affected.
try {
  (nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();
} catch {
  // A cache directory that cannot be created only costs the speed-up.
}

// The shell parser behind the approval rules is WebAssembly (tree-sitter's bash grammar). With V8's default budget
// its huge lexer function is recompiled by the optimizing compiler after the first command line it parses: about
// 0.5–1 s of CPU on background threads, more than a whole `toolhost call bash …` costs otherwise, and never repaid
// by a process that parses a few lines. With this budget a function is optimized only after a few hundred command
// lines (a long-running `serve` still gets there). A budget given on the command line or in NODE_OPTIONS wins.
if (![...process.execArgv, process.env.NODE_OPTIONS ?? ""].some((arg) => arg.includes("wasm-tiering-budget"))) {
  v8.setFlagsFromString(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`);
}

await main();
