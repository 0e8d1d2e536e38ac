/**
 * The implementation of the apply_patch tool (its metadata is in src/tools/builtin/apply-patch.ts, which loads this
 * module on the tool's first call). See that file for the behaviour.
 */
import { rm, rmdir } from "node:fs/promises";
import { dirname } from "node:path";
import { clip, NotFoundError, shorten, ToolArgumentError, ToolExecutionError } from "../../core/errors.js";
import { openedFileRefusal } from "../../core/path-opened.js";
import {
  baseDirectory,
  expandPath,
  type ResolvedPath,
  resolveAndValidatePath,
  toResultPath,
} from "../../core/path-policy.js";
import type { ToolContext } from "../../core/types.js";
import {
  assertFresh,
  atomicWrite,
  ledgerChat,
  lstatOrUndefined,
  readWholeFile,
  refuseFinalSymlink,
  sha256,
  withPathLocks,
} from "./common.js";
import { checkedPatchOps, emptyPatch, type FileOp, type Hunk, nothingWritten, parsePatch } from "./patch-parse.js";

/** Lines of a hunk (and of the file) a mismatch report shows at most. */
const MISMATCH_LINES_SHOWN = 40;

/** Largest file apply_patch edits (10 MiB). */
export const PATCH_FILE_CAP = 10 * 1024 * 1024;

interface Line {
  /** Text without CR/LF. */
  text: string;
  cr: boolean;
  nl: boolean;
}

/** Splits file text into lines that remember their CR and LF, so joining them restores the bytes. */
export function toLines(text: string): Line[] {
  if (text === "") return [];
  const parts = text.split("\n");
  const out: Line[] = [];
  for (let i = 0; i < parts.length; i++) {
    const raw = parts[i]!;
    const last = i === parts.length - 1;
    if (last && raw === "") break;
    const cr = raw.endsWith("\r") && !last;
    out.push({ text: cr ? raw.slice(0, -1) : raw, cr, nl: !last });
  }
  return out;
}

/** Joins lines back to text. */
export function fromLines(lines: Line[]): string {
  let s = "";
  for (const l of lines) s += l.text + (l.nl ? (l.cr ? "\r\n" : "\n") : "");
  return s;
}

const comparers: ((a: string, b: string) => boolean)[] = [
  (a, b) => a === b,
  (a, b) => a.trimEnd() === b.trimEnd(),
  (a, b) => a.trim() === b.trim(),
];

/**
 * Most line comparisons one patch may spend locating its hunks. A hunk is found in time linear in the file for
 * distinctive context; only a long hunk over a file whose lines repeat (500 lines of "x" against 50,000) costs
 * file × hunk comparisons, which held the event loop for tens of seconds before this bound.
 */
export const LOCATE_BUDGET = 10_000_000;

/** The comparisons left to a patch (shared by its files). */
export interface LocateBudget {
  left: number;
}

class BudgetExhausted extends Error {}

function matchesAt(
  file: Line[],
  at: number,
  old: string[],
  eq: (a: string, b: string) => boolean,
  budget: LocateBudget,
): boolean {
  for (let k = 0; k < old.length; k++) {
    if (--budget.left < 0) throw new BudgetExhausted();
    const line = file[at + k];
    if (!line || !eq(line.text, old[k]!)) return false;
  }
  return true;
}

/**
 * Finds where `old` sits: nearest to `expected` within [from, end], strictest comparison first; -1 if nowhere.
 * Throws BudgetExhausted when the search spends the patch's comparison budget.
 */
function locate(
  file: Line[],
  rawOld: string[],
  from: number,
  expected: number,
  atEof: boolean,
  budget: LocateBudget,
): number {
  const old = rawOld.map((l) => l.replace(/\r$/, ""));
  const last = file.length - old.length;
  if (last < from) return -1;
  if (atEof) {
    return comparers.some((eq) => matchesAt(file, last, old, eq, budget)) ? last : -1;
  }
  const start = Math.min(Math.max(expected, from), last);
  for (const eq of comparers) {
    for (let d = 0; start - d >= from || start + d <= last; d++) {
      if (start + d <= last && matchesAt(file, start + d, old, eq, budget)) return start + d;
      if (d > 0 && start - d >= from && matchesAt(file, start - d, old, eq, budget)) return start - d;
    }
  }
  return -1;
}

