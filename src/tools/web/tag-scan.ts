/**
 * One linear pass over HTML tags, for the work limits of the HTML conversion (html-to-text.ts): how deep a page
 * nests, and tag stripping when a page is too hostile to parse. Attacker-controlled markup must not make either
 * quadratic, so there are no backtracking regular expressions over the page: every search moves forward, and a
 * search that finds nothing ends the pass (an unclosed comment, tag or `<script>` runs to the end of the page).
 */

/** Elements without content: they never nest. */
const VOID = new Set([
  "area",
  "base",
  "br",
  "col",
  "embed",
  "hr",
  "img",
  "input",
  "link",
  "meta",
  "param",
  "source",
  "track",
  "wbr",
]);

/** Elements whose end tag may be left out (a parser closes them implicitly): not counted as nesting. */
const OPTIONAL_END = new Set(["p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "rb", "rt", "rp"]);

/** Elements whose content is raw text up to their end tag, never tags. */
const RAW_TEXT = new Set(["script", "style", "textarea", "title", "xmp", "noscript", "template", "iframe"]);

/** One tag the scan found, its `name` in lowercase. */
interface ScannedTag {
  name: string;
  closing: boolean;
  selfClosing: boolean;
  /** For a raw-text element's start tag: its content (up to its end tag, which the scan then skips). */
  raw?: string;
}

/**
 * Calls `visit(text, tag)` for every run of text and the tag after it (`tag` undefined after the last text), in
 * order; stops when `visit` returns false. Comments and doctypes are skipped. Linear in the length of `html`.
 */
function scanTags(html: string, visit: (text: string, tag: ScannedTag | undefined) => boolean): void {
  // A lowercase copy to find raw-text end tags in, made only for a page that has such an element.
  let lower: string | undefined;
  let at = 0;
  while (at < html.length) {
    const lt = html.indexOf("<", at);
    if (lt < 0) break;
    const text = html.slice(at, lt);
    if (html.startsWith("<!--", lt)) {
      const end = html.indexOf("-->", lt + 4);
      if (!visit(text, undefined) || end < 0) return;
      at = end + 3;
      continue;
    }
    const gt = html.indexOf(">", lt + 1);
    if (gt < 0) break;
    const inner = html.slice(lt + 1, gt);
    const match = /^(\/?)([a-zA-Z][^\s/>]*)/.exec(inner);
    if (!match) {
      // "<!doctype …>", "<?xml …?>", or a "<" that opens no tag: a doctype is skipped, other text kept.
      if (!visit(inner.startsWith("!") || inner.startsWith("?") ? text : `${text}<`, undefined)) return;
      at = inner.startsWith("!") || inner.startsWith("?") ? gt + 1 : lt + 1;
      continue;
    }
    const name = (match[2] as string).toLowerCase();
    const tag: ScannedTag = { name, closing: match[1] === "/", selfClosing: inner.endsWith("/") };
    at = gt + 1;
    if (!tag.closing && !tag.selfClosing && RAW_TEXT.has(name)) {
      lower ??= html.toLowerCase();
      const end = lower.indexOf(`</${name}`, at);
      tag.raw = html.slice(at, end < 0 ? html.length : end);
      if (end < 0) at = html.length;
      else {
        const close = html.indexOf(">", end);
        at = close < 0 ? html.length : close + 1;
      }
    }
    if (!visit(text, tag)) return;
  }
  visit(html.slice(at), undefined);
}

/**
 * How deep the page's elements nest, counting open tags minus close tags (void elements, self-closing tags and
 * elements whose end tag is optional do not count). Stops counting once past `limit`, and returns that depth.
 */
export function nestingDepth(html: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  scanTags(html, (_text, tag) => {
    if (!tag || tag.selfClosing || tag.raw !== undefined || VOID.has(tag.name) || OPTIONAL_END.has(tag.name)) {
      return true;
    }
    depth = tag.closing ? Math.max(0, depth - 1) : depth + 1;
    if (depth > deepest) deepest = depth;
    return deepest <= limit;
  });
  return deepest;
}

/** Where stripped text breaks lines: after these elements end, and at `<br>`. */
const BLOCK = new Set(["p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "section", "article", "br"]);

/**
 * The page's title and its text with every tag removed: raw-text elements (scripts, styles, templates) dropped,
 * a line break where a block ends, a space for any other tag. Entities are left for the caller to decode.
 */
export function stripTags(html: string): { title: string; text: string } {
  const parts: string[] = [];
  let title = "";
  scanTags(html, (text, tag) => {
    parts.push(text);
    if (!tag) return true;
    if (tag.name === "title" && tag.raw !== undefined) title ||= tag.raw;
    parts.push(BLOCK.has(tag.name) && (tag.closing || tag.name === "br") ? "\n" : " ");
    return true;
  });
  return { title, text: parts.join("") };
}
