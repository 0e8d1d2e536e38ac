/**
 * The runtime-wide cap on tool results. Applied by the runtime after any tool returns (built-ins, custom tools,
 * imported MCP tools): a result whose JSON exceeds `maxResultBytes` (default 48 KiB) or whose text exceeds
 * `maxResultLines` (default 2000 lines) is cut, and the full content is written to the caller's spill area.
 *
 * - Shell-style tools (`outputCapStyle: "head_tail"`) keep about 20% head and 80% tail of stdout/stderr: the error
 *   is usually at the end.
 * - Every other tool keeps the head: the first lines of a text field, the first entries of a list. read_file's
 *   content keeps its line numbers and says which startLine continues it.
 * - The cut result carries `outputTruncated`: per field the bytes and lines in total and dropped, the spill file
 *   and how to read it with a tool enabled for this user (read_file with startLine/maxLines, or grep).
 * - A field the tool already cut while capturing (it streamed the full output to the spill area, see
 *   ToolContext.captureFullOutput) reports its true size even when its cut text would fit.
 */
import type { SpillArea, SpillStream } from "./output-spill.js";
import { integerSetting } from "./settings-declaration.js";
import type { RegisteredTool, ToolParameterDescriptor } from "./types.js";

/** How a tool's result is cut: the head only, or about 20% head + 80% tail. */
export type OutputCapStyle = "head" | "head_tail";

/** Default cap on a result's JSON in UTF-8 bytes (48 KiB). */
export const DEFAULT_MAX_RESULT_BYTES = 48 * 1024;
/** Default cap on a result's text lines. */
export const DEFAULT_MAX_RESULT_LINES = 2000;

/** The common setting `maxResultBytes` (every tool). */
export const MAX_RESULT_BYTES_DESCRIPTOR: ToolParameterDescriptor = {
  name: "maxResultBytes",
  type: "integer",
  description:
    "Largest tool result sent to the model, in bytes of JSON; a longer one is cut and its full output saved to a spill file the model can read.",
  min: 4096,
  max: 1024 * 1024,
  default: DEFAULT_MAX_RESULT_BYTES,
  unit: "bytes",
};

/** The common setting `maxResultLines` (every tool). */
export const MAX_RESULT_LINES_DESCRIPTOR: ToolParameterDescriptor = {
  name: "maxResultLines",
  type: "integer",
  description:
    "Most lines of text (or list entries) in a tool result sent to the model; the rest goes to a spill file.",
  min: 50,
  max: 100_000,
  default: DEFAULT_MAX_RESULT_LINES,
  unit: "lines",
};

/** Common-setting declarations (see common-settings.ts): every tool gets both caps. */
export function declareMaxResultBytes(_tool: RegisteredTool): ToolParameterDescriptor {
  return MAX_RESULT_BYTES_DESCRIPTOR;
}
/** See declareMaxResultBytes. */
export function declareMaxResultLines(_tool: RegisteredTool): ToolParameterDescriptor {
  return MAX_RESULT_LINES_DESCRIPTOR;
}

/** The limits of one call, read from its settings (corrupt values fall back to the defaults, ranges clamp). */
export function resultCapLimits(parameters: Record<string, unknown>): { maxBytes: number; maxLines: number } {
  return {
    maxBytes: integerSetting(parameters, MAX_RESULT_BYTES_DESCRIPTOR),
    maxLines: integerSetting(parameters, MAX_RESULT_LINES_DESCRIPTOR),
  };
}

/** Which tools the user may read a spill file with. */
export interface SpillReaders {
  readFile: boolean;
  grep: boolean;
}

/** What capToolResult needs besides the result. */
export interface CapRequest {
  tool: string;
  style: OutputCapStyle;
  maxBytes: number;
  maxLines: number;
  /** Full outputs the tool streamed while running, by top-level field name. */
  streams: ReadonlyMap<string, SpillStream>;
  /** Where full contents go; null: nowhere (the notice then says the rest cannot be read). */
  area: SpillArea | null;
  userId: string;
  chatId: string | null;
  /** The tools this user may read spill files with (asked only when something is cut). */
  readers: SpillReaders | (() => Promise<SpillReaders>);
  /**
   * UTF-8 size of `JSON.stringify(result)` when the caller already knows it (the runtime does: it serializes every
   * result once). Saves serializing a large result again just to learn that it fits.
   */
  jsonBytes?: number;
}

