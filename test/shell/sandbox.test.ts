/**
 * The shell sandbox with the real bwrap: filesystem confinement, network off/on, protected Git files, the PID
 * namespace dying with its parent, the seccomp filter, the audit flag; plus the probe's classification and the
 * required/preferred behaviour when the sandbox is unavailable.
 *
 * The bwrap tests are skipped, with the probe's reason in their name, only where bwrap cannot run.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { MemoryAuditSink, MemoryToolSettingsStore } from "../../src/core/stores.js";
import type { ToolContext } from "../../src/core/types.js";
import {
  bwrapArguments,
  classifyProbeFailure,
  probeSandbox,
  protectedSubpaths,
  resetSandboxProbe,
} from "../../src/tools/shell/sandbox/index.js";
import { buildSeccompFilter } from "../../src/tools/shell/sandbox/seccomp.js";
import { shellExecTool } from "../../src/tools/shell/shell-exec.js";
import { buildShellTool, findInterpreter } from "../../src/tools/shell/shell-tool.js";
import { recordingLogger } from "../helpers/runtime.js";
import { until } from "../helpers/until.js";
import { tempDir } from "./helpers.js";

const BASH = findInterpreter("bash") as string;
const USER = "u1";
const probe = await probeSandbox();
const skipReason = probe.available ? "" : ` (skipped: bwrap cannot run here: ${probe.reason})`;

let root: string;
let cleanup: () => void;
let wd: string;

function setup(parameters: Record<string, unknown> = {}, protectedPaths?: string[]) {
  const registry = new ToolRegistryStore();
  registry.register(buildShellTool("bash", BASH));
  registry.register(shellExecTool);
  const store = new MemoryToolSettingsStore();
  const audit = new MemoryAuditSink();
  const dataDir = join(root, "data");
  mkdirSync(dataDir, { recursive: true });
  const runtime = new ToolRuntime({
    registry,
    store,
    audit,
    logger: recordingLogger(),
    dataDir,
    ...(protectedPaths ? { protectedPaths: [dataDir, ...protectedPaths] } : {}),
  });
  const call = async (command: string, extra: Record<string, unknown> = {}, cwd?: string) => {
    await store.save(USER, "bash", { enabled: true, parameters: { ...parameters, ...extra } });
    const args = cwd ? { command, cwd } : { command };
    const outcome = await runtime.executeTool("bash", args, { userId: USER, chatId: "c1", workingDirectory: wd });
    if (!outcome.ok) throw new Error(JSON.stringify(outcome.error));
    return outcome.result as { stdout: string; stderr: string; exitCode: number; sandboxed: boolean };
  };
  return { runtime, store, audit, call, dataDir };
}

/** Pids of live processes whose command line is exactly `needle` (host view of /proc). */
function processesWith(needle: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").replace(/\0/g, " ").trim();
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (cmdline === needle && state !== "Z") out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

beforeAll(() => {
  ({ dir: root, cleanup } = tempDir("toolhost-sandbox-"));
  wd = join(root, "project");
  mkdirSync(join(wd, ".git", "hooks"), { recursive: true });
  writeFileSync(join(wd, ".git", "hooks", "pre-commit"), "#!/bin/sh\nexit 0\n");
  writeFileSync(join(wd, ".git", "config"), "[core]\n");
  writeFileSync(join(wd, ".env"), "SECRET=1\n");
});
afterAll(() => cleanup());

// The bwrap tests run concurrently: each has its own runtime, its own subdirectory or marker, and none changes what
// another one reads (they mostly wait on processes starting in new namespaces).
describe.concurrent(`bwrap sandbox${skipReason}`, () => {
  // A concurrent test registers its cleanup on its own context: the module's onTestFinished may pick another test.
  it.skipIf(!probe.available)(
    "writing outside the working directory fails; inside works",
    async ({ onTestFinished }) => {
      const { call } = setup();
      // Outside /tmp (which is private inside the sandbox), so the write meets the read-only root.
      const outsideDir = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : homedir(), "toolhost-outside-"));
      onTestFinished(() => rmSync(outsideDir, { recursive: true, force: true }));
      const outside = join(outsideDir, "outside.txt");
      const result = await call(`echo in > inside.txt; echo out > ${outside}; echo tmp > /tmp/t && cat /tmp/t`);
      expect(result.sandboxed).toBe(true);
      expect(readFileSync(join(wd, "inside.txt"), "utf8")).toBe("in\n");
      expect(existsSync(outside)).toBe(false);
      expect(result.stderr).toMatch(/Read-only file system/);
      expect(result.stdout).toBe("tmp\n"); // a private /tmp is writable
      expect(existsSync("/tmp/t") && readFileSync("/tmp/t", "utf8") === "tmp\n").toBe(false);
    },
  );

  it.skipIf(!probe.available)(
    "a denied directory that holds a writable path stays hidden around it",
    async ({ onTestFinished }) => {
      const { call } = setup();
      // Outside /tmp (private inside the sandbox), where the directory would otherwise be visible.
      const denied = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : homedir(), "toolhost-denied-"));
      onTestFinished(() => rmSync(denied, { recursive: true, force: true }));
      mkdirSync(join(denied, "inner"));
      writeFileSync(join(denied, "secret.txt"), "SECRET\n");
      const result = await call(
        `cat ${denied}/secret.txt; ls -A ${denied}; echo ok > ${denied}/inner/f && cat ${denied}/inner/f`,
        { deniedPaths: [denied], writablePaths: [join(denied, "inner")] },
      );
      expect(result.sandboxed).toBe(true);
      expect(result.stdout).not.toContain("SECRET");
      expect(result.stdout).toBe("inner\nok\n");
      expect(readFileSync(join(denied, "inner", "f"), "utf8")).toBe("ok\n");
    },
  );

  it.skipIf(!probe.available)("TCP to a loopback listener fails with network off and works with it on", async () => {
    let connections = 0;
    const server: Server = createServer((socket) => {
      connections++;
      socket.end("hello\n");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const { call } = setup();
      const command = `exec 3<>/dev/tcp/127.0.0.1/${port} && head -n1 <&3`;
      const off = await call(command, { network: "off" });
      expect(off.exitCode).not.toBe(0);
      expect(off.stdout).toBe("");
      expect(connections).toBe(0);
      const on = await call(command, { network: "on" });
      expect(on).toMatchObject({ exitCode: 0, stdout: "hello\n", sandboxed: true });
      expect(connections).toBe(1);
    } finally {
      server.close();
    }
  });

  it.skipIf(!probe.available)(
    "socket() of every family is refused by seccomp even before the namespace; socketpair() still works",
    async () => {
      const { call } = setup();
      const result = await call(
        `python3 -c 'import socket
for fam in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
    try:
        socket.socket(fam, socket.SOCK_STREAM); print(fam.name, "ok")
    except OSError as e:
        print(fam.name, e.errno)
a, b = socket.socketpair(); a.sendall(b"pair"); print(b.recv(4).decode())
try:
    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); print("dgram ok")
except OSError as e:
    print("dgram", e.errno)'`,
      );
      expect(result.stdout).toBe("AF_UNIX 1\nAF_INET 1\nAF_INET6 1\npair\ndgram 1\n");
    },
  );

  it.skipIf(!probe.available)(
    "a host service listening on a Unix socket cannot be reached with network off, and can with it on",
    async () => {
      // Outside /tmp (private inside the sandbox), where a daemon's socket lives (/run/postgresql, docker.sock).
      const socketDir = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : homedir(), "toolhost-socket-"));
      const path = join(socketDir, "daemon.sock");
      let connections = 0;
      const server: Server = createServer((socket) => {
        connections++;
        socket.end("hello\n");
      });
      try {
        await new Promise<void>((resolve) => server.listen(path, resolve));
        const { call } = setup();
        const command = `python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(6).decode(), end="")' ${path}`;
        const off = await call(command, { network: "off" });
        expect(off.exitCode).not.toBe(0);
        expect(off.stdout).toBe("");
        expect(off.stderr).toMatch(/PermissionError|Operation not permitted/);
        expect(connections).toBe(0);
        const on = await call(command, { network: "on" });
        expect(on).toMatchObject({ exitCode: 0, stdout: "hello\n", sandboxed: true });
        expect(connections).toBe(1);
      } finally {
        server.close();
        rmSync(socketDir, { recursive: true, force: true });
      }
    },
  );

  it.skipIf(!probe.available)(".git (hooks, config, HEAD) and .env are readable but not writable", async () => {
    const { call } = setup();
    const result = await call(
      "cat .git/hooks/pre-commit; echo evil > .git/hooks/pre-commit; touch .git/hooks/post-checkout; echo x >> .git/config; echo y >> .env; echo ok > .git/HEAD && echo head-writable",
    );
    expect(result.stdout).toBe("#!/bin/sh\nexit 0\n");
    expect(result.stderr.match(/Read-only file system/g)).toHaveLength(5);
    expect(existsSync(join(wd, ".git", "HEAD"))).toBe(false);
    expect(readFileSync(join(wd, ".git", "hooks", "pre-commit"), "utf8")).toBe("#!/bin/sh\nexit 0\n");
    expect(existsSync(join(wd, ".git", "hooks", "post-checkout"))).toBe(false);
    expect(readFileSync(join(wd, ".git", "config"), "utf8")).toBe("[core]\n");
    expect(readFileSync(join(wd, ".env"), "utf8")).toBe("SECRET=1\n");
  });

  it.skipIf(!probe.available)("a repository without hooks cannot get one planted", async () => {
    const repo = join(wd, "nohooks");
    mkdirSync(join(repo, ".git"), { recursive: true });
    const { call } = setup();
    // The call's cwd is the repository: its whole .git is read-only, so no hooks directory can be created.
    const result = await call(
      "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; ls -A .git/hooks | wc -l",
      {},
      "nohooks",
    );
    expect(result.stderr).toMatch(/Read-only file system/);
    expect(result.stdout.trim()).toBe("0");
    expect(existsSync(join(repo, ".git", "hooks", "pre-commit"))).toBe(false);
  });

  it.skipIf(!probe.available)("a command cannot rename .git away", async () => {
    const repo = join(wd, "rename");
    mkdirSync(join(repo, ".git", "hooks"), { recursive: true });
    const { call } = setup();
    const result = await call("mv .git .git-old && echo renamed", {}, "rename");
    expect(result.stdout).toBe("");
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/Device or resource busy|Read-only file system/);
    expect(existsSync(join(repo, ".git", "hooks"))).toBe(true);
    expect(existsSync(join(repo, ".git-old"))).toBe(false);
  });

  it.skipIf(!probe.available)("a copied or recreated .git cannot take hooks", async () => {
    const repo = join(wd, "recreate");
    mkdirSync(join(repo, ".git", "hooks"), { recursive: true });
    writeFileSync(join(repo, ".git", "config"), "[core]\n");
    const { call } = setup();
    // Every route to a writable .git: rename then copy back, copy over it, remove and recreate it.
    const result = await call(
      [
        "mv .git .git-old && cp -a .git-old .git",
        "cp -a .git .git-copy",
        "rm -rf .git",
        "mkdir -p .git/hooks",
        "cp -a .git-copy/. .git/",
        "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit && echo planted",
        "ls -A .git/hooks | wc -l",
      ].join("; "),
      {},
      "recreate",
    );
    expect(result.stdout).not.toContain("planted");
    expect(result.stdout.trim()).toBe("0");
    expect(existsSync(join(repo, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(readFileSync(join(repo, ".git", "config"), "utf8")).toBe("[core]\n");
  });

  it.skipIf(!probe.available)("a repository without .git/config cannot get one", async () => {
    const repo = join(wd, "noconfig");
    mkdirSync(join(repo, ".git", "hooks"), { recursive: true });
    const { call } = setup();
    const result = await call('echo "[core]" > .git/config && echo created', {}, "noconfig");
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/Read-only file system/);
    expect(existsSync(join(repo, ".git", "config"))).toBe(false);
  });

  it.skipIf(!probe.available)("git still reads the repository: git status works", async () => {
    const repo = join(wd, "real");
    mkdirSync(repo);
    const git = spawnSync("git", ["init", "-q", repo]);
    expect(git.status).toBe(0);
    writeFileSync(join(repo, "a.txt"), "a\n");
    const { call } = setup();
    const result = await call("git status --porcelain", {}, "real");
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe("?? a.txt\n");
  });

  it.skipIf(!probe.available)("a database file kept outside the data directory is hidden too", async () => {
    // Inside the writable working directory, where nothing else would cover it (the private /tmp hides the rest).
    const elsewhere = join(wd, "dbhome");
    mkdirSync(elsewhere, { recursive: true });
    const file = join(elsewhere, "th.db");
    writeFileSync(file, "secret rows");
    const { call } = setup({}, [file, `${file}-wal`]);
    // Covered by /dev/null: it reads as empty, or cannot be opened at all.
    const result = await call(`cat ${file}`);
    expect(result.stdout).not.toContain("secret rows");
  });

  it.skipIf(!probe.available)("Toolhost's data directory is hidden from the command", async () => {
    const { call, dataDir } = setup();
    writeFileSync(join(dataDir, "toolhost.db"), "secret rows");
    const result = await call(`ls -A ${dataDir}; cat ${dataDir}/toolhost.db`);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/No such file/);
  });

  it.skipIf(!probe.available)("the child's /proc/self/status shows the seccomp filter (mode 2)", async () => {
    const { call } = setup();
    const result = await call("grep '^Seccomp:' /proc/self/status; echo $$");
    expect(result.stdout.split("\n")[0]).toMatch(/^Seccomp:\s+2$/);
    // Its own PID namespace: the shell is a low pid (bwrap is 1 there).
    expect(Number(result.stdout.split("\n")[1])).toBeLessThan(10);
  });

  it.skipIf(!probe.available)("setsid children die with the sandbox when only bwrap is killed", async () => {
    const marker = `987.${process.pid}`;
    const args = bwrapArguments({
      cwd: wd,
      writableRoots: [wd],
      network: false,
      hiddenPaths: [],
      readOnlyPaths: [],
      seccompFd: 3,
    });
    const child = spawn(
      probe.available ? probe.bwrap : "bwrap",
      [...args, "--", BASH, "-c", `setsid sleep ${marker} & sleep 1000`],
      {
        stdio: ["ignore", "ignore", "ignore", "pipe"],
      },
    );
    (child.stdio[3] as NodeJS.WritableStream).end(buildSeccompFilter());
    await until(() => processesWith(`sleep ${marker}`).length === 1, "the setsid sleep to start", { timeoutMs: 5000 });
    process.kill(child.pid as number, "SIGKILL"); // not the group, not the tree: only bwrap itself
    await until(() => processesWith(`sleep ${marker}`).length === 0, "the setsid sleep to die with bwrap", {
      timeoutMs: 5000,
    });
  });

  it.skipIf(!probe.available)(
    "a timeout kills every process of a sandboxed call; the audit says sandboxed",
    async () => {
      const marker = `988.${process.pid}`;
      const { runtime, store, audit } = setup();
      await store.save(USER, "shell_exec", {
        enabled: true,
        parameters: { allowlistPreset: "custom", allowedCommands: ["bash"] },
      });
      const outcome = await runtime.executeTool(
        "shell_exec",
        {
          argv: ["bash", "-c", `setsid sleep ${marker} & nohup sleep ${marker} & echo partial; sleep 100`],
          timeout: 1000,
        },
        { userId: USER, chatId: "c1", workingDirectory: wd },
      );
      expect(outcome).toMatchObject({ ok: false, error: { code: "timeout" } });
      await until(() => processesWith(`sleep ${marker}`).length === 0, "every process of the call to die", {
        timeoutMs: 3000,
      });
      expect(audit.entries.at(-1)).toMatchObject({ tool: "shell_exec", termination: "timed_out", sandboxed: true });
    },
  );

  it.skipIf(!probe.available)("environment filtering holds inside the sandbox", async () => {
    process.env.OPENAI_API_KEY = "sk-secret";
    try {
      const { call } = setup();
      const result = await call('echo "[$OPENAI_API_KEY] $TMPDIR"');
      expect(result.stdout).toBe("[] /tmp\n");
    } finally {
      delete process.env.OPENAI_API_KEY;
    }
  });

  it.skipIf(!probe.available)("sandbox off runs unconfined and the audit records it", async () => {
    const { call, audit } = setup();
    const outside = join(root, "outside-off.txt");
    const result = await call(`echo out > ${outside}`, { sandbox: "off" });
    expect(result.sandboxed).toBe(false);
    expect(existsSync(outside)).toBe(true);
    rmSync(outside);
    expect(audit.entries.at(-1)).toMatchObject({ sandboxed: false });
  });
});

