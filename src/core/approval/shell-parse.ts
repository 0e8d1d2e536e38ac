/**
 * Splits a shell command line into the simple commands it would run, with a real parser (tree-sitter's bash
 * grammar, compiled to WebAssembly): every pipeline element, `&&` / `||` / `;` / `&` segment, command and process
 * substitution (anywhere in the tree, parameter-expansion patterns and here-documents included), brace group, subshell, loop and conditional body yields its commands. Known wrappers (`timeout`,
 * `nice`, `env`, `xargs`, `nohup`, `sudo`, `sh -c`, `eval`, `find -exec`, …) are unwrapped so the command they run is
 * matched too. Whatever the parse cannot vouch for (an output redirection, a wrapper option it does not know, a
 * command name built from expansions, a function definition, a parse error) is recorded as a doubt: a doubt turns
 * an allow into an ask, never the other way round.
 */
import { createRequire } from "node:module";
import { basename } from "node:path";
import type { Node, Parser } from "web-tree-sitter";
import {
  commandHazards,
  decodeAnsiC,
  joinLineContinuations,
  lineHazards,
  runsViaArguments,
  SUBSCRIPT_WITH_SUBSTITUTION,
} from "./shell-hazards.js";
import { RUNNERS, SHELLS, scriptIndex, splitWrapper, WRAPPERS } from "./shell-wrappers.js";

/** One word of a command: its literal text, or null when it depends on an expansion at run time. */
export type ShellWord = string | null;

/** One simple command the line would run, after unwrapping known wrappers. */
export interface ShellCommand {
  /** The command that finally runs (after every wrapper), e.g. `["git", "status"]`. */
  argv: ShellWord[];
  /** The wrappers around it, outermost first (e.g. `["timeout", "5"]`), each with its own arguments. */
  wrappers: ShellWord[][];
  /** Why this command cannot be allowed without asking (empty when nothing is in doubt). */
  doubts: string[];
  /** It runs other programs the parser cannot see (ssh, docker, an interpreter with inline code, …). */
  runner: boolean;
  /**
   * An argument may stand for any number of words at run time: an unquoted expansion or substitution (bash splits
   * it into words), or the words xargs appends. A broad rule's missing words may all hide there.
   */
  spread?: boolean;
}

/** The commands of a command line, with the doubts that concern the line as a whole. */
export interface ParsedShell {
  commands: ShellCommand[];
  /** Line-level doubts: redirections to files, parse errors, function definitions, variable assignments. */
  doubts: string[];
}

/** How a redirection's doubt begins (the policy tells it apart: a redirection runs no command a rule could catch). */
export const REDIRECT_DOUBT = "the command redirects ";

let parser: Parser | undefined;
let loading: Promise<Parser> | undefined;

/** Loads the WebAssembly parser once (about 15 ms); later calls resolve at once. */
export function loadShellParser(): Promise<Parser> {
  if (parser) return Promise.resolve(parser);
  loading ??= (async () => {
    const require = createRequire(import.meta.url);
    // Loaded on first use: most commands never parse a shell line.
    const { Language, Parser } = await import("web-tree-sitter");
    await Parser.init();
    const language = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"));
    const p = new Parser();
    p.setLanguage(language);
    parser = p;
    return p;
  })();
  return loading;
}

/** Whether the parser is loaded, so the synchronous functions below can run. */
export function shellParserReady(): boolean {
  return parser !== undefined;
}

/** Deepest nesting of `sh -c` / `eval` strings unwrapped before the rest counts as a doubt. */
const MAX_NESTING = 4;

/**
 * Longest command line parsed (characters): parsing is synchronous, about 1.7 s per MB on this machine. A longer
 * line is a doubt, as is one nested deeper than the walk of its tree can follow (thousands of `&&`).
 */
const MAX_PARSE_CHARS = 256 * 1024;

/**
 * Parses a command line (bash syntax; zsh lines that bash parses the same way). Synchronous once
 * {@link loadShellParser} has resolved; throws Error when it has not.
 */