function describeMismatch(path: string, index: number, total: number, hunk: Hunk, file: Line[], from: number): string {
  const old = hunk.lines.filter((l) => l.op !== "+").map((l) => l.text);
  let at = hunk.oldStart !== undefined ? hunk.oldStart - 1 : -1;
  if (at < 0 && old.length > 0) {
    at = file.findIndex((l, i) => i >= from && l.text.trim() === old[0]!.trim());
  }
  if (at < 0) at = from;
  at = Math.max(0, Math.min(at, Math.max(0, file.length - 1)));
  const shown = file.slice(at, at + Math.max(old.length, 1));
  // Long hunks and long lines are shown in part: enough to see the difference, never the whole argument back.
  const fmt = (ls: string[]) =>
    [
      ...ls.slice(0, MISMATCH_LINES_SHOWN).map((l) => `  |${shorten(l, 200)}`),
      ...(ls.length > MISMATCH_LINES_SHOWN ? [`  (${ls.length - MISMATCH_LINES_SHOWN} more lines)`] : []),
    ].join("\n") || "  (nothing)";
  return [
    `Hunk ${index} of ${total} for "${clip(path)}" did not apply: no place in the file matches its ${old.length} context/removed line(s).`,
    `Expected:\n${fmt(old)}`,
    `The file has at line ${at + 1}:\n${fmt(shown.map((l) => l.text))}`,
    "Read the file again with read_file and send a patch whose context and '-' lines match it exactly.",
  ].join("\n");
}

/**
 * Where a hunk's search starts after its `@@` anchors: each anchor is the next line (at or after the previous
 * anchor's line) that contains it; the search starts after the last one (or on it, when the hunk's first line is
 * the anchor line itself). Throws ToolExecutionError (rule anchor_not_found) naming the anchor that cannot be
 * satisfied in order — the hunk is then refused, never applied elsewhere.
 */
function afterAnchors(
  file: Line[],
  anchors: string[],
  from: number,
  old: string[],
  path: string,
  index: number,
  total: number,
): number {
  let at = from;
  let line = -1;
  for (let k = 0; k < anchors.length; k++) {
    const anchor = anchors[k]!.trim();
    const start = line < 0 ? at : line + 1;
    line = file.findIndex((l, i) => i >= start && (l.text.trim() === anchor || l.text.includes(anchor)));
    if (line < 0) {
      const previous =
        k > 0 ? ` after "@@ ${clip(anchors[k - 1]!)}" (line ${at + 1})` : from > 0 ? ` after line ${from}` : "";
      throw new ToolExecutionError(
        `Hunk ${index} of ${total} for "${clip(path)}" did not apply: its anchor "@@ ${clip(anchors[k]!)}" matches no line${previous}. Anchors are searched in order, each after the one before. Read the file again and use anchor lines that exist, in file order.`,
        { path: clip(path), hunk: index, anchor: clip(anchors[k]!), rule: "anchor_not_found" },
      );
    }
    at = line;
  }
  return old.length > 0 && old[0]!.trim() === file[line]!.text.trim() ? line : line + 1;
}

/**
 * Applies hunks to file text. Throws ToolExecutionError (rule hunk_mismatch) naming the file and hunk, and
 * ToolArgumentError (rule hunk_too_costly) when locating a hunk spends `budget` (shared by a patch's files).
 */
