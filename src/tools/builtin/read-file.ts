/**
 * read_file: a file as line-numbered text (cat -n style) or as raw bytes (hex | base64), through a single file
 * descriptor.
 *
 * - view "text": 10 MiB ceiling; refuses a file with a NUL byte in its first 8 KiB (naming the byte views);
 *   BOM-marked UTF-8 / UTF-16 decoded with the BOM removed; invalid UTF-8 shown as U+FFFD; lines split on LF with
 *   a trailing CR removed; startLine (1-based, default 1) and maxLines (default 2000, max 5000) choose the window;
 *   a line longer than 2,000 characters and a window past 256 KiB are cut, setting `truncated` with a notice.
 * - view "hex" / "base64": 256 KiB ceiling, the whole file transcoded, totalLines 0; startLine/maxLines rejected.
 * - The cap bounds the bytes the descriptor yields, not what stat claims (a file that grows or lies is refused at
 *   the cap). The whole file's sha256 is always recorded in the chat's freshness ledger, even for a partial window.
 *
 * Result: { content, path, size, sha256, totalLines, startLine, endLine, truncated } plus `view` when not text.
 */
import { argumentRefusal, clip, ToolArgumentError, type ToolRefusal } from "../../core/errors.js";
import { openedFileRefusal } from "../../core/path-opened.js";
import {
  PATH_POLICY_DESCRIPTORS,
  pathArgumentsCheck,
  type ResolvedPath,
  resolveAndValidatePath,
  toResultPath,
} from "../../core/path-policy.js";
import { defineTool } from "../../core/settings-declaration.js";
import { decodeText, isBinaryHead, splitLines } from "../../core/text-probe.js";
import type { RegisteredTool, ResultPaging, SpillReader, ToolContext } from "../../core/types.js";
import { formatBytes, ledgerChat, MIB, readRegularFile } from "../fs/common.js";

/** Ceiling of the text view (bytes the descriptor may yield). */
export const TEXT_VIEW_CAP = 10 * MIB;
/** Ceiling of the hex and base64 views. */
export const BYTE_VIEW_CAP = 256 * 1024;
/** Default and largest maxLines. */
export const DEFAULT_MAX_LINES = 2000;
export const MAX_MAX_LINES = 5000;
/** A line longer than this (UTF-16 code units) is cut with a marker. */
export const MAX_LINE_CHARS = 2000;
/** The text window (the returned content) is cut past this many characters. */
export const MAX_WINDOW_CHARS = 256 * 1024;

/** The views read_file offers. */
export type ReadView = "text" | "hex" | "base64";

/** Result of read_file. */
export interface ReadFileResult {
  content: string;
  /** The path, relative to the chat working directory (absolute when none is bound or it lies outside). */
  path: string;
  /** Bytes in the file (as read through the descriptor). */
  size: number;
  /** sha256 (hex) of the whole file. */
  sha256: string;
  /** Lines in the file (0 for byte views). */
  totalLines: number;
  /** First line returned (1-based; 0 for byte views or an empty file). */
  startLine: number;
  /** Last line returned (0 when none). */
  endLine: number;
  truncated: boolean;
  view?: "hex" | "base64";
}

/** Reads and decodes a file under the path policy; records its sha256 in the ledger. Shared by file_read. */
export async function readFileForChat(
  input: string,
  context: ToolContext,
  view: ReadView,
): Promise<{ bytes: Buffer; sha256: string; absolute: string; real: string }> {
  const resolved = await resolveAndValidatePath(input, context, { mustExist: true, kind: "file", purpose: "read" });
  return readResolvedFile(resolved, input, context, view);
}

/**
 * The read of readFileForChat once the path is resolved: opens `resolved.real`, decides the policy again on what was
 * opened (openedFileRefusal: a directory swapped for a link, a hard link to a denied file since the check), reads
 * it under the view's ceiling and records its sha256 in the ledger.
 */
