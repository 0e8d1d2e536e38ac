/**
 * The published package works for someone who installs it: npm packs this checkout and installs the package into an
 * empty project (one `npm install --install-links` of the checkout's folder: npm packs a `file:` folder with the same
 * file list `npm pack` and `npm publish` use, and installs the result as a copy; offline, through a lockfile derived
 * from ours, so nothing leaves the machine), then the test runs the `toolhost` bin and imports the library. Also
 * checks that only the published files arrived, that the README's relative links resolve inside the installed
 * package and that the LICENSE ships.
 *
 * The project's node_modules starts with hard links to this checkout's copies of the production dependencies only
 * (the lockfile's entries that are neither dev nor devOptional; a dev dependency the package needed at run time
 * would be missing, as for a user), with their bin links: npm installs the package into that tree and checks it
 * against the lockfile, instead of unpacking ~280 packages from its cache again (most of this file's time before;
 * without the bin links npm also re-extracted the 8 dependencies that have bins). The native SQLite binding is
 * copied from this checkout (install scripts are skipped: compiling it again would take minutes and proves nothing
 * about our packaging). A separate `npm pack` plus `npm install <tarball>` cost about a second of CPU more for the
 * same check.
 *
 * The framework adapters are optional peers: the library is imported first in a project without `ai` and
 * `@openai/agents` (it works; the adapter subpaths say what is missing), then those two are copied in from this
 * checkout with everything they depend on (as a user's `npm install ai @openai/agents` would add them) and one scripted
 * turn of each SDK runs Toolhost's tools through the installed package.
 */
import { execFile, execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../helpers/server.js";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const execFileAsync = promisify(execFile);
const npm = (args: string[], cwd: string) =>
  execFileSync("npm", args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, npm_config_update_notifier: "false" },
  });

