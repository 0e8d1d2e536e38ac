/**
 * Byte-capped capture of a process output stream ("bash / zsh / powershell":
 * "per-stream output is capped at maxOutputBytes (flagged via truncated)"; shell_exec:
 * stdout limited to 100 KB, stderr to 50 KB).
 *
 * The cap counts UTF-8 bytes of the returned text, marker included. When a stream exceeds it, the head and the tail
 * are kept, split by the rule every cut of tool output follows (core/cut-rules.ts: the end of a build log matters
 * most, so the tail gets the larger share), around the same marker the runtime's output cap uses, saying how many
 * bytes and lines were dropped. A character is never cut in half. Memory stays bounded by the cap plus one chunk:
 * the dropped middle is counted, never buffered.
 */
import { countLineBreaks, cutMarker, headTailSplit } from "../../core/cut-rules.js";

/** Tail chunks kept before they are compacted into one buffer (bounds per-chunk overhead for slow writers). */
const MAX_TAIL_CHUNKS = 256;

/** Bytes reserved for the elision marker inside the cap. */
const MARKER_RESERVE = 96;

/** The marker placed between head and tail, on a line of its own: states the bytes and lines dropped. */
export function elisionMarker(droppedBytes: number, droppedLines: number): string {
  return `\n${cutMarker({ bytes: droppedBytes, lines: droppedLines })}\n`;
}

/** Line breaks (0x0a bytes) in a chunk. */
function lineBreaks(chunk: Buffer): number {
  let n = 0;
  for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) n++;
  return n;
}

function isContinuation(byte: number | undefined): boolean {
  return byte !== undefined && (byte & 0xc0) === 0x80;
}

/**
 * The longest prefix of `bytes` of at most `max` bytes that does not end inside a UTF-8 sequence.
 * Invalid sequences are left for the decoder (they become U+FFFD).
 */
export function utf8Prefix(bytes: Buffer, max: number): Buffer {
  if (bytes.length <= max) return bytes;
  // bytes[end] is the first byte left out; when it continues a character, cut before that character's lead.
  let end = Math.max(0, max);
  let steps = 0;
  while (end > 0 && steps < 3 && isContinuation(bytes[end])) {
    end--;
    steps++;
  }
  return bytes.subarray(0, end);
}

/** The longest suffix of `bytes` of at most `max` bytes that does not start inside a UTF-8 sequence. */
export function utf8Suffix(bytes: Buffer, max: number): Buffer {
  if (bytes.length <= max) return bytes;
  let start = bytes.length - Math.max(0, max);
  let skipped = 0;
  while (start < bytes.length && skipped < 3 && isContinuation(bytes[start])) {
    start++;
    skipped++;
  }
  return bytes.subarray(start);
}

/** Trims a decoded string to at most `max` UTF-8 bytes, from the start (`head`) or the end (`tail`). */
function fitString(text: string, max: number, side: "head" | "tail"): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  return (side === "head" ? utf8Prefix(bytes, max) : utf8Suffix(bytes, max)).toString("utf8");
}

/** What a capture yields once the stream ended. */
export interface CapturedOutput {
  /** The captured text (head + marker + tail when truncated); its UTF-8 length never exceeds the cap. */
  text: string;
  /** True when bytes were dropped. */
  truncated: boolean;
  /** Bytes the stream carried in total. */
  totalBytes: number;
}

/**
 * Collects a stream's bytes under a cap of `maxBytes` UTF-8 bytes (at least 256): once the stream overflows, keeps
 * its head and tail within the budget (minus room for the marker), split by headTailSplit.
 */
export class HeadTailCapture {
  readonly maxBytes: number;
  readonly #headCap: number;
  readonly #tailCap: number;
  /** Everything up to `maxBytes` is kept verbatim until the stream overflows. */
  #head: Buffer[] = [];
  #headBytes = 0;
  /** The first bytes after the head (up to 4), to tell whether the head ends inside a character. */
  #afterHead = Buffer.alloc(0);
  /** Chunks after the head; trimmed from the front so it holds at least `maxBytes - headCap` bytes. */
  #tail: Buffer[] = [];
  #tailBytes = 0;
  #total = 0;
  /** Line breaks seen so far. */
  #lineBreaks = 0;

