/**
 * What the shell parser knows about programs that run other programs: the option grammar of the wrappers it
 * unwraps (`timeout`, `nice`, `env`, `sudo`, …), the shells whose `-c STRING` it parses, and the runners it cannot
 * see into.
 */

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
  ...SHELLS,
]);
