/**
 * What bash does that the shell grammar does not show, found by testing lines against bash itself: forms the grammar
 * reads differently from bash (so the commands it finds are not the ones that run), and commands whose arguments
 * run other commands or change what a later command name means. shell-parse.ts turns each finding into a doubt (an
 * allow becomes an ask, never the reverse) or a runner. Also bash's reading of a line the grammar does not do: line
 * continuations joined before parsing, and the value of a `$'…'` string.
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
  // A vertical tab, a form feed or another control character: bash keeps it in a word, the grammar splits there.
  if (/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/.test(source)) doubts.push("the command contains a control character");
  // `{var}>file` assigns the descriptor to var: a subscript in the name is evaluated.
  if (/\{[^}\s]*\[[^}\s]*\}[<>]/.test(source)) doubts.push("a redirection assigns its descriptor to an array element");
  for (const node of root.descendantsOfType([
    "heredoc_start",
    "heredoc_redirect",
    "command_substitution",
    "ansi_c_string",
  ])) {
    if (!node) continue;
    if (node.type === "heredoc_start") {
      if (!/^(?:[\w.-]+|'[^']*'|"[^"$`\\]*")$/.test(node.text)) {
        doubts.push(`the here-document's delimiter ${node.text} is quoted in part (where it ends is read differently)`);
      }
    } else if (node.type === "heredoc_redirect") {
      // A here-document inside a substitution inside a here-document: bash ends the outer one first.
      for (let up = node.parent; up; up = up.parent) {
        if (up.type === "heredoc_body") {
          doubts.push("the command nests a here-document in another one's body");
          break;
        }
      }
    } else if (node.type === "command_substitution") {
      // Backticks remove their backslashes and read the text again (`\${x@P}` becomes an expansion).
      if (node.text.startsWith("`") && node.text.includes("\\"))
        doubts.push("a backtick substitution re-reads escaped text");
    } else if (SPELLED_SYNTAX.test(decodeAnsiC(node.text.slice(2, -1)))) {
      // $'\x24(cmd)' spells `$(cmd)`: wherever the value is evaluated again (a subscript, a test), it runs.
      doubts.push(`an ANSI-C string spells out shell syntax (${node.text.slice(0, 40)})`);
    }
  }
  return doubts;
}

/** Shell syntax a string's value may hold, to be run where the value is evaluated again. */
const SPELLED_SYNTAX = /\$\(|`|\$\{|\$\[|[<>]\(/;

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
  const cluster = (letter: string) =>
    args.some((w) => typeof w === "string" && new RegExp(`^-[a-zA-Z]*${letter}`).test(w));
  if (
    name === "alias" ||
    name === "enable" ||
    (name === "hash" && cluster("p")) ||
    (name === "shopt" && args.includes("expand_aliases"))
  ) {
    doubts.push(`${name} changes what a later command name runs`);
  }
  if ((name === "mapfile" || name === "readarray") && cluster("C")) doubts.push(`${name} -C runs a callback`);
  if (name === "compgen" || name === "complete" || name === "fc" || name === "let") {
    doubts.push(`${name} evaluates or runs text it is given`);
  }
  if (name === "set" && args.some((w) => typeof w === "string" && /^-[a-zA-Z]*x|^(xtrace|posix|history)$/.test(w))) {
    doubts.push("set turns on tracing, POSIX mode or history, which run or expand code later");
  }
  if (name === "{" || name === "(") doubts.push(`the command name is ${name}: a compound command a wrapper runs`);
  if (name !== null && NAME_TAKING.has(name)) {
    if (DECLARATIONS.has(name)) doubts.push(`the command uses ${name}`);
    for (const w of args) {
      if (w === null) {
        doubts.push(`${name} takes a variable name computed at run time`);
        break;
      }
      const variable = /^[A-Za-z_][A-Za-z0-9_]*/.exec(w)?.[0] ?? "";
      if (SHELL_VARIABLES.has(variable) || variable.startsWith("BASH_FUNC")) {
        doubts.push(`${name} sets ${variable}, which changes how the shell runs commands`);
        break;
      }
      if (/\[[^\]]*[A-Za-z_$`(]/.test(w)) {
        doubts.push(`${name} evaluates the subscript of ${w.slice(0, 40)}`);
        break;
      }
    }
  }
  return doubts;
}

