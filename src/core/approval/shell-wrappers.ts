/**
 * What the shell parser knows about programs that run other programs: the option grammar of the wrappers it
 * unwraps (`timeout`, `nice`, `env`, `sudo`, …), the shells whose `-c STRING` it parses, and the runners it cannot
 * see into.
 */

import { basename } from "node:path";
import type { ShellWord } from "./shell-parse.js";

/** Option grammar of a wrapper: options that take a value, options that take none, and how many operands precede the command. */
export interface WrapperSpec {
  withValue: string[];
  flags: string[];
  /** Positional operands before the wrapped command (timeout's duration, taskset's mask). */
  operands?: number;
  /** Options whose presence means the wrapper runs no command (`command -v`). */
  query?: string[];
  /** NAME=VALUE operands are assignments (env). */
  assignments?: boolean;
  /** Options whose value is optional and, when given, attached (`--replace=R`, `-iR`): one word either way. */
  optional?: string[];
}

export const WRAPPERS: Record<string, WrapperSpec> = {
  timeout: {
    withValue: ["-s", "--signal", "-k", "--kill-after"],
    flags: ["--preserve-status", "--foreground", "-v", "--verbose", "-f"],
    operands: 1,
  },
  nice: { withValue: ["-n", "--adjustment"], flags: [] },
  nohup: { withValue: [], flags: [] },
  env: {
    withValue: ["-u", "--unset", "-C", "--chdir"],
    flags: ["-i", "--ignore-environment", "-", "-0", "--null", "-v", "--debug"],
    assignments: true,
  },
  xargs: {
    withValue: [
      "-I",
      "-n",
      "--max-args",
      "-P",
      "--max-procs",
      "-L",
      "--max-lines",
      "-s",
      "--max-chars",
      "-d",
      "--delimiter",
      "-E",
      "-a",
      "--arg-file",
    ],
    optional: ["--replace", "--eof", "--max-lines", "-i", "-e", "-l"],
    flags: [
      "-0",
      "--null",
      "-r",
      "--no-run-if-empty",
      "-t",
      "--verbose",
      "-x",
      "--exit",
      "-p",
      "--interactive",
      "-o",
      "--open-tty",
    ],
  },
  sudo: {
    withValue: [
      "-u",
      "--user",
      "-g",
      "--group",
      "-C",
      "--close-from",
      "-D",
      "--chdir",
      "--host",
      "-p",
      "--prompt",
      "-r",
      "--role",
      "-t",
      "--type",
      "-U",
      "--other-user",
      "-T",
      "--command-timeout",
    ],
    flags: [
      "-E",
      "--preserve-env",
      "-H",
      "--set-home",
      "-n",
      "--non-interactive",
      "-P",
      "--preserve-groups",
      "-S",
      "--stdin",
      "-k",
      "-b",
      "--background",
    ],
  },
  doas: { withValue: ["-u", "-C"], flags: ["-n", "-s"] },
  command: { withValue: [], flags: ["-p"], query: ["-v", "-V"] },
  builtin: { withValue: [], flags: [] },
  exec: { withValue: ["-a"], flags: ["-c", "-l"] },
  time: {
    withValue: ["-f", "--format", "-o", "--output"],
    flags: ["-p", "-v", "--verbose", "-a", "--append", "--portability"],
  },
  stdbuf: { withValue: ["-i", "--input", "-o", "--output", "-e", "--error"], flags: [] },
  ionice: {
    withValue: ["-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"],
    flags: ["-t", "--ignore"],
  },
  setsid: { withValue: [], flags: ["-c", "--ctty", "-f", "--fork", "-w", "--wait"] },
  // -c only says the operand is a CPU list; -p acts on a running process (no command).
  taskset: { withValue: [], flags: ["-c", "--cpu-list", "-a", "--all-tasks"], operands: 1, query: ["-p", "--pid"] },
  coproc: { withValue: [], flags: [] },
  chrt: { withValue: [], flags: ["-b", "-d", "-f", "-i", "-o", "-r", "-R", "-a", "-m", "-v"], operands: 1 },
  caffeinate: { withValue: ["-t", "-w"], flags: ["-d", "-i", "-m", "-s", "-u"] },
  // zsh's precommand modifiers (bash would look for programs of these names): `noglob rm x` runs rm.
  noglob: { withValue: [], flags: [] },
  nocorrect: { withValue: [], flags: [] },
  "-": { withValue: [], flags: [] },
  // zsh: repeat N COMMAND runs COMMAND N times.
  repeat: { withValue: [], flags: [], operands: 1 },
};

/** Shells whose `-c STRING` is parsed as a command line of its own. */
export const SHELLS = new Set([
  "sh",
  "bash",
  "rbash",
  "zsh",
  "dash",
  "ksh",
  "ksh93",
  "ash",
  "mksh",
  "yash",
  "posh",
  "busybox-sh",
]);

/**
 * Programs that run other programs the parser cannot see into: a call of one is never allowed by the tool's
 * default alone (a rule naming it explicitly still can allow it).
 */
