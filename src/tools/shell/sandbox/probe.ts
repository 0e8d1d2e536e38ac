/**
 * The sandbox's startup probe: runs `bwrap … true` once with the flags every sandboxed command uses (read-only
 * root, fresh /dev and /proc, PID and network namespaces, the seccomp filter) and, when that fails, classifies the
 * failure into a reason an operator can act on.
 *
 * The result is cached per bwrap path for the life of the process (`resetSandboxProbe()` forgets it).
 */

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { readConfig } from "../../../core/config.js";
import { findExecutable } from "../allowlist.js";
import { buildSeccompFilter, seccompSupported } from "./seccomp.js";

/** Why the sandbox cannot run here. */
export type SandboxUnavailableKind =
  | "not_linux"
  | "unsupported_arch"
  | "bwrap_missing"
  | "no_user_namespaces"
  | "apparmor_userns"
  | "no_proc_mount"
  | "disabled"
  | "failed";

/** Outcome of the probe. */
export type SandboxProbe =
  | { available: true; bwrap: string; version: string | null }
  | { available: false; kind: SandboxUnavailableKind; reason: string; bwrap: string | null; detail?: string };

/** The bwrap binary used: `$TOOLHOST_BWRAP` when set (an absolute path; "off" disables the sandbox), else PATH. */
export function locateBwrap(env: NodeJS.ProcessEnv = process.env): string | null | "off" {
  const configured = readConfig(env).bwrap;
  if (configured === "off") return "off";
  if (configured) return configured;
  return findExecutable("bwrap", env.PATH) ?? null;
}

/** The bwrap arguments of the probe (the confinement of a real call, running `true`). */
export function probeArguments(seccompFd: number): string[] {
  return [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--die-with-parent",
    "--new-session",
    "--seccomp",
    String(seccompFd),
    "--",
    "true",
  ];
}

function readSysctl(path: string): string | null {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return null;
  }
}

/** Host facts the classifier looks at (read from /proc/sys by default; tests pass their own). */
export interface HostFacts {
  /** /proc/sys/kernel/apparmor_restrict_unprivileged_userns ("1": Ubuntu 23.10+ restriction on). */
  apparmorRestrictUserns: string | null;
  /** /proc/sys/kernel/unprivileged_userns_clone (Debian's switch; "0": off). */
  unprivilegedUsernsClone: string | null;
  /** /proc/sys/user/max_user_namespaces ("0": none may be created). */
  maxUserNamespaces: string | null;
  /** Whether Toolhost runs as root (then bwrap needs no user namespace). */
  root: boolean;
}

/** Reads HostFacts from this machine. */
export function hostFacts(): HostFacts {
  return {
    apparmorRestrictUserns: readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
    unprivilegedUsernsClone: readSysctl("/proc/sys/kernel/unprivileged_userns_clone"),
    maxUserNamespaces: readSysctl("/proc/sys/user/max_user_namespaces"),
    root: typeof process.getuid === "function" && process.getuid() === 0,
  };
}

/**
 * Classifies a failed probe from bwrap's stderr and the host facts: returns the kind and a reason that says what
 * to do. Pure (table-tested).
 */
export function classifyProbeFailure(
  stderr: string,
  facts: HostFacts,
): { kind: SandboxUnavailableKind; reason: string } {
  const text = stderr.trim();
  const userns =
    /No permissions to creat(e|ing) new namespace|Creating new namespace failed|setting up uid map|unprivileged user namespaces|loopback: Failed RTM_NEWADDR|Operation not permitted.*namespace|clone.*(EPERM|Operation not permitted)/i;
  if (/Can't mount proc|mount proc on/i.test(text)) {
    return {
      kind: "no_proc_mount",
      reason:
        "bwrap cannot mount a fresh /proc here (typical of a container whose /proc is masked, e.g. Docker's default). Run the container with --security-opt systempaths=unconfined (or --privileged), or run Toolhost outside the container.",
    };
  }
  if (userns.test(text) || /Permission denied/i.test(text)) {
    if (facts.apparmorRestrictUserns === "1") {
      return {
        kind: "apparmor_userns",
        reason:
          "Ubuntu's AppArmor restriction on unprivileged user namespaces stops bwrap (kernel.apparmor_restrict_unprivileged_userns=1). Install an AppArmor profile that allows userns for /usr/bin/bwrap (Ubuntu ships one as bwrap-userns-restrict), or set that sysctl to 0.",
      };
    }
    const why =
      facts.maxUserNamespaces === "0"
        ? " (user.max_user_namespaces is 0)"
        : facts.unprivilegedUsernsClone === "0"
          ? " (kernel.unprivileged_userns_clone is 0)"
          : "";
    return {
      kind: "no_user_namespaces",
      reason: `bwrap cannot create the namespaces it needs: user namespaces are not available to this process${why}. In a container, allow them (Docker: a seccomp profile that permits clone/unshare with CLONE_NEWUSER, or --security-opt seccomp=unconfined); on a host, enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and a non-zero user.max_user_namespaces).`,
    };
  }
  if (/seccomp/i.test(text)) {
    return {
      kind: "failed",
      reason: `bwrap could not load the seccomp filter (${text.slice(0, 300)}). The kernel may lack seccomp filter support (CONFIG_SECCOMP_FILTER).`,
    };
  }
  return {
    kind: "failed",
    reason: `bwrap failed to start a sandbox here: ${text.slice(0, 300) || "no message"}.`,
  };
}