export function parseShellCommand(source: string, depth = 0): ParsedShell {
  if (!parser) throw new Error("The shell parser is not loaded yet: await loadShellParser() first.");
  const out: ParsedShell = { commands: [], doubts: [] };
  if (source.includes("\0")) {
    out.doubts.push("the command contains a NUL byte");
    return out;
  }
  // bash takes a carriage return for an ordinary character (`\<CR><LF>` escapes the CR and the LF ends the
  // command) where the grammar sees a line continuation: what runs would not be what is matched.
  if (source.includes("\r")) out.doubts.push("the command contains a carriage return");
  if (source.length > MAX_PARSE_CHARS) {
    out.doubts.push(
      `the command is too long to read (${source.length} characters; at most ${MAX_PARSE_CHARS} are parsed)`,
    );
    return out;
  }
  let tree = parser.parse(source);
  if (!tree) {
    out.doubts.push("the command could not be parsed");
    return out;
  }
  try {
    const joined = joinLineContinuations(source, tree.rootNode);
    if (joined !== source) {
      // bash removes a line continuation before it splits words (`r\<LF>m` is `rm`); the grammar takes it for a
      // space between words. The line is parsed again as bash reads it.
      tree.delete();
      tree = parser.parse(joined);
      if (!tree) {
        out.doubts.push("the command could not be parsed");
        return out;
      }
    }
    if (tree.rootNode.hasError) out.doubts.push("the command does not parse as shell syntax");
    out.doubts.push(...lineHazards(joined, tree.rootNode));
    visit(tree.rootNode, out, depth);
  } catch (error) {
    // The walks recurse along the tree: a line of thousands of `&&` or nested groups runs out of stack.
    if (!(error instanceof RangeError)) throw error;
    out.doubts.push("the command nests too deep to read");
  } finally {
    tree?.delete();
  }
  return out;
}

/**
 * The commands an argument vector runs when no shell reads it (shell_exec): its words are plain text, never syntax,
 * but its wrappers (`env`, `timeout`, `xargs`, …), `sh -c '…'` and `find -exec` are read as in a command line, and
 * runners are marked. Synchronous once {@link loadShellParser} has resolved (a `sh -c` script is parsed); throws
 * Error when it has not.
 */
export function parseArgv(argv: ShellWord[]): ParsedShell {
  if (!parser) throw new Error("The shell parser is not loaded yet: await loadShellParser() first.");
  const out: ParsedShell = { commands: [], doubts: [] };
  out.commands.push(...unwrap(argv, [], out, 0));
  return out;
}

const HARMLESS_TARGETS = new Set(["/dev/null", "/dev/stdout", "/dev/stderr"]);

