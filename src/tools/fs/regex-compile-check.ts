/**
 * Compiles a regular expression in a throwaway Node process, with a deadline, so that a pattern V8 takes seconds
 * to compile never holds the event loop. Alternations inside repeated groups grow exponentially: a 650-character
 * `(?:a|b|…|a|b…){4}` took 225 ms to compile and a few more alternatives take minutes. A process rather than a
 * worker thread, because V8 does not interrupt a regexp compilation: a terminated worker keeps burning a core
 * until the compiler returns, while a process is killed at once. grep runs this for patterns too long to compile
 * on the event loop safely.
 */
import { spawn } from "node:child_process";

/** What compiling a pattern came to: compiled, the engine's error message, or the deadline passed first. */
export type RegexCompileCheck = { kind: "ok" } | { kind: "error"; message: string } | { kind: "timeout" };

const SOURCE = `
"use strict";
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const { pattern, flags } = JSON.parse(input);
  let outcome;
  try {
    new RegExp(pattern, flags).test("");
    outcome = { kind: "ok" };
  } catch (error) {
    outcome = { kind: "error", message: String(error && error.message) };
  }
  process.stdout.write(JSON.stringify(outcome));
});
`;

/**
 * Compiles `new RegExp(pattern, flags)` (and runs it once on "", which is when V8 compiles) in a new Node process
 * (`process.execPath`, empty environment). Resolves `timeout` when it has not answered within `deadlineMs`
 * milliseconds (the process is killed), and rejects with `signal`'s reason when the call is cancelled first. Never
 * throws for a bad pattern: that is the `error` outcome, with the engine's message; a process that cannot start
 * or dies is an `error` outcome too.
 */
export function compileRegexOffThread(
  pattern: string,
  flags: string,
  deadlineMs: number,
  signal?: AbortSignal,
): Promise<RegexCompileCheck> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<RegexCompileCheck>((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", SOURCE], { stdio: ["pipe", "pipe", "ignore"], env: {} });
    let output = "";
    let settled = false;
    const finish = (settle: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      child.kill("SIGKILL");
      settle();
    };
    const onAbort = () => finish(() => reject(signal?.reason));
    const timer = setTimeout(() => finish(() => resolve({ kind: "timeout" })), deadlineMs);
    signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      output += chunk;
    });
    child.on("error", (error) => finish(() => resolve({ kind: "error", message: `the compiler: ${error.message}` })));
    child.on("close", () =>
      finish(() => {
        try {
          resolve(JSON.parse(output) as RegexCompileCheck);
        } catch {
          resolve({ kind: "error", message: "the compiler stopped without an answer" });
        }
      }),
    );
    child.stdin.on("error", () => {}); // a child killed before reading its input
    child.stdin.end(JSON.stringify({ pattern, flags }));
  });
}
