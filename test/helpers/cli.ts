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