describe("when the sandbox is unavailable", () => {
  // These tests point TOOLHOST_BWRAP elsewhere; the probe's cached answer is forgotten after each of them (never
  // while the concurrent bwrap tests above run: a probe answered again mid-call would change what they test).
  afterEach(() => {
    delete process.env.TOOLHOST_BWRAP;
    resetSandboxProbe();
  });

  it("required fails closed with the reason; preferred asks for approval and says why", async () => {
    process.env.TOOLHOST_BWRAP = join(root, "no-such-bwrap");
    resetSandboxProbe();
    const { runtime, store, audit } = setup();
    await store.save(USER, "bash", { enabled: true, parameters: { sandbox: "required" } });
    const refused = await runtime.executeTool("bash", { command: "echo hi" }, { userId: USER, workingDirectory: wd });
    expect(refused).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "sandbox_required", sandbox: "bwrap_missing" } },
    });
    expect((refused as { error: { message: string } }).error.message).toMatch(/install bubblewrap/i);
    expect(audit.entries.at(-1)).toMatchObject({ termination: "refused" });

    // preferred: a call that passed no approval gate is refused (no one could be asked) …
    await store.save(USER, "bash", { enabled: true, parameters: { sandbox: "preferred" } });
    const ungated = await runtime.executeTool("bash", { command: "echo hi" }, { userId: USER, workingDirectory: wd });
    expect(ungated).toMatchObject({
      ok: false,
      error: { code: "access_denied", details: { rule: "sandbox_unavailable", sandbox: "bwrap_missing" } },
    });
    expect((ungated as { error: { message: string } }).error.message).toMatch(/no one could be asked/);
    // … one a person approved through the gate runs, unconfined, and says so (result and audit).
    const approved = await runtime.executeTool(
      "bash",
      { command: "echo hi" },
      { userId: USER, workingDirectory: wd, approval: { decision: "allow_once", decidedBy: USER } },
    );
    expect(approved).toMatchObject({ ok: true, result: { stdout: "hi\n", sandboxed: false } });
    expect(audit.entries.at(-1)).toMatchObject({ sandboxed: false, termination: "exited" });

    const tool = runtime.registry.get("bash")!;
    const context = { settings: { enabled: true, values: { sandbox: "preferred" } } } as unknown as ToolContext;
    const hint = await tool.approvalHint?.({ command: "echo hi" }, context);
    expect(hint).toMatchObject({ decision: "ask" });
    expect(hint?.reason).toMatch(/unconfined.*bubblewrap/is);
    const required = { settings: { enabled: true, values: { sandbox: "required" } } } as unknown as ToolContext;
    expect(await tool.approvalHint?.({ command: "echo hi" }, required)).toMatchObject({ decision: "deny" });
    const off = { settings: { enabled: true, values: { sandbox: "off" } } } as unknown as ToolContext;
    expect(await tool.approvalHint?.({ command: "echo hi" }, off)).toBeUndefined();
  });

  it("TOOLHOST_BWRAP=off disables it; with a working sandbox the tool has nothing to add", async () => {
    process.env.TOOLHOST_BWRAP = "off";
    resetSandboxProbe();
    expect(await probeSandbox()).toMatchObject({ available: false, kind: "disabled" });
    delete process.env.TOOLHOST_BWRAP;
    resetSandboxProbe();
    if (probe.available) {
      const tool = buildShellTool("bash", BASH);
      const context = { settings: { enabled: true, values: {} } } as unknown as ToolContext;
      expect(await tool.approvalHint?.({ command: "x" }, context)).toBeUndefined();
    }
  });
});