/** Runs bwrap with the probe arguments; resolves with its exit code and stderr. Never throws. */
function runProbe(
  bwrap: string,
  filter: Buffer,
  timeoutMs = 10_000,
): Promise<{ code: number | null; stderr: string; spawnError?: NodeJS.ErrnoException }> {
  return new Promise((resolve) => {
    const child = spawn(bwrap, probeArguments(3), { stdio: ["ignore", "ignore", "pipe", "pipe"] });
    let stderr = "";
    let settled = false;
    const done = (value: { code: number | null; stderr: string; spawnError?: NodeJS.ErrnoException }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(value);
    };
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      done({ code: null, stderr: `${stderr}\n(the probe did not finish within ${timeoutMs} ms)` });
    }, timeoutMs);
    child.once("error", (error: NodeJS.ErrnoException) => done({ code: null, stderr, spawnError: error }));
    child.stderr?.on("data", (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString("utf8");
    });
    const fd3 = child.stdio[3] as NodeJS.WritableStream | null;
    if (fd3) {
      (fd3 as unknown as { on(e: string, f: () => void): void }).on("error", () => {});
      fd3.end(filter);
    }
    child.once("close", (code) => done({ code, stderr }));
  });
}

function bwrapVersion(bwrap: string): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn(bwrap, ["--version"], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout?.on("data", (c: Buffer) => {
      out += c.toString("utf8");
    });
    child.once("error", () => resolve(null));
    child.once("close", () => resolve(out.trim().replace(/^bubblewrap\s*/i, "") || null));
  });
}

/** Runs the probe for `bwrap` (no cache). See probeSandbox. */
export async function runSandboxProbe(
  bwrap: string | null | "off",
  facts: HostFacts = hostFacts(),
): Promise<SandboxProbe> {
  if (process.platform !== "linux") {
    return {
      available: false,
      kind: "not_linux",
      bwrap: null,
      reason: `The shell sandbox uses Linux namespaces (bubblewrap); this server runs on ${process.platform}.`,
    };
  }
  if (bwrap === "off") {
    return {
      available: false,
      kind: "disabled",
      bwrap: null,
      reason: "The shell sandbox is disabled on this server (TOOLHOST_BWRAP=off).",
    };
  }
  if (!seccompSupported()) {
    return {
      available: false,
      kind: "unsupported_arch",
      bwrap,
      reason: `The shell sandbox has no seccomp filter for CPU architecture ${process.arch} (x64 and arm64 are supported).`,
    };
  }
  if (!bwrap) {
    return {
      available: false,
      kind: "bwrap_missing",
      bwrap: null,
      reason:
        "bwrap (bubblewrap) is not installed on this server. Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap).",
    };
  }
  const outcome = await runProbe(bwrap, buildSeccompFilter({ network: false }));
  if (outcome.spawnError) {
    return {
      available: false,
      kind: "bwrap_missing",
      bwrap,
      reason: `bwrap could not be started from ${bwrap} (${outcome.spawnError.code ?? outcome.spawnError.message}). Install bubblewrap (apt-get install bubblewrap) or point TOOLHOST_BWRAP at it.`,
    };
  }
  if (outcome.code === 0) return { available: true, bwrap, version: await bwrapVersion(bwrap) };
  const classified = classifyProbeFailure(outcome.stderr, facts);
  return { available: false, ...classified, bwrap, detail: outcome.stderr.trim().slice(0, 1000) };
}

const cache = new Map<string, Promise<SandboxProbe>>();

/**
 * The cached probe for the configured bwrap (see locateBwrap): runs `bwrap … true` once per process and binary.
 * Never rejects.
 */
export function probeSandbox(env: NodeJS.ProcessEnv = process.env): Promise<SandboxProbe> {
  const bwrap = locateBwrap(env);
  const key = bwrap ?? "";
  let probe = cache.get(key);
  if (!probe) {
    probe = runSandboxProbe(bwrap).catch(
      (error): SandboxProbe => ({
        available: false,
        kind: "failed",
        bwrap: bwrap === "off" ? null : bwrap,
        reason: `The sandbox probe failed: ${(error as Error)?.message ?? String(error)}.`,
      }),
    );
    cache.set(key, probe);
  }
  return probe;
}

/** Forgets cached probe results (tests; after installing bubblewrap at runtime). */
export function resetSandboxProbe(): void {
  cache.clear();
}