export async function readResolvedFile(
  resolved: ResolvedPath,
  input: string,
  context: ToolContext,
  view: ReadView,
): Promise<{ bytes: Buffer; sha256: string; absolute: string; real: string }> {
  const { absolute, real } = resolved;
  const cap = view === "text" ? TEXT_VIEW_CAP : BYTE_VIEW_CAP;
  const read = await readRegularFile(real, input, cap, context.signal, (fd, info) =>
    openedFileRefusal(resolved, fd, info, context, { input, purpose: "read" }),
  );
  if (read.exceeded) {
    throw new ToolArgumentError(
      view === "text"
        ? `"${clip(input)}" is larger than the ${formatBytes(cap)} ceiling of read_file's text view. Search it with grep instead.`
        : `"${clip(input)}" is larger than the ${formatBytes(cap)} ceiling of read_file's ${view} view (the whole result would reach the model). Byte views are for small binary files.`,
      { path: clip(input), rule: "size_cap", capBytes: cap },
    );
  }
  await context.ledger.recordRead(ledgerChat(context), real, read.sha256);
  return { bytes: read.bytes, sha256: read.sha256, absolute, real };
}

/** Refuses a binary file in the text view, naming the byte views. */
export function assertTextual(bytes: Uint8Array, input: string): void {
  if (isBinaryHead(bytes)) {
    throw new ToolArgumentError(
      `"${clip(input)}" looks binary (a NUL byte in its first 8 KiB), so the text view refuses it. Read it with view: "hex" or view: "base64" (256 KiB ceiling).`,
      { path: clip(input), rule: "binary", views: ["hex", "base64"] },
    );
  }
}

function cutLine(line: string): { text: string; cut: boolean } {
  if (line.length <= MAX_LINE_CHARS) return { text: line, cut: false };
  return {
    text: `${line.slice(0, MAX_LINE_CHARS)}… [line cut: ${line.length - MAX_LINE_CHARS} more characters]`,
    cut: true,
  };
}

/** The refusal of startLine or maxLines with a byte view, or undefined. */
function viewProblem(args: { startLine?: number; maxLines?: number; view?: ReadView }): ToolRefusal | undefined {
  const view = args.view ?? "text";
  if (view === "text" || (args.startLine === undefined && args.maxLines === undefined)) return undefined;
  return argumentRefusal(
    `startLine and maxLines apply to view "text" only; the ${view} view always returns the whole file. Drop them, or use view "text".`,
    { argument: args.startLine !== undefined ? "startLine" : "maxLines", rule: "view" },
  );
}

const checkPath = pathArgumentsCheck("path");

/** Executes read_file on parsed arguments. */
export async function readFile(
  args: { path: string; startLine?: number; maxLines?: number; view?: ReadView },
  context: ToolContext,
): Promise<ReadFileResult> {
  const view = args.view ?? "text";
  const refusal = viewProblem(args);
  if (refusal) throw refusal.toError();
  const { bytes, sha256, absolute } = await readFileForChat(args.path, context, view);
  const path = toResultPath(absolute, context);
  if (view !== "text") {
    return {
      content: bytes.toString(view),
      path,
      size: bytes.length,
      sha256,
      totalLines: 0,
      startLine: 0,
      endLine: 0,
      truncated: false,
      view,
    };
  }
  assertTextual(bytes, args.path);
  const lines = splitLines(decodeText(bytes).text);
  const totalLines = lines.length;
  const startLine = args.startLine ?? 1;
  const maxLines = args.maxLines ?? DEFAULT_MAX_LINES;
  if (totalLines > 0 && startLine > totalLines) {
    throw new ToolArgumentError(
      `startLine ${startLine} is past the end of "${clip(args.path)}", which has ${totalLines} line${totalLines === 1 ? "" : "s"}.`,
      { argument: "startLine", rule: "range", totalLines },
    );
  }
  const width = Math.max(6, String(Math.min(totalLines, startLine + maxLines - 1)).length);
  const out: string[] = [];
  let chars = 0;
  let truncated = false;
  let endLine = startLine - 1;
  const last = Math.min(totalLines, startLine + maxLines - 1);
  for (let n = startLine; n <= last; n++) {
    const { text, cut } = cutLine(lines[n - 1]!);
    const rendered = `${String(n).padStart(width)}\t${text}`;
    if (chars + rendered.length + 1 > MAX_WINDOW_CHARS && out.length > 0) {
      truncated = true;
      break;
    }
    if (cut) truncated = true;
    out.push(rendered);
    chars += rendered.length + 1;
    endLine = n;
  }
  if (endLine < totalLines) truncated = true;
  let content = out.join("\n");
  if (truncated) {
    const more = endLine < totalLines ? ` Lines ${endLine + 1}–${totalLines} not shown.` : "";
    content += `${content ? "\n" : ""}[truncated: showing lines ${totalLines === 0 ? 0 : startLine}–${endLine} of ${totalLines}.${more} Use startLine/maxLines to read more.]`;
  }
  return {
    content,
    path,
    size: bytes.length,
    sha256,
    totalLines,
    startLine: totalLines === 0 ? 0 : startLine,
    endLine: totalLines === 0 ? 0 : endLine,
    truncated,
  };
}