export function applyHunks(
  text: string,
  hunks: Hunk[],
  path: string,
  budget: LocateBudget = { left: LOCATE_BUDGET },
): string {
  const bom = text.startsWith("\uFEFF") ? "\uFEFF" : "";
  let file = toLines(bom ? text.slice(1) : text);
  const crlf =
    file.length > 0
      ? file.filter((l) => l.cr).length * 2 >= file.filter((l) => l.nl).length && file.some((l) => l.cr)
      : false;
  let from = 0;
  let delta = 0;
  hunks.forEach((hunk, h) => {
    const old = hunk.lines.filter((l) => l.op !== "+").map((l) => l.text);
    const anchors = hunk.anchors ?? [];
    const searchFrom = anchors.length > 0 ? afterAnchors(file, anchors, from, old, path, h + 1, hunks.length) : from;
    const expected = hunk.oldStart !== undefined ? hunk.oldStart - 1 + delta : searchFrom;
    let at: number;
    if (old.length === 0) {
      at = hunk.oldStart !== undefined ? Math.min(Math.max(expected, from), file.length) : file.length;
    } else {
      try {
        at = locate(file, old, searchFrom, expected, hunk.atEof, budget);
        // Without anchors a hunk may sit before the expected place; with anchors it must lie inside them, never elsewhere.
        if (at < 0 && anchors.length === 0 && searchFrom > from) {
          at = locate(file, old, from, expected, hunk.atEof, budget);
        }
        // Lines only found before where the previous hunk ended: the hunks are out of order, or overlap.
        const earlier = at < 0 && h > 0 ? locate(file, old, 0, expected, hunk.atEof, budget) : -1;
        if (earlier >= 0 && earlier < from) {
          throw new ToolExecutionError(
            `Hunk ${h + 1} of ${hunks.length} for "${clip(path)}" did not apply: its lines match at line ${earlier + 1}, before the end of hunk ${h} (line ${from}). Hunks must come in file order without overlapping: sort them by line number, and merge hunks that share lines into one.`,
            { path: clip(path), hunk: h + 1, rule: "hunk_order" },
          );
        }
      } catch (error) {
        if (!(error instanceof BudgetExhausted)) throw error;
        throw new ToolArgumentError(
          `Hunk ${h + 1} of ${hunks.length} for "${clip(path)}" is too costly to locate: ${old.length} context/removed lines in a file of ${file.length} lines that repeat. Send a smaller hunk with more distinctive context lines, or give its line numbers ("@@ -l,n +l,n @@"), which are tried first.`,
          { path: clip(path), hunk: h + 1, rule: "hunk_too_costly" },
        );
      }
      if (at < 0) {
        throw new ToolExecutionError(describeMismatch(path, h + 1, hunks.length, hunk, file, from), {
          path: clip(path),
          hunk: h + 1,
          rule: "hunk_mismatch",
        });
      }
    }
    const replacement: Line[] = [];
    let cursor = at;
    for (const l of hunk.lines) {
      if (l.op === " ") replacement.push({ ...file[cursor++]! });
      else if (l.op === "-") cursor++;
      else replacement.push({ text: l.text.replace(/\r$/, ""), cr: crlf, nl: true });
    }
    const touchesEof = at + old.length >= file.length;
    const next = [...file.slice(0, at), ...replacement, ...file.slice(at + old.length)];
    if (touchesEof && next.length > 0) {
      const originalLastNl = file.length === 0 ? true : file[file.length - 1]!.nl;
      const finalNl = hunk.newNoEol ? false : hunk.oldNoEol ? true : originalLastNl;
      for (let k = at; k < next.length - 1; k++) {
        const line = next[k]!;
        if (!line.nl) Object.assign(line, { nl: true, cr: crlf });
      }
      next[next.length - 1]!.nl = finalNl;
    }
    file = next;
    from = at + replacement.length;
    delta += replacement.length - old.length;
  });
  return bom + fromLines(file);
}

/** One planned change, computed before anything is written. */
interface Planned extends ResolvedPath {
  action: "add" | "update" | "delete" | "move";
  input: string;
  content?: string;
  mode?: number;
  /** The bytes of the file before the patch (update, move, delete): what a failed patch puts back. */
  original?: Buffer;
  /** For a move: the destination. */
  dest?: ResolvedPath & { input: string };
  hunks: number;
}

function decodeStrict(bytes: Buffer, input: string): string {
  const text = bytes.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(bytes)) {
    throw new ToolArgumentError(
      `"${clip(input)}" is not valid UTF-8 text, so a patch could not preserve its bytes; use write_file instead.`,
      { path: clip(input), rule: "not_utf8" },
    );
  }
  return text;
}

