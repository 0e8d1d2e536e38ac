/**
 * fast-check arbitraries for the file tools' arguments, in two families:
 *
 * - `defective(tool)`: argument objects with at least one defect the tool must refuse before touching the
 *   filesystem (NUL bytes, lone surrogates, names over 255 bytes, paths over 4,095 bytes, empty strings, glob
 *   patterns ending in "/" or over the length limit, invalid or oversized regexes, wrong types, numbers out of range,
 *   unknown or missing keys, text that is not a JSON object). Every one must end as `validation_failed`. They are
 *   cheap, so they carry the large per-tool count (TOOLHOST_FUZZ_RUNS, 20,000 by default).
 * - `free(tool)`: arguments drawn from the tree's real names and hostile text alike (symbolic links inside, out,
 *   dangling and looping, the denied directory, Toolhost's data directory, directories given as files, `..`, `~`,
 *   huge numbers), which really execute. None may end as an unclassified `execution_failed`.
 *
 * Both are drawn by the lean generators of lean.ts (plain functions of fast-check's random source, with a generic
 * shrinker), which cost about a tenth of fast-check's combinators per argument.
 */
import type fc from "fast-check";
import {
  anyInt,
  arbitrary,
  arrayOf,
  bool,
  filter,
  finiteDouble,
  type Gen,
  int,
  nat,
  oneof,
  pick,
  record,
  str,
  weighted,
} from "./lean.js";
import { type FileTool, inWorld, ROOT, TREE_NAMES } from "./tree.js";

/** Any UTF-16 code unit, lone surrogates included. */
const codeUnit: Gen<string> = (r) => String.fromCharCode(r.nextInt(0, 0xffff));
/** Characters that mean something to paths, globs, regexes, patches or JSON. */
const special = pick(
  "/",
  "\\",
  ".",
  "..",
  "~",
  "*",
  "**",
  "?",
  "[",
  "]",
  "{",
  "}",
  ",",
  "!",
  " ",
  "\n",
  "\r",
  "\t",
  "😀",
  "€",
  "é",
  "%",
  "$",
  "'",
  '"',
  ":",
  "|",
  "(",
  ")",
  "^",
  "+",
  "@@",
  "-",
);
const letter = pick("a", "b", "x", "A", "_", "1");
/** Short text mixing letters, specials and arbitrary code units. */
export const text: Gen<string> = str(weighted([4, letter], [3, special], [1, codeUnit]), 10);
/** Short text without NUL or lone surrogates (what passes the text checks). */
const cleanText: Gen<string> = str(weighted([4, letter], [3, special]), 10);

const treeName = pick<string>(...TREE_NAMES, "new.txt", "sub/new.ts", "nope", "sub/deep");
const segment = weighted<string>(
  [5, pick("a.txt", "sub", "deep", "b.ts", "secret", "link-dir", "loop-a", "new")],
  [3, cleanText],
  [1, pick("", ".", "..", "~")],
);
const pathPrefix = pick("", "", "./", "/", "~/", "../", "sub/");
const segments = arrayOf(segment, 1, 4);
/** Absolute paths into the world (ROOT becomes its directory as the value is drawn). */
const worldPaths = [
  `${ROOT}/proj/a.txt`,
  `${ROOT}/proj/sub`,
  `${ROOT}/proj/secret/s.txt`,
  `${ROOT}/outside/o.txt`,
  `${ROOT}/data/toolhost.db`,
  `${ROOT}/data`,
  `${ROOT}/proj/../data/toolhost.db`,
];
const worldPath = pick(...worldPaths);
/** Plausible paths: tree names, `..`, `~`, absolute system paths, or a few segments of mixed text. */
export const plausiblePath: Gen<string> = weighted<string>(
  [4, treeName],
  [3, (r) => `${pathPrefix(r)}${segments(r).join("/")}`],
  [1, pick(".", "..", "~", "/", "/etc/passwd", "/proc/self/status", "/dev/null")],
  // Names of exactly 255 bytes are fine (the limit is not off by one).
  [1, pick("n".repeat(255), `sub/${"é".repeat(127)}x`, `new-${"€".repeat(83)}xy`)],
  // The tree itself, the denied directory, the outside directory and Toolhost's data directory.
  [1, (r) => inWorld(worldPath(r))],
);

