/**
 * The rules every cut of tool output follows, stated once: how a head + tail cut shares its budget, the marker that
 * stands where the middle was cut, and the text cuts themselves (by bytes and lines, at line starts when one fits).
 * The runtime's output cap (result-cap.ts) and the shell's stream capture (tools/shell/output-cap.ts) both use them.
 */

/**
 * The share of a head + tail cut's budget kept from the head; the rest goes to the tail (the end of a build log or a
 * stack trace matters most).
 */
export const HEAD_SHARE = 0.2;

/** A head + tail cut's budget of `total` units (bytes or lines), split by {@link HEAD_SHARE}: `{ head, tail }`. */
export function headTailSplit(total: number): { head: number; tail: number } {
  const head = Math.floor(Math.max(0, total) * HEAD_SHARE);
  return { head, tail: Math.max(0, total) - head };
}

/** What a cut dropped, as its marker states it. */
export interface CutMarkerInput {
  /** Bytes dropped. */
  bytes: number;
  /** Lines dropped, when known. */
  lines?: number;
  /** Where the full output is: a path, null when it could not be saved, undefined when nothing saves it. */
  spillFile?: string | null;
}

/**
 * The marker placed where output was cut (on a line of its own): `[... N bytes, M lines cut here; full output:
 * PATH ...]`, the line count and the full-output clause present when known.
 */
export function cutMarker(input: CutMarkerInput): string {
  const lines = input.lines === undefined ? "" : `, ${input.lines} lines`;
  const where = input.spillFile === undefined ? "" : `; full output: ${input.spillFile ?? "not saved"}`;
  return `[... ${input.bytes} bytes${lines} cut here${where} ...]`;
}

/** The pattern of {@link cutMarker}'s text (capturing the bytes, and the lines when present). */
export const CUT_MARKER_PATTERN = /\[\.\.\. (\d+) bytes(?:, (\d+) lines)? cut here(?:; full output: [^\n]*?)? \.\.\.\]/;

/** UTF-8 size of a text. */
export const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8");

/** Lines of a text: newlines, plus one for a last line without a newline. */
export function countLines(text: string): number {
  if (text === "") return 0;
  const breaks = countLineBreaks(text);
  return text.endsWith("\n") ? breaks : breaks + 1;
}

/** Line breaks in a text. */
export function countLineBreaks(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

/**
 * The longest prefix of `text` within `bytes` UTF-8 bytes and `lines` lines, cut after a newline when one fits. A
 * first line longer than the budget (or, with `partialLastLine`, the line that overflows) is cut inside, never
 * inside a character.
 */
export function headOf(text: string, bytes: number, lines: number, partialLastLine = false): string {
  let end = 0;
  let used = 0;
  let seen = 0;
  while (end < text.length && seen < lines) {
    const nl = text.indexOf("\n", end);
    const stop = nl === -1 ? text.length : nl + 1;
    const size = utf8Bytes(text.slice(end, stop));
    if (used + size > bytes) {
      if (seen === 0 || partialLastLine) {
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
export function tailOf(text: string, bytes: number, lines: number): string {
  let start = text.length;
  let used = 0;
  let seen = 0;
  while (start > 0 && seen < lines) {
    const prevNl = text.lastIndexOf("\n", start - 2);
    const from = prevNl === -1 ? 0 : prevNl + 1;
    const size = utf8Bytes(text.slice(from, start));
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

/** A text cut to its head, or to head + tail by {@link headTailSplit}: what is kept of it. */
export interface TextCut {
  head: string;
  /** Empty for a head-only cut. */
  tail: string;
  keptBytes: number;
  keptLines: number;
  /** The line (1-based) of the full text where the dropped part begins. */
  fromLine: number;
}

/** Cuts `text` to `bytes` and `lines`: its head only, or head and tail split by {@link headTailSplit}. */
export function cutText(text: string, bytes: number, lines: number, style: "head" | "head_tail"): TextCut {
  if (style === "head") {
    const head = headOf(text, bytes, lines);
    const keptLines = countLines(head);
    return { head, tail: "", keptBytes: utf8Bytes(head), keptLines, fromLine: keptLines + 1 };
  }
  const head = headOf(text, headTailSplit(bytes).head, Math.max(1, headTailSplit(lines).head));
  const headBytes = utf8Bytes(head);
  const headLines = countLines(head);
  const tail = tailOf(text.slice(head.length), bytes - headBytes, Math.max(1, lines - headLines));
  return {
    head,
    tail,
    keptBytes: headBytes + utf8Bytes(tail),
    keptLines: headLines + countLines(tail),
    fromLine: headLines + 1,
  };
}