type ResolvedOp = { op: FileOp; target: ResolvedPath; dest: ResolvedPath | undefined };

/**
 * Every path of the patch through the policy before anything else (nothing is read or written outside), then the
 * no-final-symlink rule (a target or move destination that is a symbolic link is refused).
 */
async function resolveTargets(ops: FileOp[], context: ToolContext): Promise<ResolvedOp[]> {
  const resolved: ResolvedOp[] = [];
  for (const op of ops) {
    const target = await resolveAndValidatePath(op.path, context, {
      kind: "file",
      argument: "patch",
      purpose: "write",
    });
    const dest =
      op.kind === "update" && op.moveTo
        ? await resolveAndValidatePath(op.moveTo, context, { kind: "file", argument: "patch", purpose: "write" })
        : undefined;
    resolved.push({ op, target, dest });
  }
  for (const { op, target, dest } of resolved) {
    await refuseFinalSymlink(target.absolute, op.path, "patch");
    if (dest && op.kind === "update" && op.moveTo) await refuseFinalSymlink(dest.absolute, op.moveTo, "patch");
  }
  return resolved;
}

/** Plans every resolved operation (freshness, hunks) without writing; throws on the first problem. */
async function planPatch(resolved: ResolvedOp[], context: ToolContext): Promise<Planned[]> {
  const seen = new Set<string>();
  const planned: Planned[] = [];
  const budget: LocateBudget = { left: LOCATE_BUDGET };
  const claim = (real: string, input: string) => {
    if (seen.has(real)) {
      throw new ToolArgumentError(`The patch touches "${clip(input)}" more than once; merge those changes into one.`, {
        argument: "patch",
        rule: "duplicate_target",
      });
    }
    seen.add(real);
  };
  // A file the patch deletes may be the destination of a move in the same patch (replace b with a renamed a).
  const deleted = new Map<string, string>();
  for (const { op, target } of resolved) if (op.kind === "delete") deleted.set(target.real, op.path);
  const moveDests = new Set(resolved.flatMap(({ op, dest }) => (op.kind === "update" && dest ? [dest.real] : [])));
  for (const { op, target, dest } of resolved) {
    if (!(op.kind === "delete" && moveDests.has(target.real))) claim(target.real, op.path);
    const exists = await lstatOrUndefined(target.real);
    if (op.kind === "add") {
      await assertParentIsDirectory(target.real, op.path);
      if (exists) throw existsRefusal(op.path);
      const hunk = op.hunks[0];
      const lines = op.hunks.flatMap((h) => h.lines.filter((l) => l.op !== "-").map((l) => l.text));
      const noEol = hunk?.newNoEol === true;
      planned.push({
        action: "add",
        input: op.path,
        ...target,
        content: lines.length === 0 ? "" : `${lines.join("\n")}${noEol ? "" : "\n"}`,
        hunks: op.hunks.length,
      });
      continue;
    }
    if (!exists) {
      throw new NotFoundError(`Cannot patch "${clip(op.path)}": no such file.`, { path: clip(op.path) });
    }
    const current = await readWholeFile(target.real, op.path, PATCH_FILE_CAP, context.signal);
    await assertFresh(context, target.real, op.path, current.sha256);
    const original = current.bytes;
    if (op.kind === "delete") {
      planned.push({
        action: "delete",
        input: op.path,
        ...target,
        mode: current.info.mode & 0o7777,
        original,
        hunks: 0,
      });
      continue;
    }
    const text = decodeStrict(current.bytes, op.path);
    const content = op.hunks.length > 0 ? applyHunks(text, op.hunks, op.path, budget) : text;
    const entry: Planned = {
      action: dest ? "move" : "update",
      input: op.path,
      ...target,
      content,
      mode: current.info.mode & 0o7777,
      original,
      hunks: op.hunks.length,
    };
    if (dest && op.moveTo) {
      claim(dest.real, op.moveTo);
      if (!deleted.has(dest.real) && (await lstatOrUndefined(dest.real))) {
        throw new ToolExecutionError(
          `Cannot move "${clip(op.path)}" to "${clip(op.moveTo)}": "${clip(op.moveTo)}" already exists. To replace it, put "*** Delete File: ${clip(op.moveTo)}" in the same patch before "*** Update File: ${clip(op.path)}" / "*** Move to: ${clip(op.moveTo)}"; otherwise choose another destination.`,
          { path: clip(op.moveTo), rule: "exists" },
        );
      }
      await assertParentIsDirectory(dest.real, op.moveTo);
      entry.dest = { input: op.moveTo, ...dest };
    }
    planned.push(entry);
  }
  return planned;
}

