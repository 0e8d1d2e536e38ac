/**
 * Parsing of the two patch formats apply_patch accepts, into one model of file operations:
 * - unified diff, with or without git headers (`diff --git`, `index`, `new file mode`, `rename from/to`), several
 *   files and hunks, `/dev/null` for added and deleted files, or bare hunks for a single target given separately;
 * - the `*** Begin Patch` envelope OpenAI models emit for their apply_patch tool (Add File, Delete File, Update
 *   File with optional Move to, `@@` hunks located by context, `*** End of File`).
 *
 * A tolerant pre-pass absorbs the usual model slips: hunk counts that do not match the body are recounted, a bare
 * `@@` (no numbers) is located by context, a context line that lost its leading space (including an empty line)
 * is taken as context. As the format's reference implementation does, envelope marker lines are recognized with
 * surrounding spaces or tabs, and a patch wrapped in a shell heredoc (`apply_patch <<'EOF'` … `EOF`), as models
 * trained on a shell-invoked tool send it, is unwrapped first.
 */
import { argumentRefusal, clip, quote, ToolArgumentError, ToolError, ToolRefusal } from "../../core/errors.js";
import { pathArgumentProblem } from "../../core/path-policy.js";

/** One hunk: the lines it expects (context and removals) and what replaces them. */
export interface Hunk {
  /** 1-based line where the old side starts according to the header; undefined when unknown. */
  oldStart?: number;
  /**
   * Anchor texts from envelope `@@ anchor` headers, outermost first (`@@ class Second` then `@@ def target():`):
   * each is searched after the previous one, and the hunk is located after the last.
   */
  anchors?: string[];
  /** The body in order: " " context, "-" removed, "+" added. */
  lines: { op: " " | "-" | "+"; text: string; loose?: boolean }[];
  /** The old side ends without a final newline ("\ No newline at end of file" after an old-side line). */
  oldNoEol: boolean;
  /** The new side ends without a final newline. */
  newNoEol: boolean;
  /** Envelope `*** End of File`: the hunk must match at the end of the file. */
  atEof: boolean;
}

/** One file operation of a patch. */
export type FileOp =
  | { kind: "add"; path: string; hunks: Hunk[] }
  | { kind: "delete"; path: string }
  | { kind: "update"; path: string; moveTo?: string; hunks: Hunk[] };

/**
 * Drops trailing empty lines that carried no diff marker: usually the blank line after a hunk, and dropping
 * context never changes what a hunk replaces.
 */
function dropLooseTail(hunk: Hunk): void {
  while (hunk.lines.length > 0) {
    const last = hunk.lines[hunk.lines.length - 1]!;
    if (!(last.loose && last.text.trim() === "")) break;
    hunk.lines.pop();
  }
}

function fail(message: string): never {
  throw new ToolArgumentError(`Invalid patch: ${message}`, { argument: "patch", rule: "patch_syntax" });
}