function visit(node: Node, out: ParsedShell, depth: number): void {
  switch (node.type) {
    case "command":
      out.commands.push(...commandsOf(node, out, depth));
      break;
    case "file_redirect":
      checkRedirect(node, out);
      break;
    case "heredoc_redirect":
      // A here-document only feeds stdin; what reads it is matched as a command (a shell reading it is a runner).
      break;
    case "function_definition":
      out.doubts.push("the command defines a shell function (it could shadow a command name)");
      break;
    case "variable_assignment":
      if (node.parent?.type !== "command") out.doubts.push("the command assigns a shell variable");
      break;
    case "declaration_command":
    case "unset_command":
      out.doubts.push(`the command uses ${node.firstChild?.text ?? "a declaration"}`);
      break;
    case "ERROR":
      out.doubts.push("the command does not parse as shell syntax");
      break;
    case "expansion":
      checkExpansion(node, out);
      break;
    case "arithmetic_expansion":
    case "subscript":
    case "test_command":
      // -v / -R take a variable name: a subscript in it, or a name that is a variable's value, is evaluated.
      if (/\s-[vR]\s/.test(` ${node.text} `) && /[$[`]/.test(node.text))
        out.doubts.push(`the test evaluates a variable name computed at run time (${clip(node.text)})`);
      checkArithmetic(node, out);
      break;
    case "c_style_for_statement":
      checkArithmetic(node, out);
      break;
    case "raw_string":
    case "string":
      // `[[ -v 'a[$(cmd)]' ]]`, `[ -v … ]`: a quoted subscript is evaluated where a variable name is expected.
      if (SUBSCRIPT_WITH_SUBSTITUTION.test(node.text) && node.parent?.type !== "command")
        out.doubts.push("a quoted word holds an array subscript with a substitution, which tests of a variable run");
      break;
    case "compound_statement":
      // `(( … ))` evaluates its body as arithmetic.
      if (node.firstChild?.type === "((") checkArithmetic(node, out);
      break;
    case "for_statement":
    case "select_statement": {
      // The loop assigns its variable: an exported one (PATH, HOME, …) changes what the body's commands do.
      const variable = node.childForFieldName("variable")?.text ?? "";
      if (!/[a-z]/.test(variable))
        out.doubts.push(`the loop assigns ${variable || "a variable"}, which may be exported`);
      break;
    }
    default:
      break;
  }
  if (node.namedChildCount === 0) checkOpaque(node, out, depth);
  for (const child of node.namedChildren) if (child) visit(child, out, depth);
}

/** Integer comparisons of `[[ … ]]`, whose operands bash evaluates as arithmetic. */
const ARITHMETIC_TESTS = /\s-(eq|ne|lt|le|gt|ge)\s/;

/**
 * Arithmetic contexts (`$(( … ))`, an array subscript, an integer comparison in `[[ … ]]`) evaluate a variable's
 * value as an expression, recursively, and an array reference inside that value runs a command substitution:
 * `x='a[$(cmd)]'; echo $((x))` runs `cmd`. A variable's value is unknown before the line runs, so an arithmetic
 * context that names a variable turns allow into ask; pure number arithmetic (`$((2 * 3))`) stays allowed.
 */
function checkArithmetic(node: Node, out: ParsedShell): void {
  if (node.type === "test_command" && !ARITHMETIC_TESTS.test(` ${node.text} `)) return;
  const body =
    node.type === "subscript"
      ? (node.childForFieldName("index")?.text ?? "")
      : node.type === "c_style_for_statement"
        ? node.children
            .filter((c): c is Node => c !== null && c.type !== "do_group" && c.type !== "compound_statement")
            .map((c) => (c.type === "for" ? "" : c.text))
            .join(" ")
        : node.type === "compound_statement"
          ? node.text.replace(/^\(\(|\)\)$/g, "")
          : node.text;
  // A letter names a variable; a quote or a backslash may spell one (`$'\142'` is b) without any letter.
  if (/[A-Za-z_'"\\]/.test(body.replace(/^\$\(\(|\)\)$/g, "").replace(/\[\[|\]\]|-(eq|ne|lt|le|gt|ge)\b/g, ""))) {
    out.doubts.push(
      `the command evaluates a variable's value as arithmetic (${clip(node.text)}), which can run commands`,
    );
  }
}

/** Leaf node types whose text the shell never expands, or that are only syntax. */
const INERT_LEAVES = new Set(["raw_string", "comment", "heredoc_start", "heredoc_end", "file_descriptor"]);

/** A command or process substitution written in any form: `$(…)`, backticks, `<(…)`, `>(…)`. */
const SUBSTITUTION = /\$\(|`|[<>]\(/;

/**
 * A leaf the grammar keeps as opaque text (the pattern of `${x#…}`, `${x%%…}`, an extglob, here-document text)
 * may still hold a substitution the shell runs. Its text is parsed again so each substitution in it is a command
 * of its own (a deny rule still sees it), and the line is in doubt: the policy does not vouch for what it cannot
 * read in place.
 */
function checkOpaque(node: Node, out: ParsedShell, depth: number): void {
  if (INERT_LEAVES.has(node.type) || !SUBSTITUTION.test(node.text)) return;
  out.doubts.push(`the command runs a substitution inside ${node.type.replace(/_/g, " ")} text (${clip(node.text)})`);
  if (depth >= MAX_NESTING) return;
  const inner = parseShellCommand(`: ${node.text}`, depth + 1);
  const [first, ...rest] = inner.commands;
  const keep = first && first.argv[0] === ":" && first.wrappers.length === 0 ? rest : inner.commands;
  out.commands.push(...keep);
  out.doubts.push(...inner.doubts);
}

/**
 * Parameter expansions whose result the policy cannot reason about: indirection (`${!x}`, which evaluates the
 * named variable's value, subscripts and all) and transformations (`${x@P}` expands the value as a prompt,
 * running any substitution in it).
 */
function checkExpansion(node: Node, out: ParsedShell): void {
  const operators = node.children.filter((c): c is Node => c !== null && !c.isNamed).map((c) => c.text);
  if (operators[1] === "!") out.doubts.push(`the command uses an indirect parameter expansion (${clip(node.text)})`);
  if (operators.includes("@"))
    out.doubts.push(`the command transforms a parameter expansion at run time (${clip(node.text)})`);
  // ${x:=value}, ${x=value}: the expansion assigns the variable.
  if (operators.includes(":=") || operators.includes("="))
    out.doubts.push(`the command assigns a variable in an expansion (${clip(node.text)})`);
  // ${x:offset:length}: both are arithmetic, and a variable in them is evaluated (subscripts and all).
  if (operators.includes(":") && node.namedChildren.slice(1).some((c) => c && /[A-Za-z_]/.test(c.text))) {
    out.doubts.push(
      `the command evaluates a substring offset as arithmetic (${clip(node.text)}), which can run commands`,
    );
  }
  for (const child of node.namedChildren) {
    if (child && !EXPANSION_PARTS.has(child.type))
      out.doubts.push(`the command uses a parameter expansion the approval policy cannot read (${clip(node.text)})`);
  }
}

/** Named parts of `${…}` the policy understands; anything else in one is a doubt. */
const EXPANSION_PARTS = new Set([
  "variable_name",
  "special_variable_name",
  "subscript",
  "word",
  "number",
  "string",
  "raw_string",
  "ansi_c_string",
  "translated_string",
  "concatenation",
  "simple_expansion",
  "expansion",
  "command_substitution",
  "process_substitution",
  "arithmetic_expansion",
  "regex",
]);

function clip(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function checkRedirect(node: Node, out: ParsedShell): void {
  let operator = "";
  for (const child of node.children) if (child && !child.isNamed) operator += child.text;
  const destination = node.childForFieldName("destination");
  const target = destination ? literal(destination) : null;
  // `2>&1`, `>&2`, `<&-`: duplicating descriptors touches no file.
  if (
    (operator === ">&" || operator === "<&" || operator === ">&-" || operator === "<&-") &&
    /^\d*-?$/.test(target ?? "x")
  )
    return;
  if (target !== null && HARMLESS_TARGETS.has(target)) return;
  out.doubts.push(
    `${REDIRECT_DOUBT}${operator.includes("<") ? "input from" : "output to"} ${target ?? "a computed path"}`,
  );
}

/** Literal text of a word node, or null when it holds an expansion (or is not a word at all). */
export function literal(node: Node): string | null {
  switch (node.type) {
    case "word":
    case "number":
      if (/[*?[]/.test(node.text) && node.parent?.type === "command_name") return null;
      return node.text.replace(/\\(.)/gs, "$1");
    case "raw_string":
      return node.text.slice(1, -1);
    case "string": {
      let text = "";
      for (const child of node.namedChildren) {
        if (!child) continue;
        if (child.type !== "string_content") return null;
        text += child.text.replace(/\\([$`"\\\n])/g, "$1");
      }
      return text;
    }
    case "ansi_c_string":
      return decodeAnsiC(node.text.slice(2, -1));
    case "concatenation": {
      let text = "";
      for (const child of node.namedChildren) {
        const part = child ? literal(child) : null;
        if (part === null) return null;
        text += part;
      }
      return text;
    }
    case "command_name":
      return node.firstNamedChild ? literal(node.firstNamedChild) : null;
    default:
      return null;
  }
}

/** Unquoted expansions and substitutions: bash splits their value into any number of words. */
const SPLIT_WORDS = new Set(["simple_expansion", "expansion", "command_substitution"]);

/** Whether an argument node may expand to several words (it holds an unquoted expansion or substitution). */
function splits(node: Node): boolean {
  if (SPLIT_WORDS.has(node.type)) return true;
  return node.type === "concatenation" && node.namedChildren.some((c) => c !== null && SPLIT_WORDS.has(c.type));
}

function commandsOf(node: Node, out: ParsedShell, depth: number): ShellCommand[] {
  const argv: ShellWord[] = [];
  const doubts: string[] = [];
  let spread = false;
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === "variable_assignment") {
      doubts.push(`the command sets ${child.childForFieldName("name")?.text ?? "a variable"} for itself`);
    } else if (child.type === "command_name") {
      argv.push(literal(child));
    } else if (child.type.endsWith("redirect")) {
      // visited separately
    } else {
      const word = literal(child);
      if (word === null && splits(child)) spread = true;
      argv.push(word);
    }
  }
  return unwrap(argv, doubts, out, depth, spread);
}

function doubtful(argv: ShellWord[], doubts: string[], wrappers: ShellWord[][], spread: boolean): ShellCommand {
  const name = argv[0];
  doubts.push(...commandHazards(argv));
  // A program named by a path outside the system's directories (`./x`, a script the line may have just written).
  const ownProgram = typeof name === "string" && name.includes("/") && !SYSTEM_PROGRAM.test(name);
  return {
    argv,
    wrappers,
    doubts,
    runner: (typeof name === "string" && RUNNERS.has(basename(name))) || runsViaArguments(argv) || ownProgram,
    ...(spread ? { spread } : {}),
  };
}

/** A program of the system's own directories. */
const SYSTEM_PROGRAM = /^\/(?:usr\/)?(?:local\/)?s?bin\/[^/]+$/;

/** Glob syntax in a command name (`*`, `?`, a bracket expression); `[` and `[[` alone are the test commands. */
const NAME_PATTERN = /[*?]|\[.*\]|\{[^}]*(,|\.\.)[^}]*\}/;

/**
 * Splits off every known wrapper; the inner commands of `sh -c`, `eval` and `find -exec` are parsed as well.
 * `spread`: an argument may stand for several words (see ShellCommand.spread).
 */
function unwrap(argv: ShellWord[], doubts: string[], out: ParsedShell, depth: number, spread = false): ShellCommand[] {
  const wrappers: ShellWord[][] = [];
  let rest = argv;
  const extra: ShellCommand[] = [];
  for (let guard = 0; guard < 16; guard += 1) {
    const head = rest[0];
    if (head === undefined) break;
    if (head === null) {
      doubts.push("the command name is computed at run time");
      break;
    }
    // `/usr/bin/r[m]`, `xarg?`: a name that is a pattern names whatever file matches it when the line runs.
    if (NAME_PATTERN.test(head)) {
      doubts.push("the command name is a pattern matched against file names at run time");
      break;
    }
    const name = basename(head);
    // sh -c "…", bash -c "…": the string is a command line of its own.
    if (SHELLS.has(name)) {
      const index = rest.findIndex((w, i) => i > 0 && typeof w === "string" && /^-[a-z]*c[a-z]*$/.test(w));
      // `bash FILE -c …` runs FILE (-c is only its argument); start-up files run before any script.
      const before = index < 0 ? rest.slice(1) : rest.slice(1, index);
      if (before.some((w) => w === null || !/^[-+]/.test(w))) doubts.push(`${name} runs a script file`);
      if (rest.some((w) => typeof w === "string" && /^--(rcfile|init-file|login)|^-[a-zA-Z]*[il]/.test(w)))
        doubts.push(`${name} reads start-up files that run commands`);
      // The line is parsed with bash's grammar; another shell (dash as sh, …) may read it differently.
      if (name !== "bash" && name !== "rbash") doubts.push(`${name} reads its script with its own grammar, not bash's`);
      if (index > 0) {
        // Options may follow -c (`bash -c -e 'cmd'`, `sh -c -- 'cmd'`): the script is the first word after them.
        const at = scriptIndex(rest, index + 1);
        const script = at === undefined ? null : rest[at];
        if (typeof script === "string" && depth < MAX_NESTING) {
          const inner = parseShellCommand(script, depth + 1);
          out.doubts.push(...inner.doubts);
          const layer = rest.slice(0, (at ?? index) + 1);
          const inside = inner.commands.map((c) => ({
            ...c,
            doubts: [...doubts, ...c.doubts],
            wrappers: [...wrappers, layer, ...c.wrappers],
          }));
          return inside.length > 0 ? inside : [{ argv: layer, wrappers, doubts, runner: false }];
        }
        doubts.push(`${name} -c runs a command line that is computed at run time`);
      }
      break;
    }
    if (name === "eval") {
      const words = rest[1] === "--" ? rest.slice(2) : rest.slice(1);
      if (words.every((w): w is string => typeof w === "string") && depth < MAX_NESTING) {
        const inner = parseShellCommand(words.join(" "), depth + 1);
        out.doubts.push(...inner.doubts);
        const inside = inner.commands.map((c) => ({
          ...c,
          doubts: [...doubts, ...c.doubts],
          wrappers: [...wrappers, rest, ...c.wrappers],
        }));
        return inside.length > 0 ? inside : [{ argv: rest, wrappers, doubts, runner: false }];
      }
      doubts.push("eval runs a command line that is computed at run time");
      return [{ argv: rest, wrappers, doubts, runner: true }];
    }
    if (name === "trap") {
      // trap ACTION SIGNAL…: the action is a command line the shell runs later (at exit, on a signal).
      const dashes = rest.indexOf("--");
      const args = dashes > 0 ? rest.slice(dashes + 1) : rest.slice(1);
      const action = args[0];
      if (depth >= MAX_NESTING) doubts.push("trap is nested too deep to read");
      if (
        args.length >= 2 &&
        typeof action === "string" &&
        (dashes > 0 || !action.startsWith("-")) &&
        depth < MAX_NESTING
      ) {
        const inner = parseShellCommand(action, depth + 1);
        out.doubts.push(...inner.doubts);
        return [
          { argv: rest, wrappers, doubts, runner: false },
          ...inner.commands.map((c) => ({ ...c, wrappers: [...wrappers, rest, ...c.wrappers] })),
        ];
      }
      if (args.some((w) => w === null)) doubts.push("trap sets an action computed at run time");
      break;
    }
    if (name === "find") {
      // A word computed at run time may be `-exec`, `-execdir`, `-ok` or `-okdir` and run what follows it.
      if (rest.slice(1).some((w) => w === null))
        doubts.push("find's expression holds a word computed at run time (it may be an -exec)");
      for (let i = 1; i < rest.length; i += 1) {
        const w = rest[i];
        if (w === "-exec" || w === "-execdir" || w === "-ok" || w === "-okdir") {
          let end = rest.findIndex((x, j) => j > i && (x === ";" || x === "+"));
          if (end < 0) end = rest.length;
          // `-exec {} …` runs each file found: the command is whatever matches.
          const first = rest[i + 1];
          if (first === null || (typeof first === "string" && first.includes("{}"))) {
            doubts.push(`find ${w} runs the files it finds`);
          }
          const inner = rest.slice(i + 1, end).filter((x) => x !== "{}");
          if (inner.length > 0)
            extra.push(
              ...unwrap(inner, [], out, depth, spread).map((c) => ({
                ...c,
                wrappers: [...wrappers, rest, ...c.wrappers],
              })),
            );
          i = end;
        }
      }
      return [{ argv: rest, wrappers, doubts, runner: false, ...(spread ? { spread } : {}) }, ...extra];
    }
    // coproc NAME { … }: the grammar reads NAME { … as one command.
    if (name === "coproc" && rest.slice(1, 3).some((w) => w === "{" || w === "(" || w === null)) {
      doubts.push("coproc runs a compound command");
      break;
    }
    const spec = WRAPPERS[name];
    if (!spec) break;
    const parsed = splitWrapper(rest, spec);
    if (parsed.unknown) {
      doubts.push(`${name} is used with an option the approval policy does not know (${parsed.unknown})`);
      return [doubtful(rest, doubts, wrappers, spread)];
    }
    if (parsed.assignments) doubts.push(`${name} sets environment variables for the command`);
    // GNU time -o FILE writes (or appends to) a file, like a redirection.
    const output =
      name === "time" ? rest.findIndex((w) => typeof w === "string" && /^(-o|--output|-[a-z]*o)/.test(w)) : -1;
    if (output > 0) doubts.push(`${REDIRECT_DOUBT}output to ${rest[output + 1] ?? "a file"} (time -o)`);
    if (parsed.query) break; // runs nothing else (`command -v x`)
    if (
      name === "xargs" &&
      typeof parsed.inner[0] === "string" &&
      (SHELLS.has(basename(parsed.inner[0])) || basename(parsed.inner[0]) === "eval")
    ) {
      doubts.push(`xargs feeds its input into the command line ${basename(parsed.inner[0])} runs`);
    }
    if (parsed.inner.length === 0) {
      // A bare `env`, `nice`, … runs nothing, unless xargs feeds it the command from its input.
      if (wrappers.some((layer) => typeof layer[0] === "string" && basename(layer[0]) === "xargs"))
        doubts.push(`xargs supplies the command ${name} runs from its input`);
      break;
    }
    wrappers.push(rest.slice(0, rest.length - parsed.inner.length));
    rest = parsed.inner;
    if (name === "xargs") {
      // xargs appends the words it reads to the command (or puts them where -I says): words computed at run time,
      // any number of them (an -exec for find, a -c for git, the flags a deny rule names).
      rest = [...rest, null];
      spread = true;
    }
  }
  return [doubtful(rest, doubts, wrappers, spread), ...extra];
}