describe("probe classification", () => {
  const facts = { apparmorRestrictUserns: null, unprivilegedUsernsClone: null, maxUserNamespaces: null, root: false };
  it.each([
    [
      "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.",
      facts,
      "no_user_namespaces",
      /user namespaces/,
    ],
    [
      "bwrap: Creating new namespace failed: No space left on device",
      { ...facts, maxUserNamespaces: "0" },
      "no_user_namespaces",
      /max_user_namespaces is 0/,
    ],
    [
      "bwrap: setting up uid map: Permission denied",
      { ...facts, apparmorRestrictUserns: "1" },
      "apparmor_userns",
      /AppArmor/,
    ],
    [
      "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
      { ...facts, apparmorRestrictUserns: "1" },
      "apparmor_userns",
      /apparmor_restrict_unprivileged_userns/,
    ],
    [
      "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
      facts,
      "no_proc_mount",
      /systempaths=unconfined/,
    ],
    ["bwrap: something odd", facts, "failed", /something odd/],
  ])("%s", (stderr, hostFacts, kind, reason) => {
    const classified = classifyProbeFailure(stderr, hostFacts);
    expect(classified.kind).toBe(kind);
    expect(classified.reason).toMatch(reason);
  });
});

describe("profile", () => {
  it("protects a linked worktree's .git pointer, the repository it points to, and .env files", () => {
    const { dir, cleanup: done } = tempDir("toolhost-profile-");
    try {
      const main = join(dir, "main");
      const worktree = join(dir, "wt");
      mkdirSync(join(main, ".git", "worktrees", "wt"), { recursive: true });
      mkdirSync(join(main, ".git", "hooks"), { recursive: true });
      writeFileSync(join(main, ".git", "config"), "");
      writeFileSync(join(main, ".git", "worktrees", "wt", "commondir"), "../..\n");
      mkdirSync(worktree);
      writeFileSync(join(worktree, ".git"), `gitdir: ${join(main, ".git", "worktrees", "wt")}\n`);
      writeFileSync(join(worktree, ".env.local"), "");
      const paths = protectedSubpaths(worktree).map((p) => p.path);
      expect(paths).toEqual(
        expect.arrayContaining([
          join(worktree, ".git"),
          join(main, ".git", "worktrees", "wt"),
          join(main, ".git"),
          join(worktree, ".env.local"),
        ]),
      );
      const args = bwrapArguments({
        cwd: worktree,
        writableRoots: [dir],
        network: true,
        hiddenPaths: [],
        readOnlyPaths: [],
        seccompFd: 3,
      });
      expect(args.join(" ")).toContain(`--ro-bind ${join(main, ".git")} ${join(main, ".git")}`);
      expect(args.join(" ")).toContain(`--ro-bind ${join(worktree, ".git")} ${join(worktree, ".git")}`);
      expect(args).not.toContain("--unshare-net");
      expect(args).toEqual(expect.arrayContaining(["--unshare-pid", "--die-with-parent", "--seccomp", "3"]));
    } finally {
      done();
    }
  });
});
