/**
 * Helpers to run the built CLI (package.json's bin, the bundled CLI) as a user would: a clean environment (no real provider keys
 * leak in), a private data directory, and captured output.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { BIN } from "../helpers/cli.js";

/** The built CLI entry; `npm run build` creates it. */
export const CLI = BIN;

/** Throws a clear error when the CLI has not been built. */
export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` before the end-to-end tests.`);
}

/** A minimal environment: PATH and HOME from the test process plus `extra`; no provider keys unless given. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/tmp",
    // The suite's throwaway defaults (vitest.config.ts): a child that names no data directory stays out of ~.
    ...(process.env.TOOLHOST_DATA_DIR ? { TOOLHOST_DATA_DIR: process.env.TOOLHOST_DATA_DIR } : {}),
    ...(process.env.XDG_DATA_HOME ? { XDG_DATA_HOME: process.env.XDG_DATA_HOME } : {}),
    TOOLHOST_LOG_LEVEL: "error",
    ...extra,
  };
}

/** A spawned CLI process with its output so far. */
export interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or 128 + signal number style code for a signal). */
  exited: Promise<number>;
  /** Resolves once `predicate(stdout, stderr)` holds (polls on every output chunk); rejects if the process exits first. */
  waitFor(predicate: (stdout: string, stderr: string) => boolean): Promise<void>;
}

/** Starts `node <bin> ...args` with `env` and `cwd`. */
export function startCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string): CliProcess {
  return startProgram(process.execPath, [CLI, ...args], env, cwd);
}

/** Starts any program with captured output. */
export function startProgram(program: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string): CliProcess {
  const child = spawn(program, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const waiters: { predicate: (o: string, e: string) => boolean; resolve: () => void; reject: (e: Error) => void }[] =
    [];
  const check = () => {
    for (const w of [...waiters]) {
      if (w.predicate(out, err)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    check();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
    check();
  });
  const exited = new Promise<number>((resolve) => {
    child.on("close", (code, signal) => {
      for (const w of waiters.splice(0))
        w.reject(new Error(`process exited (${code ?? signal}) first.\nstdout: ${out}\nstderr: ${err}`));
      resolve(code ?? (signal ? 128 : -1));
    });
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor: (predicate) =>
      new Promise<void>((resolve, reject) => {
        if (predicate(out, err)) return resolve();
        waiters.push({ predicate, resolve, reject });
      }),
  };
}

/** Runs the CLI to completion. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string) {
  return runProgram(process.execPath, [CLI, ...args], env, cwd);
}

/** Runs a program to completion. */
export async function runProgram(program: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string) {
  const p = startProgram(program, args, env, cwd);
  const code = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}
