/**
 * The runtime-wide cap on tool results. Applied by the runtime after any tool returns (built-ins, custom tools,
 * imported MCP tools): a result whose JSON exceeds `maxResultBytes` (default 48 KiB) or whose text exceeds
 * `maxResultLines` (default 2000 lines) is cut, and the full content is written to the caller's spill area.
 *
 * - Shell-style tools (`outputCapStyle: "head_tail"`) keep the head and the tail of stdout/stderr, split by the rule
 *   every cut follows (cut-rules.ts: a fifth head, the rest tail, since the error is usually at the end), the
 *   marker of cut-rules.ts standing where the middle was.
 * - Every other tool keeps the head: the first lines of a text field, the first entries of a list. A tool whose
 *   result is a page of a larger source (it declares `resultPaging`, as read_file does) is not spilled: its own
 *   notice says where the next page starts.
 * - The cut result carries `outputTruncated`: per field the bytes and lines in total and dropped, the spill file
 *   and how to read it, in the words of the first tool enabled for this user that reads spill files (the tools
 *   declaring `spillReader`).
 * - A field the tool already cut while capturing (it streamed the full output to the spill area, see
 *   ToolContext.captureFullOutput) reports its true size even when its cut text would fit.
 */
import { countLineBreaks, countLines, cutMarker, cutText, headOf, utf8Bytes } from "./cut-rules.js";
import type { SpillArea, SpillStream } from "./output-spill.js";
import { integerSetting } from "./settings-declaration.js";
import type { RegisteredTool, ResultPaging, SpillReader, ToolParameterDescriptor } from "./types.js";

/** How a tool's result is cut: the head only, or head + tail split by the one rule of cut-rules.ts (HEAD_SHARE). */
export type OutputCapStyle = "head" | "head_tail";

/** Default cap on a result's JSON in UTF-8 bytes (48 KiB). */
export const DEFAULT_MAX_RESULT_BYTES = 48 * 1024;
/** Default cap on a result's text lines. */
export const DEFAULT_MAX_RESULT_LINES = 2000;

/** The largest cap on a result's JSON a user may set (`maxResultBytes`), in UTF-8 bytes (1 MiB). */
export const LARGEST_MAX_RESULT_BYTES = 1024 * 1024;