/** A character of a given UTF-8 width (1 to 4 bytes). */
const wide = pick<[string, number]>(["x", 1], ["é", 2], ["€", 3], ["😀", 4]);
/** Byte counts just over a limit mostly (where off-by-one mistakes live), sometimes far over it. */
const over = (limit: number, far: number) => weighted([4, int(limit + 1, limit + 8)], [1, int(limit + 1, far)]);
const over255 = over(255, 2000);
/** One name longer than 255 UTF-8 bytes (up to ~2 KiB). */
const longName: Gen<string> = (r) => {
  const [c, bytes] = wide(r);
  return c.repeat(Math.ceil(over255(r) / bytes));
};
const longPathUnit = pick("a/", "ab/", "€/", "../", "./");
const over4095 = over(4095, 9000);
/** A path over 4,095 bytes made of short names. */
const longPath: Gen<string> = (r) => {
  const unit = longPathUnit(r);
  return unit.repeat(Math.ceil(over4095(r) / Buffer.byteLength(unit)));
};

function insertAt(base: string, piece: string, at: number): string {
  const i = base.length === 0 ? 0 : at % (base.length + 1);
  return `${base.slice(0, i)}${piece}${base.slice(i)}`;
}

const loneSurrogate = pick("\uD800", "\uDBFF", "\uDC00", "\uDFFF", "x\uD83D");
const longNameTail = pick("", "/", "/x");
/** A path-shaped string with a defect no path may have. */
export const defectivePath: Gen<string> = oneof<string>(
  pick("", " ", "\t", "\n  "),
  (r) => insertAt(plausiblePath(r), "\0", nat(r)),
  (r) => {
    const p = plausiblePath(r);
    return insertAt(p, loneSurrogate(r), nat(r));
  },
  (r) => {
    const p = plausiblePath(r);
    return `${p}/${longName(r)}${longNameTail(r)}`;
  },
  longPath,
);

/** Values of the wrong JSON type for a string argument (null is absent, so not among them). */
const notAString = oneof<unknown>(anyInt, finiteDouble, bool, arrayOf(cleanText, 0, 2), (r) => {
  const out: Record<string, string> = {};
  for (let n = r.nextInt(0, 2); n > 0; n--) out[cleanText(r)] = cleanText(r);
  return out;
});
const notABoolean = oneof<unknown>(anyInt, cleanText, arrayOf(bool, 0, 1));
const notAnInteger = oneof<unknown>(
  filter(finiteDouble, (n) => !Number.isInteger(n)),
  cleanText,
  bool,
);

const globSegments = arrayOf(oneof(segment, pick("*", "**", "?", "*.ts", "{a,b}")), 1, 3);
/** Plausible glob patterns. */
export const plausibleGlob: Gen<string> = oneof<string>(
  pick("*", "**", "**/*.ts", "sub/*", "*.{ts,md}", "!*.ts", "{a,b}", "[", "*.{ts", "{a,{b,c}}", ".hidden/*"),
  pick("sub/**/*.md", "**/*", "?.txt", "[ab]*", "!(a)*", "link-dir/*", "loop-a/*", "secret/*", "a.txt"),
  (r) => globSegments(r).join("/"),
);
/** Lengths over the 16,384 characters of a glob pattern: just over mostly, sometimes up to 70,000. */
const overGlobLimit = over(16_384, 70_000);
const globSurrogate = pick("\uD800", "\uDC00");
const slashTail = pick("/", "//", "/./");
const emptyNameHead = pick("a", "*", "sub");
const emptyNameMiddle = pick("//", "/*//");
const starUnit = pick("a", "?", "[ab]", "x.");
const longNameGlobTail = pick("", "/*", "/**/x");
const longGlobUnit = pick("*", "a", "{a,b}", "?");
/** A glob pattern with a defect every glob argument refuses. */
export const defectiveGlob: Gen<string> = oneof<string>(
  (r) => insertAt(plausibleGlob(r), "\0", nat(r)),
  (r) => {
    const g = plausibleGlob(r);
    return insertAt(g, globSurrogate(r), nat(r));
  },
  (r) => `${plausibleGlob(r).replace(/^!$/, "x")}${slashTail(r)}`,
  (r) => `${emptyNameHead(r)}${emptyNameMiddle(r)}b`,
  pick("!", "! ", "!  "),
  pick("+(a|aa)c", "*(a)", "sub/?(x)y", "@(a|b)", "!(a)*", "x!(y)"),
  (r) => {
    const k = r.nextInt(4, 12);
    return `${`*${starUnit(r)}`.repeat(k)}b`;
  },
  (r) => `${longName(r)}${longNameGlobTail(r)}`,
  (r) => {
    const u = longGlobUnit(r);
    return u.repeat(Math.ceil(overGlobLimit(r) / u.length));
  },
);