export const RUNNERS = new Set([
  "ssh",
  "docker",
  "podman",
  "kubectl",
  "su",
  "chroot",
  "parallel",
  "strace",
  "ltrace",
  "gdb",
  "valgrind",
  "script",
  "flock",
  "fakeroot",
  "firejail",
  "busybox",
  "unshare",
  "nsenter",
  "systemd-run",
  "tmux",
  "screen",
  "watch",
  "python",
  "python3",
  "python2",
  "node",
  "deno",
  "bun",
  "perl",
  "ruby",
  "php",
  "lua",
  "awk",
  "gawk",
  "mawk",
  "source",
  ".",
  "osascript",
  "pwsh",
  "powershell",
  "make",
  "npx",
  "git-shell",
  "expect",
  "at",
  "batch",
  "crontab",
  // zsh builtins that run a command line given to them (emulate … -c, zpty, sched)
  "emulate",
  "zpty",
  "sched",
  // editors and tools with a shell escape or a command language of their own
  "vim",
  "vi",
  "nvim",
  "ex",
  "view",
  "vimdiff",
  "emacs",
  "ed",
  "red",
  "sqlite3",
  "tclsh",
  "wish",
  "csh",
  "tcsh",
  "fish",
  "nawk",
  "busybox-ash",
  "less",
  "more",
  "man",
  "pager",
  // programs that run a command given to them (the approval policy does not read their option grammars)
  "prlimit",
  "setarch",
  "linux32",
  "linux64",
  "i386",
  "x86_64",
  "setpriv",
  "runuser",
  "sg",
  "newgrp",
  "ssh-agent",
  "dbus-run-session",
  "perf",
  "start-stop-daemon",
  "run-parts",
  "bwrap",
  "scp",
  "sftp",
  "cmake",
  "ninja",
  "npm",
  "yarn",
  "pnpm",
  "apt",
  "apt-get",
  "dpkg",
  "pip",
  "pip3",
  "cargo",
  "go",
  "mvn",
  "gradle",
  ...SHELLS,
]);

/** Splits a wrapper's own words (its options and operands) from the command it runs. */
export function splitWrapper(
  argv: ShellWord[],
  spec: WrapperSpec,
): { inner: ShellWord[]; unknown?: string; query?: boolean; assignments?: boolean } {
  let i = 1;
  let operands = spec.operands ?? 0;
  let assignments = false;
  while (i < argv.length) {
    const w = argv[i];
    if (w === undefined) break;
    if (w === null) return { inner: [], unknown: "a computed argument" };
    if (w === "--") {
      // The options end; the operands before the command (timeout's duration) still come first.
      i += 1 + operands;
      break;
    }
    if (spec.query?.includes(w)) return { inner: [], query: true };
    if (w.startsWith("-") && w !== "-") {
      const eq = w.indexOf("=");
      const flag = eq > 0 ? w.slice(0, eq) : w;
      if (spec.flags.includes(flag) && eq < 0) {
        i += 1;
        continue;
      }
      // Options whose value is optional and only ever attached (xargs --replace[=R], -i[R]).
      if (spec.optional?.some((o) => flag === o || (!o.startsWith("--") && w.startsWith(o)))) {
        i += 1;
        continue;
      }
      if (spec.withValue.includes(flag)) {
        i += eq > 0 ? 1 : 2;
        continue;
      }
      // Attached short values (-n5, -s9) and numeric nice levels (-10).
      const short = w.slice(0, 2);
      if (!w.startsWith("--") && w.length > 2 && spec.withValue.includes(short)) {
        i += 1;
        continue;
      }
      if (/^-\d+$/.test(w) && typeof argv[0] === "string" && basename(argv[0]) === "nice") {
        i += 1;
        continue;
      }
      return { inner: [], unknown: w };
    }
    if (w === "-" && spec.flags.includes("-")) {
      i += 1;
      continue;
    }
    if (spec.assignments && /^[A-Za-z_][A-Za-z0-9_]*=/.test(w)) {
      assignments = true;
      i += 1;
      continue;
    }
    if (operands > 0) {
      operands -= 1;
      i += 1;
      continue;
    }
    break;
  }
  return { inner: argv.slice(i), assignments };
}

/** The index of a shell's script word: the first after `from` that is not an option (`--` ends them). */
export function scriptIndex(argv: ShellWord[], from: number): number | undefined {
  for (let i = from; i < argv.length; i += 1) {
    const w = argv[i];
    if (w === null || w === undefined) return undefined;
    if (w === "--") return i + 1 < argv.length ? i + 1 : undefined;
    // -o NAME, +O NAME, and a cluster ending in o or O (`-xo posix`) take the next word.
    if (/^[-+][A-Za-z]*[oO]$/.test(w)) {
      i += 1;
      continue;
    }
    if (/^[-+][A-Za-z]+$/.test(w)) continue;
    return i;
  }
  return undefined;
}
