/**
 * fast-check arbitraries for the file tools' arguments, in two families:
 *
 * - `defective(tool)`: argument objects with at least one defect the tool must refuse before touching the
 *   filesystem (NUL bytes, lone surrogates, names over 255 bytes, paths over 4,095 bytes, empty strings, glob
 *   patterns ending in "/" or over the length limit, invalid or oversized regexes, wrong types, numbers out of range,
 *   unknown or missing keys, text that is not a JSON object). Every one must end as `validation_failed`. They are
 *   cheap, so they carry the 100,000-per-tool count.
 * - `free(tool)`: arguments drawn from the tree's real names and hostile text alike (symbolic links inside, out,
 *   dangling and looping, the denied directory, Toolhost's data directory, directories given as files, `..`, `~`,
 *   huge numbers), which really execute. None may end as an unclassified `execution_failed`.
 */
import fc from "fast-check";
import { type FileTool, inWorld, ROOT, TREE_NAMES } from "./tree.js";

/** Any UTF-16 code unit, lone surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
/** Characters that mean something to paths, globs, regexes, patches or JSON. */
const special = fc.constantFrom(
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
const letter = fc.constantFrom("a", "b", "x", "A", "_", "1");
/** Short text mixing letters, specials and arbitrary code units. */
export const text = fc.string({
  unit: fc.oneof(
    { weight: 4, arbitrary: letter },
    { weight: 3, arbitrary: special },
    { weight: 1, arbitrary: codeUnit },
  ),
  maxLength: 10,
});
/** Short text without NUL or lone surrogates (what passes the text checks). */
const cleanText = fc.string({
  unit: fc.oneof({ weight: 4, arbitrary: letter }, { weight: 3, arbitrary: special }),
  maxLength: 10,
});

const treeName = fc.constantFrom(...TREE_NAMES, "new.txt", "sub/new.ts", "nope", "sub/deep");
const segment = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom("a.txt", "sub", "deep", "b.ts", "secret", "link-dir", "loop-a", "new") },
  { weight: 3, arbitrary: cleanText },
  { weight: 1, arbitrary: fc.constantFrom("", ".", "..", "~") },
);
/** Plausible paths: tree names, `..`, `~`, absolute system paths, or a few segments of mixed text. */
export const plausiblePath = fc.oneof(
  { weight: 4, arbitrary: treeName },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom("", "", "./", "/", "~/", "../", "sub/"), fc.array(segment, { minLength: 1, maxLength: 4 }))
      .map(([prefix, parts]) => `${prefix}${parts.join("/")}`),
  },
  { weight: 1, arbitrary: fc.constantFrom(".", "..", "~", "/", "/etc/passwd", "/proc/self/status", "/dev/null") },
  // Names of exactly 255 bytes are fine (the limit is not off by one).
  { weight: 1, arbitrary: fc.constantFrom("n".repeat(255), `sub/${"é".repeat(127)}x`, `new-${"€".repeat(83)}xy`) },
  // Absolute paths into the world (ROOT becomes its directory as the value is generated): the tree itself, the
  // denied directory, the outside directory and Toolhost's data directory.
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        `${ROOT}/proj/a.txt`,
        `${ROOT}/proj/sub`,
        `${ROOT}/proj/secret/s.txt`,
        `${ROOT}/outside/o.txt`,
        `${ROOT}/data/toolhost.db`,
        `${ROOT}/data`,
        `${ROOT}/proj/../data/toolhost.db`,
      )
      .map(inWorld),
  },
);

/** A character of a given UTF-8 width (1 to 4 bytes). */
const wide = fc.constantFrom(["x", 1], ["é", 2], ["€", 3], ["😀", 4]) as fc.Arbitrary<[string, number]>;
/** Byte counts just over a limit mostly (where off-by-one mistakes live), sometimes far over it. */
const over = (limit: number, far: number) =>
  fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: limit + 1, max: limit + 8 }) },
    { weight: 1, arbitrary: fc.integer({ min: limit + 1, max: far }) },
  );