/** compiles()'s answers for short sources (a third of the drawn texts repeat: "", "a", "x*" …). */
const compileAnswers = new Map<string, boolean>();

/** Whether `source` compiles as a RegExp (its SyntaxError made without a stack trace: only the answer is used). */
function compiles(source: string): boolean {
  const known = compileAnswers.get(source);
  if (known !== undefined) return known;
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  let answer: boolean;
  try {
    new RegExp(source);
    answer = true;
  } catch {
    answer = false;
  } finally {
    Error.stackTraceLimit = limit;
  }
  if (source.length <= 4) {
    if (compileAnswers.size >= 100_000) compileAnswers.clear();
    compileAnswers.set(source, answer);
  }
  return answer;
}

/** Plausible JavaScript regular expressions (valid ones, and some that ripgrep cannot express). */
export const plausibleRegex: Gen<string> = oneof<string>(
  pick("alpha", "^#", "b$", "\\d+", "(?<=a)l", "(a)\\1", "[^]", "\\p{L}", "a|b", "x*", "^", "", ".", "\\bbeta"),
  filter(cleanText, compiles),
);
/** Lengths over the 32,768 characters of a regex: just over mostly, sometimes up to 60,000. */
const overRegexLimit = over(32_768, 60_000);
const regexBreaker = pick("(", "[", ")", "?*", "\\");
const longRegexUnit = pick("a", "ab", "x?");
/** A pattern the RegExp engine refuses: a syntax error, or too large to compile. */
export const defectiveRegex: Gen<string> = weighted<string>(
  [20, pick("(", "[", "*a", "a**", "\\", "(?<", "a{2,1}", "(?<n>a)(?<n>b)", "+", "[z-a]")],
  [20, (r) => `${plausibleRegex(r)}${regexBreaker(r)}`],
  [
    1,
    (r) => {
      const u = longRegexUnit(r);
      return u.repeat(Math.ceil(overRegexLimit(r) / u.length));
    },
  ],
);

const unknownKey = pick("paths", "file", "regex", "limit", "offset", "__proto__", "constructor", "x".repeat(500));

type Args = Record<string, unknown>;

const numberish = oneof<number>(int(1, 12), pick(1, 2, 5000, 2 ** 31, Number.MAX_SAFE_INTEGER, 1e300));
/** Printable ASCII text (fc.string()'s default units). */
const contentText = str((r) => String.fromCharCode(r.nextInt(0x20, 0x7e)), 20);

/** Optional keys of each tool with a plausible value (valid or not, but free of argument-text defects). */
function plausibleArgs(tool: FileTool): Gen<Args> {
  switch (tool) {
    case "read_file":
      return record(
        { path: plausiblePath },
        {
          startLine: numberish,
          maxLines: int(1, 5000),
          view: pick("text", "text", "text", "text", "hex", "base64"),
        },
      );
    case "file_read":
      return record({ path: plausiblePath }, { maxBytes: oneof<number>(int(0, 20), numberish) });
    case "write_file":
      return record({ path: plausiblePath, content: contentText }, { createDirectories: bool });
    case "file_write":
      return record({ path: plausiblePath, content: contentText });
    case "list_directory":
      return record({ path: plausiblePath });
    case "file_list":
      return record({ path: plausiblePath }, { recursive: bool });
    case "glob":
      return record({ pattern: plausibleGlob }, { cwd: plausiblePath });
    case "grep":
      return record({ pattern: plausibleRegex, path: plausiblePath }, { glob: plausibleGlob, caseInsensitive: bool });
    case "apply_patch":
      return record({ patch: plausiblePatch }, { path: plausiblePath });
  }
}

