/**
 * The binary probe and text decoding shared by read_file and grep: one probe window, so a file grep searches is a
 * file read_file opens.
 *
 * - A file is binary when a NUL byte occurs in its first 8 KiB, unless it starts with a UTF-16 byte-order mark
 *   (UTF-16 text is full of NUL bytes and is read as text).
 * - Text is decoded as UTF-8 (invalid sequences become U+FFFD, WHATWG rules, the same as ripgrep's
 *   `--encoding utf-8`), or UTF-16 LE/BE when the file starts with that BOM. A BOM is removed.
 * - Lines split on LF; one trailing CR is removed from each line; a final newline does not start a phantom line.
 */

/** Bytes inspected for NUL by the binary probe (8 KiB). */
export const BINARY_PROBE_BYTES = 8192;

/** The encodings text is decoded from. */
export type TextEncoding = "utf-8" | "utf-16le" | "utf-16be";

/** The encoding a BOM announces and the BOM's length in bytes (0 and utf-8 when there is none). */
export function detectBom(bytes: Uint8Array): { encoding: TextEncoding; bomLength: number } {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    return { encoding: "utf-8", bomLength: 3 };
  }
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return { encoding: "utf-16le", bomLength: 2 };
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return { encoding: "utf-16be", bomLength: 2 };
  return { encoding: "utf-8", bomLength: 0 };
}

/**
 * True when `head` (the first bytes of a file; only the first BINARY_PROBE_BYTES are looked at) marks the file as
 * binary: a NUL byte in the probe window and no UTF-16 BOM.
 */
export function isBinaryHead(head: Uint8Array): boolean {
  const { encoding } = detectBom(head);
  if (encoding !== "utf-8") return false;
  const end = Math.min(head.length, BINARY_PROBE_BYTES);
  return head.subarray(0, end).indexOf(0) !== -1;
}

const decoders: Record<TextEncoding, InstanceType<typeof TextDecoder>> = {
  "utf-8": new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }),
  "utf-16le": new TextDecoder("utf-16le", { fatal: false, ignoreBOM: true }),
  "utf-16be": new TextDecoder("utf-16be", { fatal: false, ignoreBOM: true }),
};

/** Decodes file bytes to text: BOM sniffed and removed, invalid sequences replaced by U+FFFD. */
export function decodeText(bytes: Uint8Array): { text: string; encoding: TextEncoding; bom: boolean } {
  const { encoding, bomLength } = detectBom(bytes);
  return { text: decoders[encoding].decode(bytes.subarray(bomLength)), encoding, bom: bomLength > 0 };
}

/**
 * Splits text into lines on LF, removing one trailing CR from each; a final LF ends the last line rather than
 * starting an empty one ("a\nb\n" and "a\nb" both have 2 lines; "" has 0).
 */
export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.endsWith("\r")) lines[i] = line.slice(0, -1);
  }
  return lines;
}