/** One name longer than 255 UTF-8 bytes (up to ~2 KiB). */
const longName = fc.tuple(wide, over(255, 2000)).map(([[c, bytes], total]) => c.repeat(Math.ceil(total / bytes)));
/** A path over 4,095 bytes made of short names. */
const longPath = fc
  .tuple(fc.constantFrom("a/", "ab/", "€/", "../", "./"), over(4095, 9000))
  .map(([unit, bytes]) => unit.repeat(Math.ceil(bytes / Buffer.byteLength(unit))));

function insertAt(base: string, piece: string, at: number): string {
  const i = base.length === 0 ? 0 : at % (base.length + 1);
  return `${base.slice(0, i)}${piece}${base.slice(i)}`;
}

/** A path-shaped string with a defect no path may have. */
export const defectivePath = fc.oneof(
  fc.constantFrom("", " ", "\t", "\n  "),
  fc.tuple(plausiblePath, fc.nat()).map(([p, at]) => insertAt(p, "\0", at)),
  fc
    .tuple(plausiblePath, fc.constantFrom("\uD800", "\uDBFF", "\uDC00", "\uDFFF", "x\uD83D"), fc.nat())
    .map(([p, s, at]) => insertAt(p, s, at)),
  fc.tuple(plausiblePath, longName, fc.constantFrom("", "/", "/x")).map(([p, n, tail]) => `${p}/${n}${tail}`),
  longPath,
);

/** Values of the wrong JSON type for a string argument (null is absent, so not among them). */
const notAString = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.array(cleanText, { maxLength: 2 }),
  fc.dictionary(cleanText, cleanText, { maxKeys: 2 }),
);
const notABoolean = fc.oneof(fc.integer(), cleanText, fc.array(fc.boolean(), { maxLength: 1 }));
const notAnInteger = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n)),
  cleanText,
  fc.boolean(),
);

/** Plausible glob patterns. */
export const plausibleGlob = fc.oneof(
  fc.constantFrom("*", "**", "**/*.ts", "sub/*", "*.{ts,md}", "!*.ts", "{a,b}", "[", "*.{ts", "{a,{b,c}}", ".hidden/*"),
  fc.constantFrom("sub/**/*.md", "**/*", "?.txt", "[ab]*", "!(a)*", "link-dir/*", "loop-a/*", "secret/*", "a.txt"),
  fc
    .array(fc.oneof(segment, fc.constantFrom("*", "**", "?", "*.ts", "{a,b}")), { minLength: 1, maxLength: 3 })
    .map((s) => s.join("/")),
);
/** A glob pattern with a defect every glob argument refuses. */
export const defectiveGlob = fc.oneof(
  fc.tuple(plausibleGlob, fc.nat()).map(([g, at]) => insertAt(g, "\0", at)),
  fc.tuple(plausibleGlob, fc.constantFrom("\uD800", "\uDC00"), fc.nat()).map(([g, s, at]) => insertAt(g, s, at)),
  fc.tuple(plausibleGlob, fc.constantFrom("/", "//", "/./")).map(([g, tail]) => `${g.replace(/^!$/, "x")}${tail}`),
  fc.tuple(fc.constantFrom("a", "*", "sub"), fc.constantFrom("//", "/*//")).map(([a, mid]) => `${a}${mid}b`),
  fc.constantFrom("!", "! ", "!  "),
  fc.constantFrom("+(a|aa)c", "*(a)", "sub/?(x)y", "@(a|b)", "!(a)*", "x!(y)"),
  fc
    .tuple(fc.integer({ min: 4, max: 12 }), fc.constantFrom("a", "?", "[ab]", "x."))
    .map(([k, mid]) => `${`*${mid}`.repeat(k)}b`),
  fc.tuple(longName, fc.constantFrom("", "/*", "/**/x")).map(([n, tail]) => `${n}${tail}`),
  fc
    .tuple(fc.constantFrom("*", "a", "{a,b}", "?"), fc.integer({ min: 16_385, max: 70_000 }))
    .map(([u, n]) => u.repeat(Math.ceil(n / u.length))),
);