  constructor(maxBytes: number) {
    if (!Number.isInteger(maxBytes) || maxBytes < 256) throw new RangeError("HeadTailCapture: maxBytes must be >= 256");
    this.maxBytes = maxBytes;
    const budget = maxBytes - MARKER_RESERVE;
    const split = headTailSplit(budget);
    this.#headCap = split.head;
    this.#tailCap = split.tail;
  }

  /** Bytes seen so far. */
  get totalBytes(): number {
    return this.#total;
  }

  /** Bytes currently held (head plus retained tail chunks): bounded by the cap plus about one chunk. */
  get retainedBytes(): number {
    return this.#headBytes + this.#tailBytes;
  }

  /** Adds a chunk of raw bytes. */
  push(chunk: Buffer): void {
    this.#total += chunk.length;
    this.#lineBreaks += lineBreaks(chunk);
    let rest = chunk;
    if (this.#headBytes < this.#headCap) {
      const take = Math.min(this.#headCap - this.#headBytes, rest.length);
      // Copied: a view would pin the stream's whole read buffer for the life of the call.
      this.#head.push(Buffer.from(rest.subarray(0, take)));
      this.#headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    if (this.#afterHead.length < 4) {
      this.#afterHead = Buffer.concat([this.#afterHead, rest.subarray(0, 4 - this.#afterHead.length)]);
    }
    this.#tail.push(rest);
    this.#tailBytes += rest.length;
    // Keep enough after the head to return the whole stream verbatim while it still fits the cap.
    const keep = this.maxBytes - this.#headCap;
    while (this.#tail.length > 1 && this.#tailBytes - (this.#tail[0]?.length ?? 0) >= keep) {
      this.#tailBytes -= this.#tail.shift()?.length ?? 0;
    }
    if (this.#tail.length > MAX_TAIL_CHUNKS || (this.#tail.length === 1 && this.#tailBytes > keep * 2)) {
      // Many small chunks (a slow writer) or one huge one: keep a compact copy of the last `keep` bytes.
      const joined = Buffer.concat(this.#tail, this.#tailBytes);
      const kept = Buffer.from(joined.subarray(Math.max(0, joined.length - keep)));
      this.#tail = [kept];
      this.#tailBytes = kept.length;
    }
  }

  /** The captured output: verbatim when it fits the cap, else head + elision marker + tail. */
  result(): CapturedOutput {
    const head = Buffer.concat(this.#head, this.#headBytes);
    const tail = Buffer.concat(this.#tail, this.#tailBytes);
    if (this.#total <= this.maxBytes) {
      const text = Buffer.concat([head, tail]).toString("utf8");
      // Invalid bytes decode to U+FFFD (3 bytes each) and may push a binary stream past the cap.
      if (Buffer.byteLength(text, "utf8") <= this.maxBytes) return { text, truncated: false, totalBytes: this.#total };
    }
    const headWithNext = Buffer.concat([head, this.#afterHead]);
    const headText = fitString(utf8Prefix(headWithNext, this.#headCap).toString("utf8"), this.#headCap, "head");
    const tailText = fitString(utf8Suffix(tail, this.#tailCap).toString("utf8"), this.#tailCap, "tail");
    const kept = Buffer.byteLength(headText, "utf8") + Buffer.byteLength(tailText, "utf8");
    const dropped = Math.max(0, this.#total - kept);
    const droppedLines = Math.max(0, this.#lineBreaks - countLineBreaks(headText) - countLineBreaks(tailText));
    return {
      text: headText + elisionMarker(dropped, droppedLines) + tailText,
      truncated: true,
      totalBytes: this.#total,
    };
  }
}