/** Builtins that take variable names (and so evaluate a subscript in one, or set a special variable). */
const NAME_TAKING = new Set([
  "read",
  "printf",
  "declare",
  "typeset",
  "local",
  "export",
  "readonly",
  "unset",
  "mapfile",
  "readarray",
  "getopts",
  "test",
  "[",
  "wait",
]);
/** Declarations: seen as commands when a wrapper (`builtin`, `command`) hides them from the grammar. */
const DECLARATIONS = new Set(["declare", "typeset", "local", "export", "readonly", "unset"]);
/** Variables that change what the shell runs or how (prompts and traces expand, lookups, start-up files). */
const SHELL_VARIABLES = new Set(
  (
    "PS0 PS1 PS2 PS3 PS4 PROMPT_COMMAND BASH_CMDS BASH_ALIASES BASH_ENV ENV SHELLOPTS BASHOPTS PATH HOME IFS CDPATH " +
    "GLOBIGNORE FCEDIT EDITOR VISUAL PAGER GIT_PAGER LD_PRELOAD LD_LIBRARY_PATH"
  ).split(" "),
);

/** git subcommands that run no command of the line's choosing (an unknown one may be an alias or a git-x program). */
const KNOWN_GIT = new Set(
  (
    "status log diff show add commit checkout switch branch tag fetch pull push clone init merge rebase reset " +
    "restore stash rm mv remote rev-parse ls-files blame grep describe cherry-pick revert shortlog reflog clean " +
    "worktree apply am format-patch cat-file ls-tree rev-list notes archive bundle gc fsck prune count-objects help " +
    "version name-rev symbolic-ref update-index write-tree read-tree commit-tree hash-object for-each-ref show-ref " +
    "merge-base cherry range-diff whatchanged sparse-checkout diff-tree diff-files diff-index ls-remote var"
  ).split(" "),
);

/** git's subcommand: the first word after its global options (`-C dir`, `--git-dir=…`, `-p`, …). */
function gitSubcommand(words: string[]): string | undefined {
  for (let i = 0; i < words.length; i += 1) {
    const w = words[i] as string;
    if (w === "-C" || w === "--git-dir" || w === "--work-tree" || w === "--namespace") {
      i += 1;
      continue;
    }
    if (w.startsWith("-")) continue;
    return w;
  }
  return undefined;
}

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
 * its `e` command or flag, rsync -e, sort --compress-program, zip -T with a test command, split --filter — or any of
 * them with an argument computed at run time, which may be that option.
 */
export function runsViaArguments(argv: ShellWord[]): boolean {
  const name = typeof argv[0] === "string" ? basename(argv[0]) : null;
  const words = argv.slice(1).filter((w): w is string => typeof w === "string");
  const computed = argv.slice(1).some((w) => w === null);
  // GNU and git long options may be abbreviated to any unambiguous prefix (`--upload-pac`, `--exe`).
  const long = (...options: string[]) =>
    words.some((w) => {
      const flag = w.split("=")[0] as string;
      return flag.length >= 5 && flag.startsWith("--") && options.some((o) => o.startsWith(flag));
    });
  const short = (letters: string) => words.some((w) => new RegExp(`^-[a-zA-Z]*[${letters}]`).test(w));
  switch (name) {
    case "git": {
      const sub = gitSubcommand(words) ?? "status";
      return (
        computed ||
        !KNOWN_GIT.has(sub) ||
        words.some((w) => w === "-c" || w.includes("ext::")) ||
        long(
          "--config-env",
          "--exec-path",
          "--upload-pack",
          "--receive-pack",
          "--exec",
          "--extcmd",
          "--open-files-in-pager",
        ) ||
        (sub === "clone" && short("u")) ||
        (sub === "rebase" && short("x")) ||
        (sub === "grep" && short("O")) ||
        (sub === "difftool" && short("x"))
      );
    }
    case "tar":
      return (
        computed ||
        long(...TAR_RUNNING.filter((o) => o.startsWith("--"))) ||
        short("IF") ||
        // an old-style bundle (`tar cIf …`) as the first word
        (typeof argv[1] === "string" && !argv[1].startsWith("-") && /[IF]/.test(argv[1]))
      );
    case "sed":
    case "gsed":
      return computed || short("f") || long("--file") || sedScripts(words).some(sedRuns);
    case "rsync":
      return computed || short("e") || long("--rsh");
    case "sort":
      return computed || long("--compress-program");
    case "zip":
      return computed || words.some((w) => w.startsWith("-TT")) || long("--unzip-command");
    case "split":
      return computed || long("--filter");
    default:
      return false;
  }
}

