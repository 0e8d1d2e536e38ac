/**
 * HTML libraries loaded on first use rather than at import time: every CLI command and MCP session imports the
 * built-in tools, and these parsers cost a few hundred milliseconds to load. `require` keeps the call sites
 * synchronous; each package ships a CommonJS build.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The linkedom DOM implementation (parseHTML). */
export function linkedom(): typeof import("linkedom") {
  return require("linkedom");
}

/** html-to-text (convert). */
export function htmlToText(): typeof import("html-to-text") {
  return require("html-to-text");
}

/** Mozilla Readability. */
export function readability(): typeof import("@mozilla/readability") {
  return require("@mozilla/readability");
}
