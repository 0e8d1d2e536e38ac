/**
 * Character set detection and decoding of fetched bodies (web_fetch returns text). Order, as in the HTML standard's
 * encoding sniffing: a byte order mark, then the Content-Type header's `charset`, then (HTML) `<meta charset>` / `<meta
 * http-equiv="Content-Type" content="…; charset=…">` or (XML) the `<?xml encoding?>` declaration in the first 4096
 * bytes, then UTF-8. Labels go through TextDecoder, which on Node 20 (full ICU) knows the WHATWG encodings:
 * windows-1252 for "iso-8859-1"/"latin1", Shift_JIS, EUC-JP, GBK, Big5, EUC-KR, the ISO-8859 family and others.
 */

/** The `charset` parameter of a Content-Type header value, lower-cased, or undefined. */
export function charsetFromContentType(contentType: string | null | undefined): string | undefined {
  if (!contentType) return undefined;
  const match = /;\s*charset\s*=\s*("?)([^";\s]+)\1/i.exec(contentType);
  return match?.[2]?.toLowerCase();
}

function sniffBom(bytes: Uint8Array): string | undefined {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return "utf-8";
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return "utf-16be";
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return "utf-16le";
  return undefined;
}

/** Finds a charset declared inside an HTML or XML document's first 4096 bytes. */
export function charsetFromMarkup(bytes: Uint8Array): string | undefined {
  const head = Buffer.from(bytes.subarray(0, 4096)).toString("latin1");
  const xml = /^\s*<\?xml[^>]*\bencoding\s*=\s*["']([^"']+)["']/i.exec(head);
  if (xml?.[1]) return xml[1].toLowerCase();
  for (const tag of head.match(/<meta\b[^>]*>/gi) ?? []) {
    const direct = /\bcharset\s*=\s*["']?\s*([^"'\s/>;]+)/i.exec(tag);
    if (direct?.[1]) return direct[1].toLowerCase();
  }
  return undefined;
}

/** True when TextDecoder knows the label. */
export function isKnownCharset(label: string): boolean {
  try {
    new TextDecoder(label);
    return true;
  } catch {
    return false;
  }
}

/**
 * Picks the encoding for a body: BOM, then the header's charset, then a charset declared in the markup
 * (when `sniffMarkup`), then "utf-8". Unknown labels are skipped. Returns a TextDecoder encoding name.
 */
export function detectCharset(bytes: Uint8Array, contentType: string | null | undefined, sniffMarkup: boolean): string {
  const candidates = [
    sniffBom(bytes),
    charsetFromContentType(contentType),
    sniffMarkup ? charsetFromMarkup(bytes) : undefined,
  ];
  for (const label of candidates) {
    if (label && isKnownCharset(label)) return new TextDecoder(label).encoding;
  }
  return "utf-8";
}

/**
 * Decodes `bytes` with `encoding`. When `cut` is true (the body was truncated), an incomplete multi-byte
 * sequence at the end is dropped instead of becoming U+FFFD.
 */
export function decodeBody(bytes: Uint8Array, encoding: string, cut: boolean): string {
  const decoder = new TextDecoder(encoding);
  return decoder.decode(bytes, { stream: cut });
}