/** The refusal of creating a file (an Add, or a move's destination) that exists (rule `exists`). */
function existsRefusal(input: string, action: Planned["action"] = "add"): ToolExecutionError {
  const advice =
    action === "move"
      ? "Choose another destination, or read it and delete it in the same patch."
      : 'Read it and send an update (or "*** Update File:") instead.';
  return new ToolExecutionError(
    `Cannot ${action === "move" ? "move a file to" : "add"} "${clip(input)}": it already exists. ${advice}`,
    { path: clip(input), rule: "exists" },
  );
}

/** Result of apply_patch. */
export interface ApplyPatchResult {
  patched: true;
  path: string;
  files: { path: string; action: Planned["action"]; hunks: number }[];
}

/** Executes apply_patch on parsed arguments. */
export async function applyPatch(
  args: { patch: string; path?: string },
  context: ToolContext,
): Promise<ApplyPatchResult> {
  if (args.patch.trim() === "") throw emptyPatch().toError();
  let ops: FileOp[] | undefined;
  try {
    ops = checkedPatchOps(args) ?? parsePatch(args.patch, args.path);
    assertPathUsed(args.path, ops, context);
    const resolved = await resolveTargets(ops, context);
    const reals = resolved.flatMap(({ target, dest }) => (dest ? [target.real, dest.real] : [target.real]));
    // Freshness checks and writes of every target under this process's path locks (sorted: no deadlock).
    return await withPathLocks(reals, () => writePlanned(resolved, context));
  } catch (error) {
    throw nothingWritten(error, ops);
  }
}

/**
 * Refuses a `path` argument the patch would ignore: it names the file of hunks without headers, and a patch whose
 * headers name its files (none of them `path`, however spelled) would silently leave it out. ToolArgumentError
 * (validation_failed, rule path_unused).
 */
function assertPathUsed(path: string | undefined, ops: FileOp[], context: ToolContext): void {
  if (typeof path !== "string") return;
  const base = baseDirectory(context);
  const wanted = expandPath(path, base);
  const named = ops.flatMap((op) => (op.kind === "update" && op.moveTo ? [op.path, op.moveTo] : [op.path]));
  if (named.some((p) => p === path || expandPath(p, base) === wanted)) return;
  throw new ToolArgumentError(
    `Invalid argument "path": it names the file for hunks without file headers, but this patch names its own files (${named
      .slice(0, 5)
      .map((p) => `"${clip(p)}"`)
      .join(", ")}) and not "${clip(path)}". Leave "path" out, or send the hunks for "${clip(path)}" without headers.`,
    { argument: "path", rule: "path_unused" },
  );
}

/**
 * Refuses a target whose nearest existing ancestor is not a directory (a file in the way of a path to create):
 * found while planning, before anything is written. ToolArgumentError (validation_failed, rule not_a_directory).
 */
async function assertParentIsDirectory(real: string, input: string): Promise<void> {
  for (let dir = dirname(real); ; dir = dirname(dir)) {
    const info = await lstatOrUndefined(dir);
    if (info) {
      if (info.isDirectory()) return;
      throw new ToolArgumentError(
        `Invalid argument "patch": a parent of "${clip(input)}" is a file, not a directory. Check the path (list_directory or glob can help).`,
        { argument: "patch", path: clip(input), rule: "not_a_directory" },
      );
    }
    if (dirname(dir) === dir) return;
  }
}