const BEGIN = "*** Begin Patch";
const END = "*** End Patch";
/** File-operation headers of the envelope (matched on the trimmed line). */
const FILE_HEADER = /^\*\*\* (Add File|Delete File|Update File): (.+)$/;
const HEREDOC_START = /^(?:apply_patch|applypatch)\s+<<-?\s*(['"]?)([A-Za-z_][\w-]*)\1\s*$/;

/**
 * Removes a shell heredoc wrapper (`apply_patch <<'EOF'` first, the delimiter alone last, surrounding blank lines
 * ignored); returns the lines unchanged when there is none.
 */
export function unwrapHeredoc(lines: string[]): string[] {
  const first = lines.findIndex((l) => l.trim() !== "");
  if (first < 0) return lines;
  const m = HEREDOC_START.exec(lines[first]!.trim());
  if (!m) return lines;
  let last = lines.length - 1;
  while (last > first && lines[last]!.trim() === "") last--;
  if (last <= first || lines[last]!.trim() !== m[2]) return lines;
  return lines.slice(first + 1, last);
}

/** Parses a patch (either format). `defaultPath` is the target of header-less hunks. */
export function parsePatch(patch: string, defaultPath?: string): FileOp[] {
  const text = patch.replace(/\r\n/g, "\n");
  let lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  lines = unwrapHeredoc(lines);
  const first = lines.findIndex((l) => l.trim() !== "");
  if (first >= 0 && lines[first]!.trim() === BEGIN) return parseEnvelope(lines, first);
  const envelopeLike = lines.findIndex((l) => l.trim() === END || FILE_HEADER.test(l.trim()));
  if (envelopeLike >= 0 && !lines.some((l) => /^@@ -\d/.test(l) || l.startsWith("--- "))) {
    fail(
      `expected "${BEGIN}" as the first line of the envelope, but the first line is ${quote(lines[first] ?? "")} (line ${first + 1}). Start the patch with "${BEGIN}" and end it with "${END}".`,
    );
  }
  return parseUnified(lines, defaultPath);
}

/**
 * The 1-based line where a unified-diff hunk header (`@@ -l,n +l,n @@`, text after it allowed) says the old side
 * starts (`-l,0`, an insertion, starts after line l); undefined for any other `@@` line.
 */
function unifiedHunkStart(line: string): number | undefined {
  const m = /^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+/.exec(line);
  if (!m) return undefined;
  const start = Number(m[1]);
  const count = m[2] === undefined ? 1 : Number(m[2]);
  return count === 0 ? start + 1 : Math.max(1, start);
}

function parseEnvelope(all: string[], beginAt: number): FileOp[] {
  let endAt = all.length - 1;
  while (endAt > beginAt && all[endAt]!.trim() === "") endAt--;
  if (endAt <= beginAt || all[endAt]!.trim() !== END) {
    fail(
      `the envelope has no "${END}" line: expected it as the last line, after line ${endAt + 1} (${quote(all[endAt] ?? "")}). End the patch with a line "${END}".`,
    );
  }
  const lines = all.slice(beginAt + 1, endAt);
  const ops: FileOp[] = [];
  let i = 0;
  const isHeader = (line: string) => {
    const t = line.trim();
    return FILE_HEADER.test(t) || t === END;
  };
  const newHunk = (): Hunk => ({ lines: [], oldNoEol: false, newNoEol: false, atEof: false });
  const readHunks = (): Hunk[] => {
    const hunks: Hunk[] = [];
    let current: Hunk | null = null;
    while (i < lines.length) {
      const line = lines[i]!;
      if (isHeader(line)) break;
      i++;
      if (line.trim() === "*** End of File") {
        if (current) current.atEof = true;
        continue;
      }
      if (line.startsWith("@@")) {
        const anchor = line.slice(2).trim();
        // Stacked headers with no body between them narrow the same hunk, outermost first.
        if (!current || current.lines.length > 0 || current.atEof) {
          current = newHunk();
          hunks.push(current);
        }
        // A unified-diff header (`@@ -12,7 +12,8 @@`, models write it here too) is a position hint, as in a
        // unified diff: the hunk is looked for there first, then by its context. Never an anchor text to find.
        const start = unifiedHunkStart(line);
        if (start !== undefined) current.oldStart = start;
        else if (anchor) current.anchors = [...(current.anchors ?? []), anchor];
        continue;
      }
      if (!current) {
        current = newHunk();
        hunks.push(current);
      }
      const op = line[0];
      if (op === "+" || op === "-" || op === " ") current.lines.push({ op, text: line.slice(1) });
      else current.lines.push({ op: " ", text: line, loose: true }); // a context line that lost its leading space
    }
    for (const h of hunks) dropLooseTail(h);
    return hunks.filter((h) => h.lines.length > 0);
  };
  while (i < lines.length) {
    const line = lines[i]!;
    const trimmed = line.trim();
    i++;
    if (trimmed === "") continue;
    if (trimmed === END) break;
    const header = FILE_HEADER.exec(trimmed);
    if (header?.[1] === "Add File") {
      const body = newHunk();
      while (i < lines.length && !isHeader(lines[i]!)) {
        const l = lines[i++]!;
        body.lines.push({ op: "+", text: l.startsWith("+") ? l.slice(1) : l });
      }
      ops.push({ kind: "add", path: header[2]!.trim(), hunks: [body] });
      continue;
    }
    if (header?.[1] === "Delete File") {
      ops.push({ kind: "delete", path: header[2]!.trim() });
      continue;
    }
    if (header?.[1] === "Update File") {
      const op: FileOp = { kind: "update", path: header[2]!.trim(), hunks: [] };
      const move = /^\*\*\* Move to: (.+)$/.exec((lines[i] ?? "").trim());
      if (move) {
        op.moveTo = move[1]!.trim();
        i++;
      }
      op.hunks = readHunks();
      if (op.hunks.length === 0 && !op.moveTo) {
        fail(
          `"*** Update File: ${clip(op.path)}" has no hunks: expected "@@" and "-"/"+"/" " lines after line ${beginAt + i + 1}.`,
        );
      }
      ops.push(op);
      continue;
    }
    fail(
      `unexpected line ${quote(line)} (line ${beginAt + i + 1}) in a "${BEGIN}" envelope; expected "*** Add File: <path>", "*** Delete File: <path>", "*** Update File: <path>" or "${END}".`,
    );
  }
  if (ops.length === 0) fail("the envelope holds no file operations.");
  return ops;
}

/** The escapes of git's C-style quoted paths (besides octal `\NNN` bytes and `\"` / `\\`). */
const GIT_ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13 };

/**
 * Reads one path token of a git header at `text[from]`: a C-style quoted path (`"caf\303\251.txt"`: git quotes
 * names with non-ASCII bytes, control characters, `"` or `\` unless core.quotePath is off; octal escapes are UTF-8
 * bytes), or, unquoted, everything up to `stop` (or the end). Returns the path and where the token ended; a quote
 * never closed is read as unquoted text.
 */
function gitPathToken(text: string, from = 0, stop?: RegExp): { path: string; end: number } {
  if (text[from] === '"') {
    const bytes: number[] = [];
    for (let i = from + 1; i < text.length; i++) {
      const c = text[i]!;
      if (c === '"') return { path: Buffer.from(bytes).toString("utf8"), end: i + 1 };
      if (c !== "\\") {
        bytes.push(...Buffer.from(c, "utf8"));
        continue;
      }
      const next = text[++i] ?? "";
      const octal = /^[0-7]{3}/.exec(text.slice(i, i + 3));
      if (octal) {
        bytes.push(Number.parseInt(octal[0], 8) & 0xff);
        i += 2;
      } else if (next in GIT_ESCAPES) bytes.push(GIT_ESCAPES[next]!);
      else bytes.push(...Buffer.from(next, "utf8"));
    }
  }
  const rest = text.slice(from);
  const at = stop ? rest.search(stop) : -1;
  return { path: at < 0 ? rest : rest.slice(0, at), end: at < 0 ? text.length : from + at };
}

/** A `---` / `+++` header's path: unquoted, without a trailing timestamp and the `a/` / `b/` prefix; null for /dev/null. */
function headerPath(raw: string): string | null {
  const text = raw.trim();
  let p = text.startsWith('"') ? gitPathToken(text).path : text.replace(/\t.*$/, "").trim();
  if (p === "/dev/null") return null;
  if (p.startsWith("a/") || p.startsWith("b/")) p = p.slice(2);
  return p;
}

/** The two paths of a `diff --git a/x b/y` line (each may be quoted), without their prefixes; undefined when unreadable. */
function gitDiffPaths(line: string): { old: string; new: string } | undefined {
  const rest = line.slice("diff --git ".length);
  if (!rest.includes('"')) {
    // Unquoted names may hold spaces: split at the " b/" that gives two equal names (no rename), else the first.
    const splits = [...rest.matchAll(/ b\//g)].map((m) => m.index);
    const pick = splits.find((at) => rest.slice(0, at) === `a/${rest.slice(at + 3)}`) ?? splits[0];
    if (pick !== undefined && rest.startsWith("a/")) return { old: rest.slice(2, pick), new: rest.slice(pick + 3) };
    const m = /^(\S+) (\S+)$/.exec(rest);
    return m ? { old: m[1]!, new: m[2]! } : undefined;
  }
  const first = gitPathToken(rest, 0, / (?=b\/|")/);
  const second = gitPathToken(rest, first.end + 1);
  const strip = (p: string, prefix: string) => (p.startsWith(prefix) ? p.slice(2) : p);
  return { old: strip(first.path, "a/"), new: strip(second.path, "b/") };
}

function parseUnified(lines: string[], defaultPath?: string): FileOp[] {
  const ops: FileOp[] = [];
  let oldPath: string | null | undefined;
  let newPath: string | null | undefined;
  let gitOld: string | undefined;
  let gitNew: string | undefined;
  let renameFrom: string | undefined;
  let renameTo: string | undefined;
  let deleted = false;
  let created = false;
  let hunks: Hunk[] = [];
  let sawHeader = false;
  let i = 0;
  const flush = () => {
    if (!sawHeader && hunks.length === 0) return;
    const from = oldPath === undefined ? (renameFrom ?? gitOld) : oldPath;
    const to = newPath === undefined ? (renameTo ?? gitNew) : newPath;
    if (from === undefined && to === undefined) {
      if (!defaultPath) fail('the hunks name no file (no "--- a/…" / "+++ b/…" headers); pass "path" too.');
      ops.push({ kind: "update", path: defaultPath, hunks });
    } else if (from === null || (created && to)) {
      ops.push({ kind: "add", path: to!, hunks });
    } else if (to === null || deleted) {
      ops.push({ kind: "delete", path: from! });
    } else {
      const op: FileOp = { kind: "update", path: from!, hunks };
      if (to && to !== from) op.moveTo = to;
      ops.push(op);
    }
    oldPath = newPath = undefined;
    gitOld = gitNew = renameFrom = renameTo = undefined;
    deleted = created = false;
    hunks = [];
    sawHeader = false;
  };
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.startsWith("diff --git ")) {
      flush();
      sawHeader = true;
      const paths = gitDiffPaths(line);
      if (paths) {
        gitOld = paths.old;
        gitNew = paths.new;
      }
      i++;
      continue;
    }
    if (line.startsWith("--- ") && (lines[i + 1] ?? "").startsWith("+++ ")) {
      if (hunks.length > 0 || oldPath !== undefined) flush();
      sawHeader = true;
      oldPath = headerPath(line.slice(4));
      newPath = headerPath(lines[i + 1]!.slice(4));
      i += 2;
      continue;
    }
    // Mode 120000 is a symbolic link (its "content" is the target) and 160000 a submodule: writing either as a regular
    // file would not be what the patch says.
    if (/^(new file mode|new mode|old mode|deleted file mode) 1[26]0000\s*$/.test(line)) {
      fail(
        `"${line.trim()}" makes a symbolic link or a submodule, which apply_patch does not create; use the shell (ln -s) or git instead.`,
      );
    }
    if (/^(index |similarity index |dissimilarity index |old mode |new mode |copy from |copy to )/.test(line)) {
      i++;
      continue;
    }
    if (line.startsWith("new file mode")) {
      created = true;
      i++;
      continue;
    }
    if (line.startsWith("deleted file mode")) {
      deleted = true;
      i++;
      continue;
    }
    if (line.startsWith("rename from ")) {
      renameFrom = gitPathToken(line.slice(12).trim()).path;
      i++;
      continue;
    }
    if (line.startsWith("rename to ")) {
      renameTo = gitPathToken(line.slice(10).trim()).path;
      i++;
      continue;
    }
    if (line.startsWith("Binary files ") || line.startsWith("GIT binary patch")) {
      fail("binary patches are not supported; write the file with write_file instead.");
    }
    if (line.startsWith("@@")) {
      const hunk: Hunk = { lines: [], oldNoEol: false, newNoEol: false, atEof: false };
      const start = unifiedHunkStart(line);
      if (start !== undefined) hunk.oldStart = start;
      i++;
      while (i < lines.length) {
        const l = lines[i]!;
        if (l.startsWith("@@") || l.startsWith("diff --git ")) break;
        if (l.startsWith("--- ") && (lines[i + 1] ?? "").startsWith("+++ ")) break;
        if (l.startsWith("\\")) {
          const last = hunk.lines[hunk.lines.length - 1];
          if (last?.op === "-") hunk.oldNoEol = true;
          else if (last?.op === "+") hunk.newNoEol = true;
          else if (last) {
            hunk.oldNoEol = true;
            hunk.newNoEol = true;
          }
          i++;
          continue;
        }
        const op = l[0];
        if (op === " " || op === "-" || op === "+") hunk.lines.push({ op, text: l.slice(1) });
        else hunk.lines.push({ op: " ", text: l, loose: true }); // lost its leading space (or an empty line)
        i++;
      }
      dropLooseTail(hunk);
      if (hunk.lines.length > 0) hunks.push(hunk);
      continue;
    }
    if (hunks.length === 0 && !sawHeader) {
      i++; // preamble text before the first header (commit message, prose)
      continue;
    }
    i++;
  }
  flush();
  if (ops.length === 0)
    fail('no hunks found; send a unified diff ("@@ -l,n +l,n @@" hunks) or a "*** Begin Patch" envelope.');
  return ops;
}

/** The refusal of an empty patch. */
export function emptyPatch(): ToolRefusal {
  return argumentRefusal('"patch" is empty.', { argument: "patch" });
}

/**
 * Adds to a refusal that the patch changed nothing (it is all or nothing: every failure happens before the first
 * write, or its writes are undone), naming the files it would have added, so a model does not assume a partial
 * success. A `partial_write` (writes that could not be undone) is returned as it is: it names what was left.
 */
export function nothingWritten<E>(error: E, ops: FileOp[] | undefined): E {
  if (
    !(error instanceof ToolError || error instanceof ToolRefusal) ||
    error.code === "aborted" ||
    error.code === "timeout" ||
    error.details?.rule === "partial_write"
  )
    return error;
  // Each file once, though the patch may add the same path twice (the refusal it gets may be just that).
  const added = [...new Set((ops ?? []).filter((op) => op.kind === "add").map((op) => `"${clip(op.path)}"`))];
  const note = ` Nothing was written: the patch is all or nothing, so no file was changed, moved or deleted${
    added.length > 0 ? `, and ${added.join(", ")} ${added.length === 1 ? "was" : "were"} not created` : ""
  }. Fix the problem and send the whole patch again.`;
  error.message = `${error.message.replace(/\s+$/, "")}${note}`;
  return error;
}

/** The operations patchArgumentsRefusal parsed, by the arguments object it checked (used once by the call). */
const checkedOps = new WeakMap<object, FileOp[]>();

/**
 * apply_patch's checks that need no filesystem, as a returned refusal (undefined when they pass): the patch is not
 * empty, parses, and every path it names (targets and move destinations) is a text a path can have (see
 * pathArgumentProblem). Refusals carry the same "nothing was written" note as those of the call itself. The parsed
 * operations are kept for the call with these arguments ({@link checkedPatchOps}).
 */
export function patchArgumentsRefusal(args: { patch: string; path?: string }): ToolError | ToolRefusal | undefined {
  if (args.patch.trim() === "") return emptyPatch();
  let ops: FileOp[];
  try {
    ops = parsePatch(args.patch, args.path);
  } catch (error) {
    if (error instanceof ToolError) return nothingWritten(error, undefined);
    throw error;
  }
  for (const op of ops) {
    const problem =
      pathArgumentProblem(op.path, "patch") ??
      (op.kind === "update" && op.moveTo !== undefined ? pathArgumentProblem(op.moveTo, "patch") : undefined);
    if (problem) return nothingWritten(problem, ops);
  }
  checkedOps.set(args, ops);
  return undefined;
}

/**
 * Every path a patch would touch (targets and move destinations), read by the parser apply_patch runs, so approval
 * rules see exactly the files the tool would write; undefined when the patch does not parse (the call is refused).
 */
export function patchTargets(args: Record<string, unknown>): string[] | undefined {
  if (typeof args.patch !== "string") return undefined;
  try {
    const ops = parsePatch(args.patch, typeof args.path === "string" ? args.path : undefined);
    return [...new Set(ops.flatMap((op) => (op.kind === "update" && op.moveTo ? [op.path, op.moveTo] : [op.path])))];
  } catch {
    return undefined;
  }
}

/** The operations {@link patchArgumentsRefusal} parsed from `args` (once: a second call parses again), if any. */
export function checkedPatchOps(args: object): FileOp[] | undefined {
  const ops = checkedOps.get(args);
  checkedOps.delete(args);
  return ops;
}