/** One cut field, as reported to the model in `outputTruncated.fields`. */
export interface TruncatedField {
  field: string;
  totalBytes: number;
  totalLines: number;
  droppedBytes: number;
  droppedLines: number;
  /** The spill's virtual name, `spill:<id>`, holding the full content (null when it could not be saved). */
  spillFile: string | null;
  /** False when the spill file holds only the first part (it reached its size limit). */
  spillComplete?: boolean;
  /** How to read the rest. */
  howToRead: string;
}

/** Outcome of capToolResult. */
export interface CapOutcome {
  result: unknown;
  truncated: boolean;
  fields: TruncatedField[];
}

const utf8 = (text: string) => Buffer.byteLength(text, "utf8");

function jsonBytes(value: unknown): number {
  return utf8(JSON.stringify(value) ?? "null");
}

/** Lines of a text: newlines, plus one for a last line without a newline. */
export function countLines(text: string): number {
  if (text === "") return 0;
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
  return text.endsWith("\n") ? n : n + 1;
}

/** Line breaks in a text. */
function countLineBreaks(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

/** The longest prefix of `text` within `bytes` UTF-8 bytes and `lines` lines, cut after a newline when one fits. */
function headOf(text: string, bytes: number, lines: number, partialLastLine = false): string {
  let end = 0;
  let used = 0;
  let seen = 0;
  // walk by lines
  while (end < text.length && seen < lines) {
    const nl = text.indexOf("\n", end);
    const stop = nl === -1 ? text.length : nl + 1;
    const size = utf8(text.slice(end, stop));
    if (used + size > bytes) {
      if (seen === 0 || partialLastLine) {
        // a single huge first line (or, when asked, the line that overflows): cut inside it
        const part = Buffer.from(text.slice(end, stop), "utf8").subarray(0, Math.max(0, bytes - used));
        return text.slice(0, end) + part.toString("utf8").replace(/\uFFFD$/, "");
      }
      break;
    }
    used += size;
    seen++;
    end = stop;
  }
  return text.slice(0, end);
}

/** The longest suffix of `text` within `bytes` and `lines`, starting at a line start when one fits. */
function tailOf(text: string, bytes: number, lines: number): string {
  let start = text.length;
  let used = 0;
  let seen = 0;
  while (start > 0 && seen < lines) {
    const prevNl = text.lastIndexOf("\n", start - 2);
    const from = prevNl === -1 ? 0 : prevNl + 1;
    const size = utf8(text.slice(from, start));
    if (used + size > bytes) {
      if (seen === 0) {
        const buf = Buffer.from(text.slice(from, start), "utf8");
        return buf
          .subarray(buf.length - bytes)
          .toString("utf8")
          .replace(/^\uFFFD/, "");
      }
      break;
    }
    used += size;
    seen++;
    start = from;
  }
  return text.slice(start);
}

function readHint(
  given: CapRequest["readers"],
  path: string | null,
  fromLine: number,
  totalLines: number,
  bytes: number,
): string {
  const readers: SpillReaders = typeof given === "function" ? { readFile: false, grep: false } : given;
  if (!path) return "The full output could not be saved; rerun the command with narrower output.";
  const tooBigForRead = bytes > 10 * 1024 * 1024;
  if (readers.readFile && !tooBigForRead) {
    return `Read the rest with read_file {"path": ${JSON.stringify(path)}, "startLine": ${Math.max(1, fromLine)}, "maxLines": 500} (${totalLines} lines in all), or search it with grep if enabled.`;
  }
  if (readers.grep) return `Search the full output with grep {"pattern": "…", "path": ${JSON.stringify(path)}}.`;
  if (readers.readFile) {
    return `The spill file is larger than read_file's 10 MiB text limit; rerun the command with narrower output (e.g. filter it with grep or tail).`;
  }
  return "No file-reading tool (read_file, grep) is enabled for you, so the rest cannot be read; rerun with narrower output or ask the user to enable read_file.";
}

interface Big {
  field: string;
  kind: "string" | "array";
  bytes: number;
  lines: number;
  /** Size of the full content (from the stream when the tool captured it, else the field itself). */
  totalBytes: number;
  totalLines: number;
  stream?: SpillStream;
}

/** Water-filling: each item gets min(its need, an equal share of what is left). */
function allocate(needs: number[], available: number): number[] {
  const order = needs.map((n, i) => [n, i] as const).sort((a, b) => a[0] - b[0]);
  const out = new Array<number>(needs.length).fill(0);
  let left = Math.max(0, available);
  order.forEach(([need, i], k) => {
    const share = Math.floor(left / (order.length - k));
    const give = Math.min(need, share);
    out[i] = give;
    left -= give;
  });
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The fast check of capToolResult: true when the whole result is within both limits and no field was cut while
 * captured, decided from line counts and one size of the whole JSON (request.jsonBytes when given), without
 * serializing any field on its own.
 */
function fitsWhole(result: unknown, record: Record<string, unknown> | null, request: CapRequest): boolean {
  let lines = 0;
  for (const [field, value] of record ? Object.entries(record) : [["result", result] as const]) {
    if (typeof value === "string") {
      lines += countLineBreaks(value);
      const stream = request.streams.get(field);
      if (stream !== undefined && stream.totalBytes > utf8(value)) return false;
    } else if (Array.isArray(value)) {
      lines += value.length;
    }
    if (lines > request.maxLines) return false;
  }
  return (request.jsonBytes ?? jsonBytes(result)) <= request.maxBytes;
}

const NO_STREAMS: ReadonlyMap<string, SpillStream> = new Map();

/**
 * Whether `result` (of `jsonBytes` UTF-8 bytes as JSON) fits `limits` whole when the tool captured no full output:
 * then {@link capToolResult} would return it unchanged, and the caller may skip it.
 */
export function fitsResultCap(
  result: unknown,
  jsonBytes: number,
  limits: { maxBytes: number; maxLines: number },
): boolean {
  if (jsonBytes > limits.maxBytes) return false;
  return fitsWhole(result, isRecord(result) ? result : null, {
    maxBytes: limits.maxBytes,
    maxLines: limits.maxLines,
    jsonBytes,
    streams: NO_STREAMS,
  } as CapRequest);
}

/**
 * Cuts `result` to the limits of `request` (see the module comment), spilling full contents. Streams the tool
 * opened but that need no reference are discarded. Never throws for a spill failure (the notice then says so).
 */
export async function capToolResult(result: unknown, capRequest: CapRequest): Promise<CapOutcome> {
  let request = capRequest;
  const { maxBytes, maxLines } = request;
  const record = isRecord(result) ? result : null;
  if (fitsWhole(result, record, request)) {
    for (const s of request.streams.values()) await s.discard();
    return { result, truncated: false, fields: [] };
  }
  const bigs: Big[] = [];
  let lineTotal = 0;
  const consider = (field: string, value: unknown) => {
    const stream = request.streams.get(field);
    if (typeof value === "string") {
      // The limit counts line breaks, so a full window plus a one-line notice of the tool's own still fits.
      const lines = countLineBreaks(value);
      lineTotal += lines;
      const bytes = utf8(value);
      const cutAtCapture = stream !== undefined && stream.totalBytes > bytes;
      if (bytes > 256 || lines > 20 || cutAtCapture) {
        bigs.push({
          field,
          kind: "string",
          bytes,
          lines,
          totalBytes: cutAtCapture ? stream.totalBytes : bytes,
          totalLines: cutAtCapture ? stream.totalLines : countLines(value),
          stream,
        });
      }
    } else if (Array.isArray(value)) {
      lineTotal += value.length;
      const bytes = jsonBytes(value);
      if (bytes > 256 || value.length > 20) {
        bigs.push({ field, kind: "array", bytes, lines: value.length, totalBytes: bytes, totalLines: value.length });
      }
    }
  };
  if (record) for (const [field, value] of Object.entries(record)) consider(field, value);
  else consider("result", result);

  const cutAtCapture = bigs.some((b) => b.totalBytes > b.bytes);
  const discardAll = async () => {
    for (const s of request.streams.values()) await s.discard();
  };
  if (jsonBytes(result) <= maxBytes && lineTotal <= maxLines && !cutAtCapture) {
    await discardAll();
    return { result, truncated: false, fields: [] };
  }

  const readers = typeof request.readers === "function" ? await request.readers() : request.readers;
  request = { ...request, readers };
  // Room for everything but the big fields, plus the notices.
  const skeleton: Record<string, unknown> = record ? { ...record } : {};
  for (const b of bigs) skeleton[b.field] = b.kind === "string" ? "" : [];
  const reserve = 700 * Math.max(1, bigs.length) + 200;
  let available = maxBytes - jsonBytes(skeleton) - reserve;
  if (bigs.length === 0 || available < 1024) {
    return cutWhole(result, request);
  }

  const spilledFields = new Map<string, { path: string; complete: boolean; bytes: number } | null>();
  const spillOf = async (b: Big, value: unknown) => {
    if (spilledFields.has(b.field)) return spilledFields.get(b.field) ?? null;
    const saved = await spillOnce(b, value);
    spilledFields.set(b.field, saved);
    return saved;
  };
  const spillOnce = async (b: Big, value: unknown) => {
    try {
      if (b.stream) return await b.stream.persist();
      if (!request.area) return null;
      const content =
        b.kind === "string" ? (value as string) : (value as unknown[]).map((e) => JSON.stringify(e)).join("\n");
      return await request.area.writeFile(request.userId, request.chatId, request.tool, b.field, content);
    } catch {
      return null;
    }
  };

  const source = record ?? { result };
  const paged =
    record !== null &&
    typeof record.content === "string" &&
    typeof record.startLine === "number" &&
    typeof record.totalLines === "number" &&
    typeof record.path === "string";
  for (let attempt = 0; attempt < 4; attempt++) {
    // JSON escaping makes strings longer than their UTF-8 size: budget on the escaped size.
    const ratio = bigs.map((b) => (b.kind === "string" ? jsonBytes(source[b.field]) / Math.max(1, b.bytes) : 1));
    const needs = bigs.map((b, i) => Math.ceil(b.bytes * (ratio[i] ?? 1)));
    const byteShares = allocate(needs, available).map((share, i) =>
      share >= (needs[i] ?? 0) ? (bigs[i]?.bytes ?? 0) : Math.floor(share / (ratio[i] ?? 1)),
    );
    const lineShares = allocate(
      bigs.map((b) => b.lines),
      maxLines,
    );
    let emptyList = false;
    const out: Record<string, unknown> = { ...source };
    const fields: TruncatedField[] = [];
    const pending: {
      b: Big;
      keptBytes: number;
      keptLines: number;
      head: string;
      tail: string;
      fromLine: number;
      keep?: boolean;
    }[] = [];
    bigs.forEach((b, i) => {
      const bytesBudget = byteShares[i] ?? 0;
      const linesBudget = Math.max(1, lineShares[i] ?? 1);
      const value = source[b.field];
      const fits = b.bytes <= bytesBudget && b.lines <= linesBudget;
      if (fits && b.totalBytes > b.bytes && b.kind === "string") {
        // Cut by the tool while capturing, and what it kept fits: keep it, and point at the full output.
        pending.push({ b, keptBytes: b.bytes, keptLines: b.lines, head: "", tail: "", fromLine: 1, keep: true });
        return;
      }
      if (fits) return;
      if (b.kind === "array") {
        const items = value as unknown[];
        const kept: unknown[] = [];
        let used = 2;
        for (const item of items) {
          const size = jsonBytes(item) + 1;
          if (used + size > bytesBudget || kept.length >= linesBudget) break;
          kept.push(item);
          used += size;
        }
        if (kept.length === 0 && items.length > 0) emptyList = true; // not even the first entry fits
        out[b.field] = kept;
        pending.push({ b, keptBytes: used, keptLines: kept.length, head: "", tail: "", fromLine: kept.length + 1 });
        return;
      }
      const text = value as string;
      if (request.style === "head_tail") {
        const headBytes = Math.floor(bytesBudget * 0.2);
        const headLines = Math.max(1, Math.floor(linesBudget * 0.2));
        const head = headOf(text, headBytes, headLines);
        const rest = text.slice(head.length);
        const tail = tailOf(rest, bytesBudget - utf8(head), Math.max(1, linesBudget - countLines(head)));
        pending.push({
          b,
          keptBytes: utf8(head) + utf8(tail),
          keptLines: countLines(head) + countLines(tail),
          head,
          tail,
          fromLine: countLines(head) + 1,
        });
      } else {
        const head = headOf(text, bytesBudget, linesBudget);
        pending.push({
          b,
          keptBytes: utf8(head),
          keptLines: countLines(head),
          head,
          tail: "",
          fromLine: countLines(head) + 1,
        });
      }
    });
    // A list whose first entry alone exceeds its share: the head of the whole result's text says more than [].
    if (emptyList) break;
    if (pending.length === 0) {
      await discardAll();
      return { result, truncated: false, fields: [] };
    }
    for (const p of pending) {
      if (paged && p.b.field === "content" && !p.keep) {
        // read_file: the file itself is the full output; say which startLine continues.
        const last = lastNumberedLine(p.head);
        const start = source.startLine as number;
        const next = last > 0 ? last + 1 : start;
        fields.push({
          field: "content",
          totalBytes: p.b.totalBytes,
          totalLines: p.b.totalLines,
          droppedBytes: Math.max(0, p.b.totalBytes - p.keptBytes),
          droppedLines: Math.max(0, p.b.totalLines - p.keptLines),
          spillFile: null,
          howToRead: `${request.tool} {"path": ${JSON.stringify(source.path)}, "startLine": ${next}}`,
        });
        const headPart = p.head && !p.head.endsWith("\n") ? `${p.head}\n` : p.head;
        out.content = `${headPart}[truncated: showing lines ${start}–${Math.max(start, last)} of ${source.totalLines}. Use startLine/maxLines to read more: startLine ${next}.]`;
        continue;
      }
      const spilled = await spillOf(p.b, source[p.b.field]);
      const droppedBytes = Math.max(0, p.b.totalBytes - p.keptBytes);
      const droppedLines = Math.max(0, p.b.totalLines - p.keptLines);
      const howToRead = readHint(
        request.readers,
        spilled?.path ?? null,
        p.fromLine,
        p.b.totalLines,
        spilled?.bytes ?? 0,
      );
      const entry: TruncatedField = {
        field: p.b.field,
        totalBytes: p.b.totalBytes,
        totalLines: p.b.totalLines,
        droppedBytes,
        droppedLines,
        spillFile: spilled?.path ?? null,
        howToRead,
      };
      if (spilled && !spilled.complete) entry.spillComplete = false;
      fields.push(entry);
      if (p.b.kind === "string" && !p.keep) {
        const marker = `[... ${droppedBytes} bytes, ${droppedLines} lines cut here; full output: ${spilled?.path ?? "not saved"} ...]`;
        const headPart = p.head && !p.head.endsWith("\n") ? `${p.head}\n` : p.head;
        out[p.b.field] = request.style === "head_tail" ? `${headPart}${marker}\n${p.tail}` : `${headPart}${marker}`;
      }
    }
    // Streams the result did not need.
    for (const [field, s] of request.streams) if (!pending.some((p) => p.b.field === field)) await s.discard();
    const capped = record
      ? { ...continueHint(request.tool, out, pending[0]?.b.field), outputTruncated: { fields } }
      : { result: out.result, outputTruncated: { fields } };
    const size = jsonBytes(capped);
    if (size <= maxBytes) return { result: capped, truncated: true, fields };
    available -= size - maxBytes + 256 * (attempt + 1);
    if (available < 1024) break;
  }
  return cutWhole(result, request);
}

/** The number of the last `cat -n`-style line (`   123\ttext`) in a text; 0 when there is none. */
function lastNumberedLine(text: string): number {
  let last = 0;
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+)\t/.exec(line);
    if (m) last = Number(m[1]);
  }
  return last;
}