const patchOp = pick("Add File", "Update File", "Delete File");
const envelopeLineMark = pick("+", "-", " ", "@@ ");
const envelopeLines = arrayOf((q) => `${envelopeLineMark(q)}${cleanText(q)}`, 0, 4);
const diffLineMark = pick("+", "-", " ");
const diffLines = arrayOf((q) => `${diffLineMark(q)}${cleanText(q)}`, 1, 4);
/** Patches: envelopes and unified diffs over the tree's files and hostile paths, mostly malformed somewhere. */
export const plausiblePatch: Gen<string> = oneof<string>(
  (r) => {
    const op = patchOp(r);
    const path = plausiblePath(r);
    const lines = envelopeLines(r);
    return `*** Begin Patch\n*** ${op}: ${path}\n${lines.join("\n")}${bool(r) ? "\n*** End Patch" : ""}`;
  },
  (r) => {
    const path = plausiblePath(r);
    const lines = diffLines(r);
    return `--- a/${path}\n+++ b/${path}\n@@ -1,2 +1,2 @@\n${lines.join("\n")}\n`;
  },
  pick("@@ -1 +1 @@\n-alpha\n+ALPHA\n", "*** Begin Patch\n*** End Patch", "garbage", "@@\n-beta\n+gamma"),
  text,
);

const envelopePath = filter(defectivePath, (p) => p.trim() !== "" && !p.includes("\n"));
const diffPath = filter(defectivePath, (p) => p.trim() !== "" && !/[\n\t]/.test(p));
/** Patches whose only defect is a path argument text: every one must be refused as validation_failed. */
const defectivePatch: Gen<string> = oneof<string>(
  pick("", " ", "\n\t"),
  (r) => {
    const op = patchOp(r);
    const path = envelopePath(r);
    return `*** Begin Patch\n*** ${op}: ${path}\n${op === "Delete File" ? "" : "+x\n"}*** End Patch`;
  },
  (r) => {
    const path = diffPath(r);
    return `--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+x\n`;
  },
  pick("*** Begin Patch\n*** Add File: a\n+x", "no hunks here", "*** Begin Patch\nstray\n*** End Patch"),
);

/** The string arguments of each tool that name a path. */
const PATH_KEYS: Record<FileTool, string[]> = {
  read_file: ["path"],
  file_read: ["path"],
  write_file: ["path"],
  file_write: ["path"],
  list_directory: ["path"],
  file_list: ["path"],
  glob: ["cwd"],
  grep: ["path"],
  apply_patch: [],
};
const REQUIRED: Record<FileTool, string[]> = {
  read_file: ["path"],
  file_read: ["path"],
  write_file: ["path", "content"],
  file_write: ["path", "content"],
  list_directory: ["path"],
  file_list: ["path"],
  glob: ["pattern"],
  grep: ["pattern", "path"],
  apply_patch: ["patch"],
};

/** A defect applied to freshly drawn arguments (it may change them in place). */
type Fix = (args: Args) => Args;

const byteView = pick("hex", "base64");
const windowKey = pick("startLine", "maxLines");

