/**
 * Runs the built `toolhost` bin as a real process: the file package.json's "bin" names (the bundled CLI), which is
 * what users run. `npm test` builds it first (pretest).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  bin: Record<string, string>;
};

/** Absolute path of the `toolhost` bin. */
export const BIN = fileURLToPath(new URL(`../../${manifest.bin.toolhost}`, import.meta.url));

/** Output of one CLI run. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `toolhost ...args` with the given environment additions; resolves when it exits (killed after 60 s). */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  options: { cwd?: string; input?: string } = {},
): Promise<CliRun> {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` first (npm test does it).`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd,
      env: { ...process.env, TOOLHOST_LOG_LEVEL: "error", ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

/**
 * Runs `toolhost ...args` inside the test's process: the same `main(argv)` the executable runs (src/cli/main.ts),
 * with its output captured and its exit code read from `process.exitCode`. For parsers, help, usage errors and
 * command rules, where a fresh Node process proves nothing more and costs 0.1–0.5 s of CPU. `env` is set for the
 * run and put back afterwards, and so is the working directory when `options.cwd` is given. Not for commands that
 * read stdin, serve, or end the process (`serve`, `mcp`), nor for two runs at once (output and the working
 * directory are process-wide).
 */
export async function runCliInProcess(
  args: string[],
  env: Record<string, string> = {},
  options: { cwd?: string } = {},
): Promise<CliRun> {
  const { main } = await import("../../src/cli/main.js");
  const savedCwd = process.cwd();
  const savedEnv = { ...process.env };
  const savedExitCode = process.exitCode;
  const stdoutListeners = process.stdout.listeners("error");
  const writeOut = process.stdout.write;
  const writeErr = process.stderr.write;
  let stdout = "";
  let stderr = "";
  const capture =
    (append: (text: string) => void) =>
    (chunk: string | Uint8Array, encoding?: unknown, callback?: unknown): boolean => {
      append(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
      const done = typeof encoding === "function" ? encoding : callback;
      if (typeof done === "function") queueMicrotask(() => done());
      return true;
    };
  Object.assign(process.env, { TOOLHOST_LOG_LEVEL: "error", ...env });
  process.exitCode = undefined;
  process.stdout.write = capture((t) => (stdout += t)) as typeof process.stdout.write;
  process.stderr.write = capture((t) => (stderr += t)) as typeof process.stderr.write;
  try {
    if (options.cwd) process.chdir(options.cwd);
    await main(["node", "toolhost", ...args]);
  } finally {
    if (process.cwd() !== savedCwd) process.chdir(savedCwd);
    process.stdout.write = writeOut;
    process.stderr.write = writeErr;
    for (const listener of process.stdout.listeners("error"))
      if (!stdoutListeners.includes(listener)) process.stdout.off("error", listener as () => void);
    for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
    Object.assign(process.env, savedEnv);
  }
  const code = typeof process.exitCode === "number" ? process.exitCode : Number(process.exitCode ?? 0);
  process.exitCode = savedExitCode;
  return { code, stdout, stderr };
}