/** read_file: the kept content's last line number tells where to continue. */
function continueHint(tool: string, out: Record<string, unknown>, field: string | undefined): Record<string, unknown> {
  if (field !== "content" || typeof out.content !== "string" || typeof out.startLine !== "number") return out;
  const last = lastNumberedLine(out.content);
  if (last === 0) return out;
  return {
    ...out,
    endLine: last,
    truncated: true,
    continueWith: `${tool} {"path": ${JSON.stringify(out.path)}, "startLine": ${last + 1}}`,
  };
}

/** Fallback: the head of the whole JSON text, the full JSON in a spill file. */
async function cutWhole(result: unknown, capRequest: CapRequest): Promise<CapOutcome> {
  const readers = typeof capRequest.readers === "function" ? await capRequest.readers() : capRequest.readers;
  const request = { ...capRequest, readers };
  const pretty = JSON.stringify(result, null, 1) ?? "null";
  let spilled: { path: string; complete: boolean; bytes: number } | null = null;
  try {
    spilled = request.area
      ? await request.area.writeFile(request.userId, request.chatId, request.tool, "result", pretty)
      : null;
  } catch {
    spilled = null;
  }
  for (const s of request.streams.values()) await s.discard();
  const totalLines = countLines(pretty);
  const head = headOf(pretty, Math.max(512, request.maxBytes - 2048), Math.max(1, request.maxLines - 1), true);
  const field: TruncatedField = {
    field: "result",
    totalBytes: utf8(pretty),
    totalLines,
    droppedBytes: utf8(pretty) - utf8(head),
    droppedLines: totalLines - countLines(head),
    spillFile: spilled?.path ?? null,
    howToRead: readHint(request.readers, spilled?.path ?? null, countLines(head) + 1, totalLines, spilled?.bytes ?? 0),
  };
  let capped: Record<string, unknown> = { resultHead: head, outputTruncated: { fields: [field] } };
  while (jsonBytes(capped) > request.maxBytes && (capped.resultHead as string).length > 0) {
    const h = capped.resultHead as string;
    capped = { ...capped, resultHead: h.slice(0, Math.floor(h.length * 0.8)) };
  }
  return { result: capped, truncated: true, fields: [field] };
}