/** Plausible JavaScript regular expressions (valid ones, and some that ripgrep cannot express). */
export const plausibleRegex = fc.oneof(
  fc.constantFrom(
    "alpha",
    "^#",
    "b$",
    "\\d+",
    "(?<=a)l",
    "(a)\\1",
    "[^]",
    "\\p{L}",
    "a|b",
    "x*",
    "^",
    "",
    ".",
    "\\bbeta",
  ),
  cleanText.filter((s) => {
    try {
      new RegExp(s);
      return true;
    } catch {
      return false;
    }
  }),
);
/** A pattern the RegExp engine refuses: a syntax error, or too large to compile. */
export const defectiveRegex = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.constantFrom("(", "[", "*a", "a**", "\\", "(?<", "a{2,1}", "(?<n>a)(?<n>b)", "+", "[z-a]"),
  },
  {
    weight: 20,
    arbitrary: fc.tuple(plausibleRegex, fc.constantFrom("(", "[", ")", "?*", "\\")).map(([r, bad]) => `${r}${bad}`),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("a", "ab", "x?"), fc.integer({ min: 40_000, max: 60_000 }))
      .map(([u, n]) => u.repeat(Math.ceil(n / u.length))),
  },
);

const unknownKey = fc.constantFrom(
  "paths",
  "file",
  "regex",
  "limit",
  "offset",
  "__proto__",
  "constructor",
  "x".repeat(500),
);

type Args = Record<string, unknown>;

/** Optional keys of each tool with a plausible value (valid or not, but free of argument-text defects). */
function plausibleArgs(tool: FileTool): fc.Arbitrary<Args> {
  const numberish = fc.oneof(
    fc.integer({ min: 1, max: 12 }),
    fc.constantFrom(1, 2, 5000, 2 ** 31, Number.MAX_SAFE_INTEGER, 1e300),
  );
  switch (tool) {
    case "read_file":
      return fc.record(
        {
          path: plausiblePath,
          startLine: numberish,
          maxLines: fc.integer({ min: 1, max: 5000 }),
          view: fc.constantFrom("text", "text", "text", "text", "hex", "base64"),
        },
        { requiredKeys: ["path"] },
      );
    case "file_read":
      return fc.record({ path: plausiblePath, maxBytes: fc.oneof(fc.nat(20), numberish) }, { requiredKeys: ["path"] });
    case "write_file":
      return fc.record(
        { path: plausiblePath, content: fc.string({ maxLength: 20 }), createDirectories: fc.boolean() },
        { requiredKeys: ["path", "content"] },
      );
    case "file_write":
      return fc.record(
        { path: plausiblePath, content: fc.string({ maxLength: 20 }) },
        { requiredKeys: ["path", "content"] },
      );
    case "list_directory":
      return fc.record({ path: plausiblePath });
    case "file_list":
      return fc.record({ path: plausiblePath, recursive: fc.boolean() }, { requiredKeys: ["path"] });
    case "glob":
      return fc.record({ pattern: plausibleGlob, cwd: plausiblePath }, { requiredKeys: ["pattern"] });
    case "grep":
      return fc.record(
        { pattern: plausibleRegex, path: plausiblePath, glob: plausibleGlob, caseInsensitive: fc.boolean() },
        { requiredKeys: ["pattern", "path"] },
      );
    case "apply_patch":
      return fc.record({ patch: plausiblePatch, path: plausiblePath }, { requiredKeys: ["patch"] });
  }
}

/** Patches: envelopes and unified diffs over the tree's files and hostile paths, mostly malformed somewhere. */
export const plausiblePatch = fc.oneof(
  fc
    .tuple(
      fc.constantFrom("Add File", "Update File", "Delete File"),
      plausiblePath,
      fc.array(fc.tuple(fc.constantFrom("+", "-", " ", "@@ "), cleanText), { maxLength: 4 }),
      fc.boolean(),
    )
    .map(
      ([op, path, lines, end]) =>
        `*** Begin Patch\n*** ${op}: ${path}\n${lines.map(([m, t]) => `${m}${t}`).join("\n")}${end ? "\n*** End Patch" : ""}`,
    ),
  fc
    .tuple(plausiblePath, fc.array(fc.tuple(fc.constantFrom("+", "-", " "), cleanText), { minLength: 1, maxLength: 4 }))
    .map(
      ([path, lines]) =>
        `--- a/${path}\n+++ b/${path}\n@@ -1,2 +1,2 @@\n${lines.map(([m, t]) => `${m}${t}`).join("\n")}\n`,
    ),
  fc.constantFrom("@@ -1 +1 @@\n-alpha\n+ALPHA\n", "*** Begin Patch\n*** End Patch", "garbage", "@@\n-beta\n+gamma"),
  text,
);

