/**
 * The shell sandbox as the shell tools use it: their settings (`sandbox`, `network`, `writablePaths`), the plan
 * of one call (sandboxed through bwrap, or not, and why), and the tools' say in approvals.
 *
 * - `sandbox: "required"`: a call runs only inside the sandbox; without a working one it is refused
 *   (access_denied, with the probe's reason and what to do).
 * - `sandbox: "preferred"` (default): inside the sandbox when it works; otherwise the tool's approvalHint answers
 *   `ask`, so the approval gate asks a person per command, and the command runs unconfined only after that
 *   (ToolContext.approval set). A call that passed no gate (library use, `toolhost call`, the tool-execute
 *   route) is refused with the reason: no one could be asked.
 * - `sandbox: "off"`: never sandboxed (admin only).
 */
import { realpathSync } from "node:fs";
import { AccessDeniedError } from "../../../core/errors.js";
import { installationPaths } from "../../../core/package-root.js";
import { expandPath, invalidPathEntries, isPathInside, PATH_POLICY_DESCRIPTORS } from "../../../core/path-policy.js";
import { stringListSetting, stringSetting } from "../../../core/settings-declaration.js";
import type { ApprovalHint, ToolContext, ToolParameterDescriptor } from "../../../core/types.js";
import { probeSandbox, type SandboxProbe } from "./probe.js";
import { bwrapArguments, type SandboxProfile } from "./profile.js";
import { buildSeccompFilter } from "./seccomp.js";

export { classifyProbeFailure, probeSandbox, resetSandboxProbe, type SandboxProbe } from "./probe.js";
export { bwrapArguments, protectedSubpaths, type SandboxProfile } from "./profile.js";
export { buildSeccompFilter } from "./seccomp.js";

/** Values of the `sandbox` setting. */
export const SANDBOX_MODES = ["required", "preferred", "off"] as const;
/** How a shell tool uses the sandbox. */
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** The sandbox settings every shell tool declares. */
export const SANDBOX_DESCRIPTORS: ToolParameterDescriptor[] = [
  {
    name: "sandbox",
    type: "string",
    description:
      'Run commands inside the bubblewrap sandbox (Linux): "required" refuses to run without it, "preferred" uses it when it works and otherwise asks for approval per command, "off" never uses it.',
    allowedValues: SANDBOX_MODES,
    default: "preferred",
    adminOnly: true,
  },
  {
    name: "network",
    type: "string",
    description:
      'Network access of sandboxed commands: "off" (no network, and no socket of their own: not even to a host service\'s Unix socket; connected socket pairs still work) or "on".',
    allowedValues: ["off", "on"],
    default: "off",
    adminOnly: true,
  },
  {
    name: "writablePaths",
    type: "string[]",
    description:
      "Extra directories sandboxed commands may write (absolute or ~-prefixed), besides the working directory and a private /tmp.",
    default: [],
    max: 50,
    adminOnly: true,
    validate: invalidPathEntries,
  },
];

const [SANDBOX_DESCRIPTOR, NETWORK_DESCRIPTOR, WRITABLE_PATHS_DESCRIPTOR] = SANDBOX_DESCRIPTORS as [
  ToolParameterDescriptor,
  ToolParameterDescriptor,
  ToolParameterDescriptor,
];
const DENIED_PATHS_DESCRIPTOR = PATH_POLICY_DESCRIPTORS.find(
  (d) => d.name === "deniedPaths",
) as ToolParameterDescriptor;

/** The `sandbox` setting of a call (corrupt values fall back to "preferred"). */
export function sandboxMode(context: Pick<ToolContext, "settings">): SandboxMode {
  return stringSetting(context.settings.values, SANDBOX_DESCRIPTOR) as SandboxMode;
}

/** Whether sandboxed commands of this call may use the network. */
export function sandboxNetwork(context: Pick<ToolContext, "settings">): boolean {
  return stringSetting(context.settings.values, NETWORK_DESCRIPTOR) === "on";
}

/** How one call runs. */
export type SandboxPlan =
  | {
      sandboxed: true;
      /** The bwrap binary. */
      bwrap: string;
      /** bwrap's arguments up to (excluding) `--` and the command. */
      args: string[];
      /** Bytes to write on the child's fd 3: the seccomp filter. */
      seccomp: Buffer;
      profile: SandboxProfile;
    }
  | { sandboxed: false; reason: string };

function real(path: string): string | null {
  try {
    return realpathSync.native(path);
  } catch {
    return null;
  }
}

/**
 * Decides how a call whose working directory is `cwdReal` runs, from the call's settings and the probe.
 * Throws AccessDeniedError when the sandbox is required but unavailable.
 */