/** The number of the last line of `text` in read_file's numbering (`   123\ttext`); 0 when there is none. */
function lastNumberedLine(text: string): number {
  let last = 0;
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+)\t/.exec(line);
    if (m) last = Number(m[1]);
  }
  return last;
}

/**
 * A text page cut by the output cap: the file itself holds the rest, so nothing is spilled; the notice, `endLine`
 * and `continueWith` say which startLine reads on. Byte views (whole files, no lines) are spilled instead.
 */
const readFilePaging: ResultPaging = {
  field: "content",
  cut(kept, result) {
    if (result.view !== undefined || typeof result.startLine !== "number" || result.startLine < 1) return undefined;
    const start = result.startLine;
    const last = lastNumberedLine(kept);
    const next = last > 0 ? last + 1 : start;
    const head = kept && !kept.endsWith("\n") ? `${kept}\n` : kept;
    const howToRead = `read_file {"path": ${JSON.stringify(result.path)}, "startLine": ${next}}`;
    return {
      text: `${head}[truncated: showing lines ${start}–${Math.max(start, last)} of ${result.totalLines}. Use startLine/maxLines to read more: startLine ${next}.]`,
      howToRead,
      fields: last > 0 ? { endLine: last, truncated: true, continueWith: howToRead } : {},
    };
  },
};

/** read_file reads a spill file's lines from where the cut began, when the spill is within its text view's ceiling. */
const readFileSpillReader: SpillReader = {
  tool: "read_file",
  rank: 1,
  howToRead({ path, fromLine, totalLines, bytes }) {
    if (bytes > TEXT_VIEW_CAP) {
      return {
        readable: false,
        text: `The spill file is larger than read_file's ${formatBytes(TEXT_VIEW_CAP)} text limit; rerun the command with narrower output (e.g. filter it with grep or tail).`,
      };
    }
    return {
      readable: true,
      text: `Read the rest with read_file {"path": ${JSON.stringify(path)}, "startLine": ${fromLine}, "maxLines": 500} (${totalLines} lines in all), or search it with grep if enabled.`,
    };
  },
};

export const readFileTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "read_file",
    description:
      'Reads a file: as line-numbered text (view "text", default; up to 10 MiB; choose a window with startLine/maxLines) or as raw bytes (view "hex" or "base64", whole file, up to 256 KiB). Reading a file is required before overwriting it with write_file or apply_patch.',
    parameters: {
      type: "object",
      properties: {
        path: {
          type: "string",
          description: "File to read: absolute, ~-prefixed, or relative to the working directory.",
        },
        startLine: {
          type: "integer",
          minimum: 1,
          description: "First line to return, 1-based (text view only). Default 1.",
        },
        maxLines: {
          type: "integer",
          minimum: 1,
          maximum: MAX_MAX_LINES,
          description: `Most lines to return (text view only). Default ${DEFAULT_MAX_LINES}, max ${MAX_MAX_LINES}.`,
        },
        view: {
          type: "string",
          enum: ["text", "hex", "base64"],
          description:
            'How to return the content: "text" (line-numbered), "hex" or "base64" (raw bytes). Default "text".',
        },
      },
      required: ["path"],
    },
  },
  settings: {
    title: "Read file",
    description: "Lets the model read files as text or bytes, within the allowed directories.",
    category: "system",
    annotations: { readOnlyHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS],
  },
  resultPaging: readFilePaging,
  spillReader: readFileSpillReader,
  validateArguments: (args) => checkPath(args) ?? viewProblem(args),
  execute: (args, context) => readFile(args as Parameters<typeof readFile>[0], context),
});