/** The directories that do not exist yet on the way to `real`, innermost first (what a write there creates). */
async function missingParents(real: string): Promise<string[]> {
  const missing: string[] = [];
  for (let dir = dirname(real); dirname(dir) !== dir && !(await lstatOrUndefined(dir)); dir = dirname(dir)) {
    missing.push(dir);
  }
  return missing;
}

/**
 * Plans (freshness, hunks) and then writes; the caller holds the path locks of every target. A write or delete
 * that fails (a file the patch adds in the way of another, a full disk) undoes the ones made before it: replaced
 * and deleted files get their bytes and mode back, added files and the directories made for them are removed. So
 * the patch is all or nothing even when the file system fails it halfway; only when undoing fails too is the error
 * a `partial_write` naming the files left changed.
 */
async function writePlanned(resolved: ResolvedOp[], context: ToolContext): Promise<ApplyPatchResult> {
  const planned = await planPatch(resolved, context);
  if (context.signal.aborted) throw context.signal.reason;
  // What each written location held before: the file itself (update), or a file the patch deletes (move onto it).
  const before = new Map<string, Planned>();
  for (const p of planned) if (p.original) before.set(p.real, p);
  const undo: { input: string; step: () => Promise<unknown> }[] = [];
  // Each write's temp file is checked where it really lies (a directory swapped for a link since planning).
  // A file the patch creates must still be new: one another process made since planning is not replaced.
  const write = (to: ResolvedPath, input: string, data: Buffer | string, mode?: number, create?: Planned["action"]) =>
    atomicWrite(to.real, data, {
      mode,
      createDirectories: true,
      input,
      check: (fd, info) => openedFileRefusal(to, fd, info, context, { input, argument: "patch", purpose: "write" }),
      ...(create ? { createOnly: () => existsRefusal(input, create) } : {}),
    });
  const restore = (p: Planned, input: string) => ({ input, step: () => write(p, input, p.original!, p.mode) });
  const written = new Set(planned.flatMap((p) => (p.action === "delete" ? [] : [(p.dest ?? p).real])));
  try {
    for (const p of planned) {
      if (p.action === "delete") continue;
      const target = p.dest ?? p;
      const previous = before.get(target.real);
      const created = previous ? [] : await missingParents(target.real);
      await write(target, target.input, p.content ?? "", p.mode, previous ? undefined : p.action);
      undo.push(
        previous
          ? restore(previous, target.input)
          : {
              input: target.input,
              step: async () => {
                await rm(target.real, { force: true });
                for (const dir of created) await rmdir(dir);
              },
            },
      );
    }
    for (const p of planned) {
      // A deleted file that a move just replaced is already gone (the move's atomic rename took its place).
      if ((p.action === "delete" || p.action === "move") && !written.has(p.real)) {
        await rm(p.real, { force: true });
        undo.push(restore(p, p.input));
      }
    }
  } catch (error) {
    const left: string[] = [];
    for (const { input, step } of undo.reverse()) await step().catch(() => left.push(input));
    if (left.length > 0) throw partialWrite(error, left);
    throw error;
  }
  const chat = ledgerChat(context);
  for (const p of planned) {
    if (p.action !== "delete") {
      await context.ledger.recordRead(chat, (p.dest ?? p).real, sha256(Buffer.from(p.content ?? "", "utf8")));
    }
  }
  const files = planned.map((p) => ({
    path: toResultPath((p.dest ?? p).absolute, context),
    action: p.action,
    hunks: p.hunks,
  }));
  return { patched: true, path: files[0]!.path, files };
}

/** The error of a patch whose failed write could not be fully undone: which files it left changed. */
function partialWrite(error: unknown, left: string[]): ToolExecutionError {
  const reason = error instanceof Error ? error.message : String(error);
  const names = left.map((input) => `"${clip(input)}"`).join(", ");
  return new ToolExecutionError(
    `The patch failed while writing (${reason}) and could not be undone for ${names}: read ${left.length === 1 ? "that file" : "those files"} again before changing ${left.length === 1 ? "it" : "them"}.`,
    { argument: "patch", rule: "partial_write", files: left.map((input) => clip(input)) },
    { cause: error },
  );
}
