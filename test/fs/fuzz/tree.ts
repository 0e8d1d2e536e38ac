/**
 * The fuzz tests' world: a small real tree (files, a binary file, a denied directory, symbolic links inside, out,
 * dangling and in a loop, a FIFO), Toolhost's data directory beside it, and a runtime as a host builds it (settings
 * store with deniedPaths saved, path policy on, protected paths = the data directory and the installation), with a
 * silent logger and an audit sink that redacts but keeps nothing, so 100,000 calls (TOOLHOST_FUZZ_RUNS) cost no memory.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "../../../src/tools/index.js";
import { ToolRuntime } from "../../../src/core/runtime.js";
import { MemoryFreshnessLedger, MemoryToolSettingsStore } from "../../../src/core/stores.js";
import type { AuditSink, Logger } from "../../../src/core/types.js";

/** The file tools the fuzz tests cover: every built-in whose arguments are paths or patterns. */
export const FILE_TOOLS = [
  "read_file",
  "write_file",
  "list_directory",
  "glob",
  "grep",
  "apply_patch",
  "file_read",
  "file_write",
  "file_list",
] as const;
export type FileTool = (typeof FILE_TOOLS)[number];

/** Stands for the world's root directory in generated arguments (see {@link inWorld}). */
export const ROOT = "@ROOT@";

/** The root of the world made last (the one the running property calls into). */
let worldRoot = ROOT;

/**
 * `text` with ROOT replaced by the current world's root directory: arbitraries map their ROOT constants through it
 * when a value is generated (after the world exists), so the arguments reach the call as generated.
 */
export function inWorld(text: string): string {
  return text.includes(ROOT) ? text.split(ROOT).join(worldRoot) : text;
}

/** Names that exist in every tree (relative to its working directory `proj`). */
export const TREE_NAMES = [
  "a.txt",
  "sub",
  "sub/b.ts",
  "sub/deep/c.md",
  ".hidden/h.txt",
  "bin.dat",
  "secret/s.txt",
  "link-in",
  "link-dir",
  "link-out",
  "loop-a",
  "loop-b",
  "dangling",
  "dangling-out",
  "fifo",
] as const;

export interface FuzzWorld {
  /** The temporary root holding `proj` (the working directory), `outside` and `data`. */
  root: string;
  /** Paths of this machine no message may name unless the arguments did: the root and the process's directory. */
  serverPaths: readonly string[];
  proj: string;
  dataDir: string;
  runtime: ToolRuntime;
  /** Runs a tool as a host does: user u1, one chat per tool, bound to `proj`, default-off tools allowed. */
  call(tool: FileTool, args: unknown): ReturnType<ToolRuntime["executeTool"]>;
  cleanup(): void;
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** An audit sink that takes every event (the runtime redacts the arguments for it) and keeps none. */
const discardingAudit: AuditSink = {
  async record() {},
  async recordEvent() {},
};

/** Builds a fresh world; trees live in /dev/shm when it exists (cheap fsync for the writing tools). */
export async function createFuzzWorld(): Promise<FuzzWorld> {
  const base = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  const root = realpathSync(mkdtempSync(join(base, "toolhost-fuzz-")));
  worldRoot = root;
  const proj = join(root, "proj");
  const outside = join(root, "outside");
  const dataDir = join(root, "data");
  for (const d of [join(proj, "sub", "deep"), join(proj, ".hidden"), join(proj, "secret"), outside, dataDir]) {
    mkdirSync(d, { recursive: true });
  }
  writeFileSync(join(proj, "a.txt"), "alpha\nbeta\n");
  writeFileSync(join(proj, "sub", "b.ts"), "export const b = 1;\r\n");
  writeFileSync(join(proj, "sub", "deep", "c.md"), "# c\n\nalpha gamma\n");
  writeFileSync(join(proj, ".hidden", "h.txt"), "hidden alpha\n");
  writeFileSync(join(proj, "bin.dat"), Buffer.from([0, 1, 2, 3, 0x61, 0x6c]));
  writeFileSync(join(proj, "secret", "s.txt"), "secret alpha\n");
  writeFileSync(join(outside, "o.txt"), "outside alpha\n");
  writeFileSync(join(dataDir, "toolhost.db"), "data alpha\n");
  symlinkSync("a.txt", join(proj, "link-in"));
  symlinkSync("sub", join(proj, "link-dir"));
  symlinkSync(outside, join(proj, "link-out"));
  symlinkSync("loop-b", join(proj, "loop-a"));
  symlinkSync("loop-a", join(proj, "loop-b"));
  symlinkSync("nowhere", join(proj, "dangling"));
  symlinkSync(join(outside, "new.txt"), join(proj, "dangling-out"));
  try {
    execFileSync("mkfifo", [join(proj, "fifo")]);
  } catch {
    writeFileSync(join(proj, "fifo"), "");
  }
  const store = new MemoryToolSettingsStore();
  const runtime = new ToolRuntime({
    store,
    ledger: new MemoryFreshnessLedger(),
    audit: discardingAudit,
    logger: silent,
    dataDir,
    spill: false,
  });
  for (const tool of FILE_TOOLS) {
    await store.save("u1", tool, { enabled: true, parameters: { deniedPaths: [join(proj, "secret")] } });
  }
  // One call context per tool, made once (a host passes the same chat's context to every call).
  const contexts = new Map(
    FILE_TOOLS.map((tool) => [tool, { userId: "u1", chatId: `fuzz-${tool}`, workingDirectory: proj }] as const),
  );
  return {
    root,
    serverPaths: [root, process.cwd()],
    proj,
    dataDir,
    runtime,
    call: (tool, args) => runtime.executeTool(tool, args, contexts.get(tool)!),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** Positive integer from an environment variable, else `fallback`. */
export function envCount(name: string, fallback: number): number {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}
