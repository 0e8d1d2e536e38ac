/**
 * What bash does that the shell grammar does not show, found by testing lines against bash itself: forms the grammar
 * reads differently from bash (so the commands it finds are not the ones that run), and commands whose arguments
 * run other commands or change what a later command name means. shell-parse.ts turns each finding into a doubt (an
 * allow becomes an ask, never the reverse) or a runner.
 */
import { basename } from "node:path";
import type { Node } from "web-tree-sitter";
import type { ShellWord } from "./shell-parse.js";

/**
 * Doubts about a whole line, from its source and its parse:
 * - a backslash before a blank: bash keeps it in the word (`\ #` is the word " #"), the grammar takes it for a space
 *   (and may read the rest of the line as a comment);
 * - a here-document delimiter quoted in part or written `$'…'` / `$"…"`: bash ends the body at the unquoted text,
 *   the grammar at the written one, so lines bash runs as commands are read as text.
 */
export function lineHazards(source: string, root: Node): string[] {
  const doubts: string[] = [];
  if (/\\[ \t\v\f]/.test(source))
    doubts.push("the command escapes a blank (bash and the approval parser split it differently)");
  for (const start of root.descendantsOfType("heredoc_start")) {
    if (start && !/^(?:[\w.-]+|'[^']*'|"[^"$`\\]*")$/.test(start.text)) {
      doubts.push(`the here-document's delimiter ${start.text} is quoted in part (where it ends is read differently)`);
    }
  }
  return doubts;
}

/** A literal word holding an array subscript with a substitution: builtins that take a variable name evaluate it. */
export const SUBSCRIPT_WITH_SUBSTITUTION = /\[[^\]]*(?:\$\(|`|\$\{|[<>]\()/;

/**
 * Doubts about one simple command (after its wrappers are split off), from its literal words:
 * - a word like `a[$(cmd)]`: `printf -v`, `read`, `test -v`, `let`, `declare -i`, … evaluate the subscript and run
 *   `cmd`;
 * - builtins that make a later command name run something else (`alias`, `hash -p`, `enable`,
 *   `shopt -s expand_aliases`) or that take code to run later (`mapfile -C`, `readarray -C`).
 */
export function commandHazards(argv: ShellWord[]): string[] {
  const doubts: string[] = [];
  if (argv.some((w) => typeof w === "string" && SUBSCRIPT_WITH_SUBSTITUTION.test(w))) {
    doubts.push("a word holds an array subscript with a substitution, which builtins taking a variable name run");
  }
  const name = typeof argv[0] === "string" ? basename(argv[0]) : null;
  const args = argv.slice(1);
  const has = (...flags: string[]) => args.some((w) => typeof w === "string" && flags.some((f) => w.startsWith(f)));
  if (
    name === "alias" ||
    name === "enable" ||
    (name === "hash" && has("-p")) ||
    (name === "shopt" && args.includes("expand_aliases"))
  ) {
    doubts.push(`${name} changes what a later command name runs`);
  }
  if ((name === "mapfile" || name === "readarray") && has("-C")) doubts.push(`${name} -C runs a callback`);
  return doubts;
}

/** Options of git that set configuration (aliases, hooks, pagers and fsmonitor run commands). */
const GIT_CONFIG_OPTIONS = ["-c", "--config-env", "--exec-path"];
/** git subcommands (or their options) that run a command given on the command line or stored for later. */
const GIT_RUNNING = new Set(["config", "bisect", "submodule", "filter-branch", "difftool", "mergetool"]);

/** tar options that run a program. */
const TAR_RUNNING = [
  "--checkpoint-action",
  "--to-command",
  "--info-script",
  "--new-volume-script",
  "--use-compress-program",
  "--rsh-command",
  "-I",
  "-F",
];

/**
 * Whether a program runs other programs through its arguments (beyond the fixed list of runners, which run them
 * whatever the arguments): git with configuration or a subcommand that executes, tar with a program option, sed with
 * its `e` command or flag, rsync -e, sort --compress-program, zip -T with a test command.
 */
export function runsViaArguments(argv: ShellWord[]): boolean {
  const name = typeof argv[0] === "string" ? basename(argv[0]) : null;
  const words = argv.slice(1).filter((w): w is string => typeof w === "string");
  const computed = argv.slice(1).some((w) => w === null);
  switch (name) {
    case "git":
      return (
        computed ||
        words.some((w) => GIT_CONFIG_OPTIONS.some((o) => w === o || w.startsWith(`${o}=`)) || w.includes("ext::")) ||
        words.some((w) => GIT_RUNNING.has(w) || w.startsWith("--upload-pack") || w.startsWith("--receive-pack")) ||
        words.some((w) => w === "-x" || w.startsWith("--exec") || w.startsWith("--extcmd"))
      );
    case "tar":
      return (
        computed ||
        words.some((w) =>
          TAR_RUNNING.some((o) => w === o || w.startsWith(`${o}=`) || (o.length === 2 && w.startsWith(o))),
        )
      );
    case "sed":
    case "gsed":
      return computed || words.some(sedRuns);
    case "rsync":
      return words.some((w) => w === "-e" || w.startsWith("--rsh") || /^-[a-zA-Z]*e/.test(w));
    case "sort":
      return words.some((w) => w.startsWith("--compress-program"));
    case "zip":
      return words.some((w) => w === "-TT" || w.startsWith("--unzip-command"));
    default:
      return false;
  }
}

/** Whether a sed script word uses the `e` command or the `s///e` flag (GNU sed runs it with the shell). */
function sedRuns(word: string): boolean {
  if (word.startsWith("-")) return false;
  // The e command: at a command's start (after an optional address and !), alone or with a command after it.
  if (/(?:^|[;\n{}])\s*(?:[\d$]+|\/[^/]*\/)?(?:\s*,\s*(?:[\d$]+|\/[^/]*\/))?\s*!?\s*e(?:\s|;|$)/.test(word))
    return true;
  // The e flag of s: s<d>…<d>…<d>FLAGS with e among the flags.
  return /(?:^|[;\n{}\s])s(.)(?:(?!\1).|\\.)*\1(?:(?!\1).|\\.)*\1[gpiImMw\d]*e/.test(word);
}