/** Patches whose only defect is a path argument text: every one must be refused as validation_failed. */
const defectivePatch = fc.oneof(
  fc.constantFrom("", " ", "\n\t"),
  fc
    .tuple(
      fc.constantFrom("Add File", "Update File", "Delete File"),
      defectivePath.filter((p) => p.trim() !== "" && !p.includes("\n")),
    )
    .map(([op, path]) => `*** Begin Patch\n*** ${op}: ${path}\n${op === "Delete File" ? "" : "+x\n"}*** End Patch`),
  defectivePath
    .filter((p) => p.trim() !== "" && !/[\n\t]/.test(p))
    .map((path) => `--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+x\n`),
  fc.constantFrom("*** Begin Patch\n*** Add File: a\n+x", "no hunks here", "*** Begin Patch\nstray\n*** End Patch"),
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

/** One defect to apply to a tool's plausible arguments. */
function defects(tool: FileTool): fc.Arbitrary<(args: Args) => Args> {
  const set = (key: string, value: fc.Arbitrary<unknown>) => value.map((v) => (args: Args) => ({ ...args, [key]: v }));
  const options: fc.Arbitrary<(args: Args) => Args>[] = [];
  for (const key of PATH_KEYS[tool]) options.push(set(key, defectivePath), set(key, notAString));
  const drop = (key: string) =>
    fc.constant((args: Args) => Object.fromEntries(Object.entries(args).filter(([k]) => k !== key)));
  for (const key of REQUIRED[tool]) options.push(drop(key));
  options.push(
    fc.tuple(unknownKey, fc.oneof(cleanText, fc.integer())).map(([key, value]) => (args: Args) => {
      const out = { ...args };
      Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
      return out;
    }),
  );
  switch (tool) {
    case "read_file":
      options.push(
        set("startLine", fc.oneof(fc.integer({ max: 0 }), notAnInteger)),
        set("maxLines", fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 5001 }), fc.constant(1e300), notAnInteger)),
        set("view", fc.oneof(fc.constantFrom("TEXT", "", "utf8", "raw"), notAString)),
        fc
          .tuple(fc.constantFrom("hex", "base64"), fc.constantFrom("startLine", "maxLines"))
          .map(([view, key]) => (args: Args) => ({ ...args, view, [key]: 1 })),
      );
      break;
    case "file_read":
      options.push(set("maxBytes", fc.oneof(fc.integer({ max: -1 }), notAnInteger)));
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
        set("pattern", fc.constantFrom("", "  ", "/etc/*", "../*", "a/../../b", "!/x")),
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
    case "apply_patch":
      options.push(
        set("patch", defectivePatch),
        set("patch", notAString),
        // A defective `path` is used only by hunks without file headers.
        defectivePath
          .filter((p) => p.trim() !== "")
          .map((path) => (args: Args) => ({ ...args, path, patch: "@@ -1 +1 @@\n-alpha\n+ALPHA\n" })),
      );
      break;
  }
  return fc.oneof(...options);
}

/** What a host may pass: the object itself, or the JSON text a model produced. */
function asSent(args: fc.Arbitrary<Args>): fc.Arbitrary<unknown> {
  return fc.tuple(args, fc.nat(9)).map(([a, k]) => (k < 3 ? JSON.stringify(a) : a));
}

/** Arguments with at least one defect (see the module comment); also raw texts that are not a JSON object. */
export function defective(tool: FileTool): fc.Arbitrary<unknown> {
  const broken = fc
    .tuple(plausibleArgs(tool), fc.array(defects(tool), { minLength: 1, maxLength: 2 }))
    .map(([args, fixes]) => {
      let out = args;
      for (const fix of fixes) out = fix(out);
      return out;
    });
  return fc.oneof(
    { weight: 30, arbitrary: asSent(broken) },
    { weight: 1, arbitrary: fc.constantFrom("[1]", '"path"', "42", "{", '{"path": }', "true", "{'path': 'a'}") },
  );
}

/** Arguments that really execute (valid and hostile alike). */
export function free(tool: FileTool): fc.Arbitrary<unknown> {
  return asSent(plausibleArgs(tool));
}
