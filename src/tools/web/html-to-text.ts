/**
 * HTML to readable text for a model (web_fetch's `content` of an HTML page).
 *
 * The page is parsed with linkedom; links are made absolute against the page URL (non-http links lose their
 * target); Mozilla Readability extracts the main content, which is converted with html-to-text (no wrapping,
 * headings kept in their case, tables as aligned text, images and forms skipped). The output starts with the
 * page title as a "# Title" line, then the main content. When Readability finds no substantial article (short
 * pages, link lists) the whole body is converted instead, without script, style, navigation chrome or forms.
 */
import type { Readability } from "@mozilla/readability";
import type { HtmlToTextOptions } from "html-to-text";
import { htmlToText, linkedom, readability } from "./lazy-html.js";
import { nestingDepth, stripTags } from "./tag-scan.js";

/** The part of a linkedom element this module uses (the project compiles without the DOM lib). */
interface DomElement {
  getAttribute(name: string): string | null;
  setAttribute(name: string, value: string): void;
  removeAttribute(name: string): void;
  remove(): void;
  toString(): string;
}

const CONVERT_OPTIONS: HtmlToTextOptions = {
  wordwrap: false,
  preserveNewlines: false,
  selectors: [
    { selector: "a", options: { hideLinkHrefIfSameAsText: true, noAnchorUrl: true } },
    { selector: "img", format: "skip" },
    { selector: "svg", format: "skip" },
    { selector: "form", format: "skip" },
    { selector: "button", format: "skip" },
    { selector: "h1", options: { uppercase: false } },
    { selector: "h2", options: { uppercase: false } },
    { selector: "h3", options: { uppercase: false } },
    { selector: "h4", options: { uppercase: false } },
    { selector: "h5", options: { uppercase: false } },
    { selector: "h6", options: { uppercase: false } },
    { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false } },
  ],
};

/** Elements removed before the whole-body fallback conversion. */
const CHROME = "script, style, noscript, template, svg, iframe, object, embed, nav, header, footer, aside, form, head";

/**
 * Work limits, because the page is attacker-controlled and conversion is synchronous CPU work that blocks the
 * event loop. Measured here: Readability takes ~5 s on 1.3 MB / 20 000 elements and grows worse than quadratically
 * with nesting depth (8 s at depth 1000, minutes at 5000); html-to-text overflows the stack near depth 5000.
 * So: only the first HTML_MAX_CHARS characters are converted (the content is capped at 100 KB anyway), and
 * Readability runs only on documents within READABILITY_MAX_ELEMENTS elements and READABILITY_MAX_DEPTH
 * nesting; other documents get the whole-body conversion, and anything that still throws gets tag stripping.
 */
export const HTML_MAX_CHARS = 1_000_000;
/** Deepest nesting parsed at all; deeper pages get tag stripping (see htmlToReadableText). */
const PARSE_MAX_DEPTH = 5_000;
const READABILITY_MAX_ELEMENTS = 10_000;
const READABILITY_MAX_DEPTH = 80;

/** Minimum length (characters) of Readability's text for it to be used instead of the whole body. */
const MIN_ARTICLE_CHARS = 200;

/** Longest title kept (characters): an unclosed <title> runs to the end of the page, and a title is one line. */
const TITLE_MAX_CHARS = 300;

function titleLine(text: string): string {
  return text
    .slice(0, TITLE_MAX_CHARS * 4)
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, TITLE_MAX_CHARS);
}