export async function planSandbox(context: ToolContext, cwdReal: string, tool: string): Promise<SandboxPlan> {
  const mode = sandboxMode(context);
  if (mode === "off") return { sandboxed: false, reason: 'the tool\'s "sandbox" setting is "off"' };
  const probe = await probeSandbox();
  if (!probe.available) {
    if (mode === "required") {
      throw new AccessDeniedError(
        `${tool} refused to run the command: its "sandbox" setting is "required" and the sandbox is unavailable. ${probe.reason}`,
        { tool, rule: "sandbox_required", sandbox: probe.kind },
      );
    }
    if (!context.approval) {
      // "preferred" runs unconfined only once a person agreed (the approval gate asks, see sandboxApprovalHint);
      // on a path without a gate no one can be asked, so it refuses and says why.
      throw new AccessDeniedError(
        `${tool} refused to run the command unconfined: the sandbox is unavailable and no one could be asked to approve it here (this call did not pass an approval gate). ${probe.reason} Or an admin may set the tool's "sandbox" setting to "off".`,
        { tool, rule: "sandbox_unavailable", sandbox: probe.kind },
      );
    }
    return { sandboxed: false, reason: probe.reason };
  }
  const network = sandboxNetwork(context);
  const writableRoots = [cwdReal];
  const wd = context.workingDirectory ? real(context.workingDirectory) : null;
  if (wd && isPathInside(cwdReal, wd)) writableRoots.push(wd);
  const base = context.workingDirectory ?? process.cwd();
  for (const entry of stringListSetting(context.settings.values, WRITABLE_PATHS_DESCRIPTOR)) {
    const path = real(expandPath(entry, base));
    if (path) writableRoots.push(path);
  }
  const deniedPaths = stringListSetting(context.settings.values, DENIED_PATHS_DESCRIPTOR)
    .map((entry) => real(expandPath(entry, base)))
    .filter((p): p is string => p !== null);
  const dataDir = real(context.dataDir);
  const protectedPaths = (context.protectedPaths ?? []).map(real).filter((p): p is string => p !== null);
  // Protected paths other than Toolhost's installed code are its data (the database file wherever it lies, with
  // its -wal/-shm siblings): hidden, not merely read-only.
  const code = new Set(installationPaths().map(real));
  const protectedData = protectedPaths.filter((p) => p !== dataDir && !code.has(p));
  const profile: SandboxProfile = {
    cwd: cwdReal,
    writableRoots: writableRoots.filter(
      (root) => !writableRoots.some((other) => other !== root && isPathInside(root, other)),
    ),
    network,
    hiddenPaths: [...(dataDir ? [dataDir] : []), ...protectedData, ...deniedPaths],
    readOnlyPaths: protectedPaths.filter((p) => p !== dataDir),
    seccompFd: 3,
  };
  return {
    sandboxed: true,
    bwrap: probe.bwrap,
    args: bwrapArguments(profile),
    seccomp: buildSeccompFilter({ network }),
    profile,
  };
}

/**
 * The shell tools' approvalHint: `ask` when the sandbox is `preferred` but does not work here (the command would
 * run unconfined), `deny` when it is `required` and does not work; undefined otherwise.
 */
export async function sandboxApprovalHint(
  context: Pick<ToolContext, "settings">,
  tool: string,
): Promise<ApprovalHint | undefined> {
  const mode = sandboxMode(context);
  if (mode === "off") return undefined;
  const probe: SandboxProbe = await probeSandbox();
  if (probe.available) return undefined;
  if (mode === "required") {
    return {
      decision: "deny",
      reason: `${tool} requires the sandbox, which is unavailable here: ${probe.reason}`,
    };
  }
  return {
    decision: "ask",
    reason: `The shell sandbox is unavailable, so this ${tool} command would run unconfined with the server's permissions: ${probe.reason}`,
  };
}

/** What runProcess receives for a command: the command itself, or bwrap wrapping it. */
export interface LaunchSpec {
  file: string;
  args: string[];
  argv0: string;
  env: Record<string, string>;
  fd3Input?: Buffer;
}

/**
 * The launch of `file args` under `plan`: unchanged when not sandboxed; else bwrap with the plan's arguments,
 * `--`, then the command, the seccomp filter on fd 3 and TMPDIR pointed at the private /tmp.
 */
export function launchSpec(
  plan: SandboxPlan,
  command: { file: string; args: readonly string[]; argv0: string; env: Record<string, string> },
): LaunchSpec {
  if (!plan.sandboxed) return { ...command, args: [...command.args] };
  const env: Record<string, string> = { ...command.env, TMPDIR: "/tmp" };
  delete env.TMP;
  delete env.TEMP;
  return {
    file: plan.bwrap,
    args: [...plan.args, "--", command.file, ...command.args],
    argv0: "bwrap",
    env,
    fd3Input: plan.seccomp,
  };
}