/** One defect to apply to a tool's plausible arguments. */
function defects(tool: FileTool): Gen<Fix> {
  const set =
    (key: string, value: Gen<unknown>): Gen<Fix> =>
    (r) => {
      const v = value(r);
      return (args) => {
        args[key] = v;
        return args;
      };
    };
  const options: Gen<Fix>[] = [];
  for (const key of PATH_KEYS[tool]) options.push(set(key, defectivePath), set(key, notAString));
  const drop =
    (key: string): Gen<Fix> =>
    () =>
    (args) => {
      const { [key]: _dropped, ...rest } = args;
      return rest;
    };
  for (const key of REQUIRED[tool]) options.push(drop(key));
  const unknownValue = oneof<unknown>(cleanText, anyInt);
  options.push((r) => {
    const key = unknownKey(r);
    const value = unknownValue(r);
    return (args) => Object.defineProperty(args, key, { value, enumerable: true, writable: true, configurable: true });
  });
  switch (tool) {
    case "read_file":
      options.push(
        set("startLine", oneof<unknown>(int(-0x80000000, 0), notAnInteger)),
        set("maxLines", oneof<unknown>(int(-0x80000000, 0), int(5001, 0x7fffffff), pick(1e300), notAnInteger)),
        set("view", oneof<unknown>(pick("TEXT", "", "utf8", "raw"), notAString)),
        (r) => {
          const view = byteView(r);
          const key = windowKey(r);
          return (args) => {
            args.view = view;
            args[key] = 1;
            return args;
          };
        },
      );
      break;
    case "file_read":
      options.push(set("maxBytes", oneof<unknown>(int(-0x80000000, -1), notAnInteger)));
      break;
    case "write_file":
      options.push(set("content", notAString), set("createDirectories", notABoolean));
      break;
    case "file_write":
      options.push(set("content", notAString));
      break;
    case "file_list":
      options.push(set("recursive", notABoolean));
      break;
    case "glob":
      options.push(
        set("pattern", defectiveGlob),
        set("pattern", pick("", "  ", "/etc/*", "../*", "a/../../b", "!/x")),
        set("pattern", notAString),
      );
      break;
    case "grep":
      options.push(
        set("pattern", defectiveRegex),
        set("pattern", notAString),
        set("glob", defectiveGlob),
        set("glob", notAString),
        set("caseInsensitive", notABoolean),
      );
      break;
    case "apply_patch": {
      const hunkPath = filter(defectivePath, (p) => p.trim() !== "");
      options.push(
        set("patch", defectivePatch),
        set("patch", notAString),
        // A defective `path` is used only by hunks without file headers.
        (r) => {
          const path = hunkPath(r);
          return (args) => ({ ...args, path, patch: "@@ -1 +1 @@\n-alpha\n+ALPHA\n" });
        },
      );
      break;
    }
  }
  return oneof(...options);
}

/** What a host may pass: the object itself, or the JSON text a model produced. */
function asSent(args: Gen<Args>): Gen<unknown> {
  return (r) => {
    const a = args(r);
    return r.nextInt(0, 9) < 3 ? JSON.stringify(a) : a;
  };
}

/** Arguments with at least one defect (see the module comment); also raw texts that are not a JSON object. */
export function defective(tool: FileTool): fc.Arbitrary<unknown> {
  return arbitrary(defectiveGen(tool));
}

/**
 * Batches of `size` defective arguments (each drawn as {@link defective} draws one): a property over batches checks
 * as many arguments with a fraction of fast-check's per-run work; a failing batch shrinks to the one argument.
 */
export function defectiveBatch(tool: FileTool, size: number): fc.Arbitrary<unknown[]> {
  return arbitrary(arrayOf(defectiveGen(tool), size, size));
}

function defectiveGen(tool: FileTool): Gen<unknown> {
  const plausible = plausibleArgs(tool);
  const fixes = arrayOf(defects(tool), 1, 2);
  const broken: Gen<Args> = (r) => {
    let out = plausible(r);
    for (const fix of fixes(r)) out = fix(out);
    return out;
  };
  return weighted<unknown>(
    [30, asSent(broken)],
    [1, pick("[1]", '"path"', "42", "{", '{"path": }', "true", "{'path': 'a'}")],
  );
}

/** Arguments that really execute (valid and hostile alike). */
export function free(tool: FileTool): fc.Arbitrary<unknown> {
  return arbitrary(asSent(plausibleArgs(tool)));
}
