/**
 * Turning a fetched body into the `content` string of web_fetch: HTML converted to text, limited to 100 KB.
 *
 * HTML (text/html, application/xhtml+xml, or an untyped body that starts like HTML) becomes readable text; other
 * text types (text/*, JSON, XML, JavaScript, YAML, CSV… and `+json`/`+xml` suffixes) pass through decoded;
 * binary types (images, audio, video, PDF, archives, octet-stream…) are refused before their body is read.
 */
import { ToolExecutionError } from "../../core/errors.js";
import { decodeBody, detectCharset } from "./charset.js";
import { htmlToReadableText } from "./html-to-text.js";

/** The most `content` holds: 100 KB of UTF-8 (100 000 bytes). */
export const CONTENT_LIMIT_BYTES = 100_000;

const TEXT_APPLICATION = new Set([
  "json",
  "xml",
  "xhtml+xml",
  "javascript",
  "ecmascript",
  "x-javascript",
  "x-yaml",
  "yaml",
  "toml",
  "x-toml",
  "csv",
  "sql",
  "graphql",
  "x-sh",
  "x-www-form-urlencoded",
  "x-ndjson",
  "ndjson",
  "rtf",
]);

/** The media type of a Content-Type value, lower-cased without parameters ("" when absent). */
export function mediaType(contentType: string | null | undefined): string {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase();
}

/** What kind of body a media type announces: "html", "text", "binary", or "unknown" (no Content-Type). */
export function bodyKind(contentType: string | null | undefined): "html" | "text" | "binary" | "unknown" {
  const type = mediaType(contentType);
  if (!type) return "unknown";
  if (type === "text/html" || type === "application/xhtml+xml") return "html";
  if (type.startsWith("text/")) return "text";
  const [top, sub = ""] = type.split("/");
  if (top === "application" && (TEXT_APPLICATION.has(sub) || sub.endsWith("+json") || sub.endsWith("+xml"))) {
    return "text";
  }
  if (top === "image" && sub === "svg+xml") return "text";
  return "binary";
}

function looksBinary(bytes: Uint8Array): boolean {
  const sample = bytes.subarray(0, 1024);
  let control = 0;
  for (const b of sample) {
    if (b === 0) return true;
    if (b < 7 || (b > 13 && b < 32)) control++;
  }
  return sample.length > 0 && control / sample.length > 0.1;
}

function looksLikeHtml(text: string): boolean {
  return /^\s*(<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>])/i.test(text.slice(0, 1024));
}

/** Error for a binary response, raised before its body is read. */
export function binaryRefusal(url: string, contentType: string): ToolExecutionError {
  return new ToolExecutionError(
    `${url} is ${mediaType(contentType) || "binary data"}, not text; web_fetch only returns text (HTML, plain text, JSON, XML…). Fetch a text page instead, e.g. the page that links to this file.`,
    { url, contentType, rule: "binary_content" },
  );
}

/** Cuts `text` to at most `limitBytes` of UTF-8 without splitting a character. */
export function capUtf8(text: string, limitBytes: number): { text: string; cut: boolean } {
  if (Buffer.byteLength(text, "utf8") <= limitBytes) return { text, cut: false };
  const bytes = Buffer.from(text, "utf8").subarray(0, limitBytes);
  return { text: new TextDecoder("utf-8").decode(bytes, { stream: true }), cut: true };
}

/**
 * Decodes and converts a fetched body into model-facing content (HTML → readable text, other text as is),
 * capped at CONTENT_LIMIT_BYTES. `bodyCut` says the body was already cut at maxSize. Throws ToolExecutionError
 * for an untyped body that turns out to be binary.
 */
export function bodyToContent(
  bytes: Uint8Array,
  contentType: string,
  url: string,
  bodyCut: boolean,
  limitBytes = CONTENT_LIMIT_BYTES,
): { content: string; truncated: boolean } {
  let kind = bodyKind(contentType);
  if (kind === "binary") throw binaryRefusal(url, contentType);
  if (kind === "unknown" && looksBinary(bytes)) throw binaryRefusal(url, contentType);
  const encoding = detectCharset(bytes, contentType, kind !== "text" || /xml/.test(mediaType(contentType)));
  let text = decodeBody(bytes, encoding, bodyCut);
  if (kind === "unknown") kind = looksLikeHtml(text) ? "html" : "text";
  let htmlCut = false;
  if (kind === "html") {
    const readable = htmlToReadableText(text, url);
    text = readable.text;
    htmlCut = readable.cut;
  }
  const capped = capUtf8(text, limitBytes);
  return { content: capped.text, truncated: bodyCut || htmlCut || capped.cut };
}