describe("npm pack, installed into an empty project", () => {
  let project: string;
  let installed: string;

  beforeAll(() => {
    const work = tempDir("toolhost-pack-");
    project = join(work, "app");
    mkdirSync(project);
    const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean; devOptional?: boolean; link?: boolean; bin?: Record<string, string> }>;
    };
    // Only in our development tree (dev, or optional for dev only): not part of a user's install.
    const devOnly = (entry: { dev?: boolean; devOptional?: boolean; link?: boolean }) =>
      entry.dev || entry.devOptional || entry.link;
    const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
    // The checkout's folder; with --install-links npm packs it and installs the package, not a symlink to it.
    const spec = `file:${repo.replace(/\/$/, "")}`;
    const packages: Record<string, unknown> = {
      "": { name: "app", version: "1.0.0", dependencies: { toolhost: spec } },
    };
    for (const [key, entry] of Object.entries(lock.packages)) if (key && !devOnly(entry)) packages[key] = entry;
    packages["node_modules/toolhost"] = {
      version: manifest.version,
      resolved: spec,
      license: manifest.license,
      dependencies: manifest.dependencies,
      bin: manifest.bin,
      engines: manifest.engines,
    };
    writeFileSync(
      join(project, "package.json"),
      JSON.stringify({
        name: "app",
        version: "1.0.0",
        private: true,
        type: "module",
        dependencies: { toolhost: spec },
      }),
    );
    writeFileSync(
      join(project, "package-lock.json"),
      JSON.stringify({ name: "app", version: "1.0.0", lockfileVersion: 3, requires: true, packages }),
    );
    // Seed node_modules with the production dependencies (top-level folders; nested ones come with their parent)
    // and the bin links npm makes for the top-level ones.
    const byFolder = new Map<string, string[]>();
    const bins = join(project, "node_modules/.bin");
    mkdirSync(bins, { recursive: true });
    for (const [key, entry] of Object.entries(lock.packages)) {
      if (!key || devOnly(entry) || key.split("node_modules/").length !== 2) continue;
      if (!existsSync(join(repo, key))) continue; // an optional dependency for another platform
      const folder = join(project, dirname(key));
      byFolder.set(folder, [...(byFolder.get(folder) ?? []), join(repo, key)]);
      for (const [name, target] of Object.entries(entry.bin ?? {}))
        if (!existsSync(join(bins, name)))
          symlinkSync(join("..", key.slice("node_modules/".length), target), join(bins, name));
    }
    for (const [folder, sources] of byFolder) {
      mkdirSync(folder, { recursive: true });
      execFileSync("cp", ["-al", ...sources, `${folder}/`]);
    }
    npm(["install", "--install-links", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], project);
    // Unless npm kept the seeded copy (then the binding is linked already).
    const binding = join(project, "node_modules/better-sqlite3/build");
    if (!existsSync(join(binding, "Release/better_sqlite3.node")))
      cpSync(join(repo, "node_modules/better-sqlite3/build"), binding, { recursive: true });
    installed = join(project, "node_modules/toolhost");
  }, 300_000);

  it("installs a copy holding only the published files; ships the LICENSE; the README's relative links resolve", () => {
    // A copy, not a link to the checkout: what a user installing from the registry gets.
    expect(lstatSync(installed).isSymbolicLink()).toBe(false);
    expect(readdirSync(installed).sort()).toEqual([
      "BENCHMARKS.md",
      "LICENSE",
      "README.md",
      "dist",
      "docs",
      "package.json",
    ]);
    expect(readFileSync(join(installed, "LICENSE"), "utf8")).toMatch(/^MIT License/);
    const readme = readFileSync(join(installed, "README.md"), "utf8");
    const links = [...readme.matchAll(/\]\(((?!https?:)[^)#]+)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(3);
    for (const link of links) expect(existsSync(join(installed, link)), link).toBe(true);
  });

  it("the toolhost bin runs a tool; the library (and its server and mcp subpaths) imports and executes one", async () => {
    // Four processes of their own (a data directory each), run side by side: the test waits on them, not on npm.
    const run = (file: string, args: string[], data: string) =>
      execFileAsync(file, args, {
        cwd: project,
        env: { ...process.env, TOOLHOST_DATA_DIR: join(project, data), TOOLHOST_LOG_LEVEL: "error" },
        encoding: "utf8",
      }).then((out) => out.stdout);
    const bin = join(project, "node_modules/.bin/toolhost");
    const script =
      'import { executeTool, registerTool } from "toolhost"; import { createServerApp } from "toolhost/server"; import { createMcpServer } from "toolhost/mcp"; const o = await executeTool("get_current_datetime", "{\\"timezone\\":\\"UTC\\"}", { userId: "u" }); console.log(JSON.stringify({ ok: o.ok, register: typeof registerTool, server: typeof createServerApp, mcp: typeof createMcpServer }));';
    const [version, call, out, missing] = await Promise.all([
      run(bin, ["--version"], "data-version"),
      run(bin, ["call", "get_current_datetime", '{"timezone":"Asia/Kathmandu"}'], "data-call"),
      run(process.execPath, ["--input-type=module", "-e", script], "data-library"),
      // Without the optional peers, an adapter subpath fails naming the missing package.
      run(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `try { await import("toolhost/ai-sdk"); console.log("loaded"); } catch (e) { console.log(e.code, /package 'ai'/.test(e.message)); }`,
        ],
        "data-missing",
      ),
    ]);
    expect(version.trim()).toBe(JSON.parse(readFileSync(join(repo, "package.json"), "utf8")).version);
    expect(JSON.parse(call).offset).toBe("+05:45");
    expect(JSON.parse(out)).toEqual({ ok: true, register: "function", server: "function", mcp: "function" });
    expect(missing.trim()).toBe("ERR_MODULE_NOT_FOUND true");
  });

  it("next to ai and @openai/agents, one scripted turn of each SDK runs Toolhost's tools through the package", () => {
    // The two packages and everything they depend on, from this checkout (offline), where the project lacks them.
    const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8")) as {
      packages: Record<string, Partial<Record<"dependencies" | "optionalDependencies" | "peerDependencies", object>>>;
    };
    const resolveIn = (from: string, name: string): string | undefined => {
      for (let base = from; ; ) {
        const key = `${base ? `${base}/` : ""}node_modules/${name}`;
        if (lock.packages[key]) return key;
        if (!base) return undefined;
        const cut = base.lastIndexOf("/node_modules/");
        base = cut < 0 ? "" : base.slice(0, cut);
      }
    };
    const closure = new Set<string>();
    const pending = ["node_modules/ai", "node_modules/@openai/agents"];
    for (let key = pending.pop(); key; key = pending.pop()) {
      if (closure.has(key)) continue;
      closure.add(key);
      const entry = lock.packages[key]!;
      for (const dep of Object.keys({
        ...entry.dependencies,
        ...entry.optionalDependencies,
        ...entry.peerDependencies,
      })) {
        const found = resolveIn(key, dep);
        if (found) pending.push(found);
      }
    }
    // One `cp -al` per destination folder (node_modules, node_modules/@scope), as for the seed above: a process per
    // package cost ~90 starts of cp, each a fork of this (large) worker.
    const byFolder = new Map<string, string[]>();
    for (const key of closure) {
      if (key.split("node_modules/").length !== 2 || existsSync(join(project, key))) continue;
      const folder = dirname(join(project, key));
      byFolder.set(folder, [...(byFolder.get(folder) ?? []), join(repo, key)]);
    }
    for (const [folder, sources] of byFolder) {
      mkdirSync(folder, { recursive: true });
      execFileSync("cp", ["-al", ...sources, `${folder}/`]);
    }
    const work = join(project, "work");
    mkdirSync(work, { recursive: true });
    writeFileSync(join(work, "notes.txt"), "hello\n");
    writeFileSync(join(project, "turns.mjs"), TURNS);
    const env = { ...process.env, TOOLHOST_DATA_DIR: join(project, "data-adapters"), TOOLHOST_LOG_LEVEL: "error" };
    const out = execFileSync(process.execPath, ["turns.mjs", work], { cwd: project, env, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual({
      aiSdk: { text: "done", sawListing: true },
      agents: { final: "done", sawListing: true },
    });
  }, 120_000);
});

/** One scripted turn of each SDK over the installed package (run as a script of the empty project). */
const TURNS = `
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Agent, run, setTracingDisabled, Usage } from "@openai/agents";
import { createAppContext } from "toolhost";
import { toolhostTools as aiSdkTools } from "toolhost/ai-sdk";
import { toolhostTools as agentsTools } from "toolhost/openai-agents";

const workingDirectory = process.argv[2];
const ctx = await createAppContext({ adminUsers: [] });
const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const seen = [];
const model = new MockLanguageModelV3({
  doGenerate: async (options) => {
    seen.push(JSON.stringify(options.prompt));
    return seen.length === 1
      ? { content: [{ type: "tool-call", toolCallId: "a1", toolName: "list_directory", input: '{"path":"."}' }], finishReason: { unified: "tool-calls" }, usage, warnings: [] }
      : { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop" }, usage, warnings: [] };
  },
});
const turn = await generateText({
  model,
  tools: await aiSdkTools(ctx, { userId: "u", workingDirectory }),
  prompt: "list",
  stopWhen: stepCountIs(3),
});

setTracingDisabled(true);
const inputs = [];
const agentModel = {
  async getResponse(request) {
    inputs.push(JSON.stringify(request.input));
    const output = inputs.length === 1
      ? [{ type: "function_call", callId: "b1", name: "list_directory", arguments: '{"path":"."}', status: "completed" }]
      : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }];
    return { usage: new Usage(), output, responseId: "r" + inputs.length };
  },
  async *getStreamedResponse() {},
};
const agent = new Agent({ name: "a", instructions: "list", model: agentModel, tools: await agentsTools(ctx, { userId: "u", workingDirectory }) });
const result = await run(agent, "list");
await ctx.close();
console.log(JSON.stringify({
  aiSdk: { text: turn.text, sawListing: seen.at(-1).includes("notes.txt") },
  agents: { final: result.finalOutput, sawListing: inputs.at(-1).includes("notes.txt") },
}));
`;