/** The script words of a sed command line: `-e SCRIPT`, `-eSCRIPT`, `--expression=SCRIPT`, or the first operand. */
function sedScripts(words: string[]): string[] {
  const scripts: string[] = [];
  let sawExpression = false;
  for (let i = 0; i < words.length; i += 1) {
    const w = words[i] as string;
    if (w === "-e" || w === "--expression") {
      scripts.push(words[i + 1] ?? "");
      sawExpression = true;
      i += 1;
    } else if (/^-[a-zA-Z]*e./.test(w) && !w.startsWith("--")) {
      scripts.push(w.slice(w.indexOf("e") + 1));
      sawExpression = true;
    } else if (w.startsWith("--expression=")) {
      scripts.push(w.slice("--expression=".length));
      sawExpression = true;
    } else if (!w.startsWith("-") && !sawExpression) {
      scripts.push(w);
      sawExpression = true;
    }
  }
  return scripts;
}

/** Whether a sed script word uses the `e` command or the `s///e` flag (GNU sed runs it with the shell). */
function sedRuns(script: string): boolean {
  // The e command after any address form (`1`, `$`, `/re/I`, `\%re%`, `1~2`, `1,+3`, `!`), alone or with a command.
  if (/(?:^|[;\n{}!\s\d$/%~+,IM])e(?:\s|;|$)/.test(script)) return true;
  // The e flag of s: s<d>…<d>…<d>FLAGS with e among the flags.
  return /(?:^|[;\n{}\s])s(.)(?:(?!\1).|\\.)*\1(?:(?!\1).|\\.)*\1[gpiImMw\d]*e/.test(script);
}

/** Nodes inside which a backslash-newline is kept as it is (no line continuation there). */
const KEEPS_CONTINUATIONS = new Set(["raw_string", "ansi_c_string", "comment"]);

/**
 * `source` with bash's line continuations removed: each backslash-newline whose backslash is not itself escaped,
 * outside single quotes, `$'…'`, comments and the bodies of quoted here-documents (where bash keeps it). `root` is
 * the parse of `source`, which says where each one stands.
 */
export function joinLineContinuations(source: string, root: Node): string {
  let joined = "";
  let from = 0;
  for (let i = source.indexOf("\\\n"); i !== -1; i = source.indexOf("\\\n", i + 2)) {
    let run = 1;
    while (i - run >= 0 && source[i - run] === "\\") run++;
    if (run % 2 === 0) continue; // an escaped backslash, then a newline
    if (!continuesHere(root.descendantForIndex(i))) continue;
    joined += source.slice(from, i);
    from = i + 2;
  }
  return from === 0 ? source : joined + source.slice(from);
}

/** Whether bash removes a backslash-newline standing in `node` (see {@link joinLineContinuations}). */
function continuesHere(node: Node | null): boolean {
  for (let n = node; n; n = n.parent) {
    if (KEEPS_CONTINUATIONS.has(n.type)) return false;
    if (n.type === "heredoc_body") {
      const start = n.parent?.children.find((c) => c?.type === "heredoc_start")?.text ?? "";
      return !/['"\\]/.test(start);
    }
  }
  return true;
}

/** The value of a `$'…'` string's body (its escapes decoded). */
export function decodeAnsiC(body: string): string {
  const simple: Record<string, string> = {
    n: "\n",
    t: "\t",
    r: "\r",
    a: "\x07",
    b: "\b",
    e: "\x1b",
    E: "\x1b",
    f: "\f",
    v: "\v",
  };
  return body.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|.)/gs, (_, esc: string) => {
    if (/^[xuU]/.test(esc)) return String.fromCodePoint(Number.parseInt(esc.slice(1), 16));
    if (/^[0-7]+$/.test(esc)) return String.fromCharCode(Number.parseInt(esc, 8));
    return simple[esc] ?? esc;
  });
}