/** The common setting `maxResultBytes` (every tool). */
export const MAX_RESULT_BYTES_DESCRIPTOR: ToolParameterDescriptor = {
  name: "maxResultBytes",
  type: "integer",
  description:
    "Largest tool result sent to the model, in bytes of JSON; a longer one is cut and its full output saved to a spill file the model can read.",
  min: 4096,
  max: LARGEST_MAX_RESULT_BYTES,
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

/** The tools that read spill files: those enabled for the user, best first, and the names of all of them. */
export interface SpillReaders {
  enabled: readonly SpillReader[];
  /** Every registered reader's tool name, enabled or not (named when none is enabled). */
  names: readonly string[];
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
  /** The tool's paging, when its result is a page of a larger source (a cut page is continued from the source). */
  paging?: ResultPaging;
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

const jsonBytes = (value: unknown): number => utf8Bytes(JSON.stringify(value) ?? "null");

export { countLines };

/** How the model can read the rest of a cut field, given the tools enabled for the user. */
function readHint(
  readers: SpillReaders,
  path: string | null,
  fromLine: number,
  totalLines: number,
  bytes: number,
): string {
  if (!path) return "The full output could not be saved; rerun the command with narrower output.";
  const spill = { path, fromLine: Math.max(1, fromLine), totalLines, bytes };
  let refusal: string | undefined;
  for (const reader of readers.enabled) {
    const hint = reader.howToRead(spill);
    if (hint.readable) return hint.text;
    refusal ??= hint.text;
  }
  if (refusal) return refusal;
  const names = readers.names.length > 0 ? ` (${readers.names.join(", ")})` : "";
  return `No file-reading tool${names} is enabled for you, so the rest cannot be read; rerun with narrower output or ask the user to enable ${readers.names[0] ?? "one"}.`;
}

/** A field large enough to be cut: a text over 256 bytes or 20 lines (or cut by the tool), a list likewise. */
interface BigField {
  field: string;
  kind: "string" | "array";
  /** UTF-8 bytes of the text, or of the list's JSON. */
  bytes: number;
  /** Line breaks of the text, or entries of the list. */
  lines: number;
  /** Size of the full content (from the stream when the tool captured it, else the field itself). */
  totalBytes: number;
  totalLines: number;
  stream?: SpillStream;
  /** A list's entries as JSON, serialized once: their sizes, the kept entries and the spill file all use them. */
  entries?: string[];
}

/** What one attempt keeps of a big field. */
interface FieldCut {
  big: BigField;
  keptBytes: number;
  keptLines: number;
  /** A text's kept head and tail (empty for lists). */
  head: string;
  tail: string;
  /** The line (or entry, 1-based) of the full content where the dropped part begins. */
  fromLine: number;
  /** Cut by the tool while captured, and what it kept fits: kept as it is, pointing at the full output. */
  keep?: boolean;
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

/** The fields a result is made of: a record's own, or the whole value as the field `result`. */
const fieldsOf = (result: unknown, record: Record<string, unknown> | null): [string, unknown][] =>
  record ? Object.entries(record) : [["result", result]];

/**
 * The fast check: true when the whole result is within both limits and no field was cut while captured, decided
 * from line counts and one size of the whole JSON (`jsonBytes` when known), without serializing any field alone.
 */
function fitsWhole(
  result: unknown,
  record: Record<string, unknown> | null,
  limits: { maxBytes: number; maxLines: number; jsonBytes?: number },
  streams: ReadonlyMap<string, SpillStream>,
): boolean {
  let lines = 0;
  const add = (field: string, value: unknown): boolean => {
    if (typeof value === "string") {
      lines += countLineBreaks(value);
      const stream = streams.size === 0 ? undefined : streams.get(field);
      if (stream !== undefined && stream.totalBytes > utf8Bytes(value)) return false;
    } else if (Array.isArray(value)) {
      lines += value.length;
    }
    return lines <= limits.maxLines;
  };
  if (record) {
    // Every call's result passes here: its fields are walked without making an entries array.
    for (const field in record) if (Object.hasOwn(record, field) && !add(field, record[field])) return false;
  } else if (!add("result", result)) return false;
  return (limits.jsonBytes ?? jsonBytes(result)) <= limits.maxBytes;
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
  // Every line the limit counts (a line break inside a text, `\n` in JSON; an entry of a list) takes at least one
  // byte of the JSON: a result of no more bytes than the line limit fits without being walked (most calls).
  if (jsonBytes <= limits.maxLines) return true;
  return fitsWhole(result, isRecord(result) ? result : null, { ...limits, jsonBytes }, NO_STREAMS);
}

/** Step 1: the big fields of a result and the lines of all its fields (the limit counts line breaks). */
function surveyFields(
  fields: [string, unknown][],
  streams: ReadonlyMap<string, SpillStream>,
): { bigs: BigField[]; lineTotal: number } {
  const bigs: BigField[] = [];
  let lineTotal = 0;
  for (const [field, value] of fields) {
    if (typeof value === "string") {
      const stream = streams.get(field);
      const lines = countLineBreaks(value);
      lineTotal += lines;
      const bytes = utf8Bytes(value);
      const cutAtCapture = stream !== undefined && stream.totalBytes > bytes;
      if (bytes > 256 || lines > 20 || cutAtCapture) {
        bigs.push({
          field,
          kind: "string",
          bytes,
          lines,
          totalBytes: cutAtCapture ? stream.totalBytes : bytes,
          totalLines: cutAtCapture ? stream.totalLines : countLines(value),
          ...(stream ? { stream } : {}),
        });
      }
    } else if (Array.isArray(value)) {
      lineTotal += value.length;
      const entries = value.map((entry) => JSON.stringify(entry) ?? "null");
      let bytes = 2 + Math.max(0, entries.length - 1);
      for (const entry of entries) bytes += utf8Bytes(entry);
      if (bytes > 256 || value.length > 20) {
        bigs.push({
          field,
          kind: "array",
          bytes,
          lines: value.length,
          totalBytes: bytes,
          totalLines: value.length,
          entries,
        });
      }
    }
  }
  return { bigs, lineTotal };
}

/**
 * Step 2: what each big field keeps within `available` bytes and `maxLines` lines, shared out by water-filling
 * (JSON escaping makes a text longer than its UTF-8 size, so a text's byte share is budgeted on its escaped size).
 * `emptyList`: a list whose first entry alone exceeds its share (the head of the whole result says more than []).
 */
function planCuts(
  source: Record<string, unknown>,
  bigs: BigField[],
  available: number,
  maxLines: number,
  style: OutputCapStyle,
): { cuts: FieldCut[]; kept: Map<string, unknown>; emptyList: boolean } {
  const ratio = bigs.map((b) => (b.kind === "string" ? jsonBytes(source[b.field]) / Math.max(1, b.bytes) : 1));
  const needs = bigs.map((b, i) => Math.ceil(b.bytes * (ratio[i] ?? 1)));
  const byteShares = allocate(needs, available).map((share, i) =>
    share >= (needs[i] ?? 0) ? (bigs[i]?.bytes ?? 0) : Math.floor(share / (ratio[i] ?? 1)),
  );
  const lineShares = allocate(
    bigs.map((b) => b.lines),
    maxLines,
  );
  const cuts: FieldCut[] = [];
  const kept = new Map<string, unknown>();
  let emptyList = false;
  bigs.forEach((big, i) => {
    const bytesBudget = byteShares[i] ?? 0;
    const linesBudget = Math.max(1, lineShares[i] ?? 1);
    const fits = big.bytes <= bytesBudget && big.lines <= linesBudget;
    if (fits && big.totalBytes > big.bytes && big.kind === "string") {
      cuts.push({ big, keptBytes: big.bytes, keptLines: big.lines, head: "", tail: "", fromLine: 1, keep: true });
      return;
    }
    if (fits) return;
    if (big.kind === "array") {
      const items = source[big.field] as unknown[];
      const entries = big.entries ?? [];
      let used = 2;
      let count = 0;
      for (const entry of entries) {
        const size = utf8Bytes(entry) + 1;
        if (used + size > bytesBudget || count >= linesBudget) break;
        used += size;
        count++;
      }
      if (count === 0 && items.length > 0) emptyList = true;
      kept.set(big.field, items.slice(0, count));
      cuts.push({ big, keptBytes: used, keptLines: count, head: "", tail: "", fromLine: count + 1 });
      return;
    }
    const cut = cutText(source[big.field] as string, bytesBudget, linesBudget, style);
    cuts.push({ big, ...cut });
  });
  return { cuts, kept, emptyList };
}

/** Writes each field's full content to the spill area once, whatever the attempts (null: not saved). */
class FieldSpills {
  readonly #saved = new Map<string, Promise<SpilledFile | null>>();
  constructor(readonly request: CapRequest) {}

  of(big: BigField, value: unknown): Promise<SpilledFile | null> {
    let saved = this.#saved.get(big.field);
    if (!saved) {
      saved = this.#write(big, value).catch(() => null);
      this.#saved.set(big.field, saved);
    }
    return saved;
  }

  async #write(big: BigField, value: unknown): Promise<SpilledFile | null> {
    if (big.stream) return await big.stream.persist();
    const { area, userId, chatId, tool } = this.request;
    if (!area) return null;
    const content = big.kind === "string" ? (value as string) : (big.entries ?? []).join("\n");
    return await area.writeFile(userId, chatId, tool, big.field, content);
  }
}

type SpilledFile = { path: string; complete: boolean; bytes: number };

/** A paged result's cut text: the source holds the rest, so nothing is spilled; the tool's notice says where to go on. */
function pageCut(
  cut: FieldCut,
  source: Record<string, unknown>,
  paging: ResultPaging,
): { text: string; fields: Record<string, unknown>; entry: TruncatedField } | undefined {
  const page = paging.cut(cut.head, source);
  if (!page) return undefined;
  return {
    text: page.text,
    fields: page.fields ?? {},
    entry: {
      field: paging.field,
      totalBytes: cut.big.totalBytes,
      totalLines: cut.big.totalLines,
      droppedBytes: Math.max(0, cut.big.totalBytes - cut.keptBytes),
      droppedLines: Math.max(0, cut.big.totalLines - cut.keptLines),
      spillFile: null,
      howToRead: page.howToRead,
    },
  };
}

/** Step 3: the cut result of one plan: kept parts, markers, the spill files and how to read them. */
async function assemble(
  plan: { cuts: FieldCut[]; kept: Map<string, unknown> },
  source: Record<string, unknown>,
  record: Record<string, unknown> | null,
  request: CapRequest & { readers: SpillReaders },
  spills: FieldSpills,
): Promise<{ result: unknown; fields: TruncatedField[] }> {
  const out: Record<string, unknown> = { ...source };
  for (const [field, list] of plan.kept) out[field] = list;
  const fields: TruncatedField[] = [];
  const { paging } = request;
  let pageFields: Record<string, unknown> = {};
  for (const cut of plan.cuts) {
    const { big } = cut;
    const page =
      paging && record && big.field === paging.field && big.kind === "string" && !cut.keep
        ? pageCut(cut, source, paging)
        : undefined;
    if (page) {
      out[big.field] = page.text;
      pageFields = page.fields;
      fields.push(page.entry);
      continue;
    }
    const spilled = await spills.of(big, source[big.field]);
    const droppedBytes = Math.max(0, big.totalBytes - cut.keptBytes);
    const droppedLines = Math.max(0, big.totalLines - cut.keptLines);
    const entry: TruncatedField = {
      field: big.field,
      totalBytes: big.totalBytes,
      totalLines: big.totalLines,
      droppedBytes,
      droppedLines,
      spillFile: spilled?.path ?? null,
      howToRead: readHint(request.readers, spilled?.path ?? null, cut.fromLine, big.totalLines, spilled?.bytes ?? 0),
    };
    if (spilled && !spilled.complete) entry.spillComplete = false;
    fields.push(entry);
    if (big.kind === "string" && !cut.keep) {
      const marker = cutMarker({ bytes: droppedBytes, lines: droppedLines, spillFile: spilled?.path ?? null });
      const headPart = cut.head && !cut.head.endsWith("\n") ? `${cut.head}\n` : cut.head;
      out[big.field] = request.style === "head_tail" ? `${headPart}${marker}\n${cut.tail}` : `${headPart}${marker}`;
    }
  }
  // Streams the result did not need.
  for (const [field, stream] of request.streams) {
    if (!plan.cuts.some((c) => c.big.field === field)) await stream.discard();
  }
  const result = record
    ? { ...out, ...pageFields, outputTruncated: { fields } }
    : { result: out.result, outputTruncated: { fields } };
  return { result, fields };
}

async function discardStreams(request: CapRequest): Promise<void> {
  for (const stream of request.streams.values()) await stream.discard();
}

/** The result unchanged: nothing to cut (the streams the tool opened are not needed). */
async function keepWhole(result: unknown, request: CapRequest): Promise<CapOutcome> {
  await discardStreams(request);
  return { result, truncated: false, fields: [] };
}

/**
 * Cuts `result` to the limits of `request` (see the module comment), spilling full contents. Streams the tool
 * opened but that need no reference are discarded. Never throws for a spill failure (the notice then says so).
 *
 * Steps: the fast check (fits whole) → survey the big fields → plan each field's cut within its share → assemble
 * the cut result with markers and spill files; when the assembled result still exceeds the cap (notices, escaping),
 * plan again with less room, and after four attempts (or a list whose first entry does not fit) cut the whole JSON.
 */
export async function capToolResult(result: unknown, request: CapRequest): Promise<CapOutcome> {
  const { maxBytes, maxLines } = request;
  const record = isRecord(result) ? result : null;
  if (fitsWhole(result, record, request, request.streams)) return keepWhole(result, request);
  const { bigs, lineTotal } = surveyFields(fieldsOf(result, record), request.streams);
  const cutAtCapture = bigs.some((b) => b.totalBytes > b.bytes);
  if (!cutAtCapture && lineTotal <= maxLines && (request.jsonBytes ?? jsonBytes(result)) <= maxBytes) {
    return keepWhole(result, request);
  }

  const readers = typeof request.readers === "function" ? await request.readers() : request.readers;
  const resolved = { ...request, readers };
  // Room for everything but the big fields, plus the notices.
  const skeleton: Record<string, unknown> = record ? { ...record } : {};
  for (const b of bigs) skeleton[b.field] = b.kind === "string" ? "" : [];
  let available = maxBytes - jsonBytes(skeleton) - (700 * Math.max(1, bigs.length) + 200);
  if (bigs.length === 0 || available < 1024) return cutWhole(result, resolved);

  const source = record ?? { result };
  const spills = new FieldSpills(resolved);
  for (let attempt = 0; attempt < 4; attempt++) {
    const plan = planCuts(source, bigs, available, maxLines, request.style);
    if (plan.emptyList) break;
    if (plan.cuts.length === 0) return keepWhole(result, request);
    const capped = await assemble(plan, source, record, resolved, spills);
    const size = jsonBytes(capped.result);
    if (size <= maxBytes) return { result: capped.result, truncated: true, fields: capped.fields };
    available -= size - maxBytes + 256 * (attempt + 1);
    if (available < 1024) break;
  }
  return cutWhole(result, resolved);
}

/** Fallback: the head of the whole JSON text, the full JSON in a spill file. */
async function cutWhole(result: unknown, request: CapRequest & { readers: SpillReaders }): Promise<CapOutcome> {
  const pretty = JSON.stringify(result, null, 1) ?? "null";
  let spilled: SpilledFile | null = null;
  try {
    spilled = request.area
      ? await request.area.writeFile(request.userId, request.chatId, request.tool, "result", pretty)
      : null;
  } catch {
    spilled = null;
  }
  await discardStreams(request);
  const totalLines = countLines(pretty);
  const head = headOf(pretty, Math.max(512, request.maxBytes - 2048), Math.max(1, request.maxLines - 1), true);
  const field: TruncatedField = {
    field: "result",
    totalBytes: utf8Bytes(pretty),
    totalLines,
    droppedBytes: utf8Bytes(pretty) - utf8Bytes(head),
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
