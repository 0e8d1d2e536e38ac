/**
 * V8 settings of the toolhost executable (and of the test workers, which parse shell lines the same way).
 */
import v8 from "node:v8";

/**
 * V8's WebAssembly tiering budget (roughly, bytes of WebAssembly a function runs before V8 recompiles it with its
 * optimizing compiler) for this process; V8's default is a few million.
 */
export const WASM_TIERING_BUDGET = 1_000_000_000;

/**
 * Raises this process's WebAssembly tiering budget to {@link WASM_TIERING_BUDGET}, unless a budget was given on the
 * command line or in NODE_OPTIONS (that one wins).
 *
 * Why: the shell parser behind the approval rules is WebAssembly (tree-sitter's bash grammar). With V8's default
 * budget its huge lexer function is recompiled by the optimizing compiler after the first command line it parses:
 * about 0.5–1 s of CPU on background threads, more than a whole `toolhost call bash …` costs otherwise, and never
 * repaid by a process that parses a few lines. With this budget a function is optimized only after a few hundred
 * command lines (a long-running `serve` still gets there). Call it before the first line is parsed.
 */
export function raiseWasmTieringBudget(): void {
  const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].some((arg) =>
    arg.includes("wasm-tiering-budget"),
  );
  if (!given) v8.setFlagsFromString(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`);
}