function tidy(text: string): string {
  return text
    .replace(/\r\n?/g, "\n")
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** Result of htmlToReadableText. */
export interface ReadableText {
  /** The page title (from Readability or <title>), or "" when there is none. */
  title: string;
  /** "# Title" line (when there is a title), a blank line, then the main content as plain text. */
  text: string;
  /** True when Readability's article was used; false when the whole body was converted. */
  article: boolean;
  /** True when the HTML was longer than HTML_MAX_CHARS and only its beginning was converted. */
  cut: boolean;
}

/**
 * Converts an HTML document to readable text, main content first. `pageUrl` makes relative links absolute.
 * Never throws for malformed HTML (parsers are lenient); returns empty text for an empty document.
 */
export function htmlToReadableText(input: string, pageUrl?: string): ReadableText {
  const cut = input.length > HTML_MAX_CHARS;
  const html = cut ? input.slice(0, HTML_MAX_CHARS) : input;
  // The HTML parser's cost grows with the square of the nesting depth (measured here: 0.2 s at depth 16 000, 7 s at
  // 70 000): a page nested past any real one is stripped of its tags without being parsed.
  if (nestingDepth(html, PARSE_MAX_DEPTH) > PARSE_MAX_DEPTH) return { ...strippedText(html), cut };
  try {
    return { ...convertDocument(html, pageUrl), cut };
  } catch {
    // Pathological markup (e.g. nesting deep enough to exhaust the stack): strip tags instead.
    return { ...strippedText(html), cut };
  }
}

/** The conversion of last resort: tags stripped in one linear pass (tag-scan.ts), entities decoded. */
function strippedText(html: string): Omit<ReadableText, "cut"> {
  const stripped = stripTags(html);
  const title = titleLine(decodeEntities(stripped.title.slice(0, TITLE_MAX_CHARS * 4)));
  const body = tidy(decodeEntities(stripped.text.replace(/[ \t]+/g, " ")));
  return { title, text: title && !body.startsWith(title) ? `# ${title}\n\n${body}` : body, article: false };
}

function decodeEntities(text: string): string {
  const named: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, code: string) => {
    if (code[0] === "#") {
      const n = code[1] === "x" || code[1] === "X" ? Number.parseInt(code.slice(2), 16) : Number(code.slice(1));
      return Number.isFinite(n) && n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : whole;
    }
    return named[code.toLowerCase()] ?? whole;
  });
}

/** Parses the page and makes its links absolute (non-http links lose their target). */
function prepare(html: string, pageUrl?: string) {
  const { document } = linkedom().parseHTML(html);
  for (const a of Array.from(document.querySelectorAll("a[href]")) as DomElement[]) {
    const href = a.getAttribute("href") ?? "";
    let absolute: URL | undefined;
    try {
      absolute = new URL(href, pageUrl);
    } catch {
      absolute = undefined;
    }
    if (absolute && (absolute.protocol === "http:" || absolute.protocol === "https:")) {
      a.setAttribute("href", absolute.href);
    } else {
      a.removeAttribute("href");
    }
  }
  return document;
}

/** The part of a linkedom element the tree walk uses. */
interface TreeNode {
  firstElementChild: TreeNode | null;
  nextElementSibling: TreeNode | null;
}

/**
 * Element count and maximum nesting depth, without recursion (pages can nest thousands deep) and without
 * `children`, which linkedom rebuilds on every access. Stops early once a limit is passed.
 */
function measure(root: TreeNode | null | undefined, stopAt: { elements: number; depth: number }) {
  let elements = 0;
  let depth = 0;
  const stack: [TreeNode, number][] = root ? [[root, 1]] : [];
  while (stack.length > 0) {
    const [node, level] = stack.pop()!;
    elements++;
    if (level > depth) depth = level;
    if (elements > stopAt.elements || depth > stopAt.depth) break;
    for (let child = node.firstElementChild; child; child = child.nextElementSibling) stack.push([child, level + 1]);
  }
  return { elements, depth };
}

function convertDocument(html: string, pageUrl?: string): Omit<ReadableText, "cut"> {
  let document = prepare(html, pageUrl);
  const titleTag = titleLine(document.querySelector("title")?.textContent ?? "");

  let article: ReturnType<Readability<string>["parse"]> = null;
  let mutated = false;
  const size = measure(document.documentElement as unknown as TreeNode, {
    elements: READABILITY_MAX_ELEMENTS,
    depth: READABILITY_MAX_DEPTH,
  });
  if (size.elements <= READABILITY_MAX_ELEMENTS && size.depth <= READABILITY_MAX_DEPTH) {
    try {
      mutated = true;
      article = new (readability().Readability)(document as never, { charThreshold: MIN_ARTICLE_CHARS }).parse();
    } catch {
      article = null;
    }
  }
  const articleText = article?.content ? tidy(htmlToText().convert(article.content, CONVERT_OPTIONS)) : "";
  let body: string;
  let usedArticle: boolean;
  if (articleText.length >= MIN_ARTICLE_CHARS) {
    body = articleText;
    usedArticle = true;
  } else {
    // Readability mutates the document it reads: start again from the markup for the whole-body conversion.
    if (mutated) document = prepare(html, pageUrl);
    for (const node of Array.from(document.querySelectorAll(CHROME)) as DomElement[]) node.remove();
    const root = document.querySelector("body") ?? document.documentElement;
    body = tidy(htmlToText().convert(root?.toString() ?? "", CONVERT_OPTIONS));
    if (body.length < articleText.length) body = articleText;
    usedArticle = false;
  }
  const title = titleLine(article?.title ?? "") || titleTag;
  const text = title && !body.startsWith(title) ? `# ${title}\n\n${body}` : body;
  return { title, text, article: usedArticle };
}
