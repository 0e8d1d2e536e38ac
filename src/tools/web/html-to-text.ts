/**
 * HTML to readable text for a model (002_b22707b29eca2f2a.txt, "tool::web_fetch": "HTML converted to text").
 *
 * The page is parsed with linkedom; links are made absolute against the page URL (non-http links lose their
 * target); Mozilla Readability extracts the main content, which is converted with html-to-text (no wrapping,
 * headings kept in their case, tables as aligned text, images and forms skipped). The output starts with the
 * page title as a "# Title" line, then the main content. When Readability finds no substantial article (short
 * pages, link lists) the whole body is converted instead, without script, style, navigation chrome or forms.
 */
import { Readability } from "@mozilla/readability";
import { convert, type HtmlToTextOptions } from "html-to-text";
import { parseHTML } from "linkedom";

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
 * Pages longer than this (characters of HTML) skip Readability, whose cost grows steeply with size (about 5 s
 * for 1.3 MB here); their body is converted directly. The content is capped at 100 KB anyway.
 */
const READABILITY_MAX_CHARS = 600_000;

/** Minimum length (characters) of Readability's text for it to be used instead of the whole body. */
const MIN_ARTICLE_CHARS = 200;

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
}

/**
 * Converts an HTML document to readable text, main content first. `pageUrl` makes relative links absolute.
 * Never throws for malformed HTML (parsers are lenient); returns empty text for an empty document.
 */
export function htmlToReadableText(html: string, pageUrl?: string): ReadableText {
  try {
    return convertDocument(html, pageUrl);
  } catch {
    // Pathological markup (e.g. nesting deep enough to exhaust the stack): strip tags instead.
    const title = (/<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1] ?? "").replace(/\s+/g, " ").trim();
    const body = tidy(
      decodeEntities(
        html
          .replace(/<(script|style|noscript|template|head)\b[\s\S]*?<\/\1\s*>/gi, " ")
          .replace(/<br\s*\/?>|<\/(p|div|li|h[1-6]|tr|section|article)\s*>/gi, "\n")
          .replace(/<[^>]*>/g, " ")
          .replace(/[ \t]+/g, " "),
      ),
    );
    return { title, text: title && !body.startsWith(title) ? `# ${title}\n\n${body}` : body, article: false };
  }
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
  const { document } = parseHTML(html);
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

function convertDocument(html: string, pageUrl?: string): ReadableText {
  let document = prepare(html, pageUrl);
  const titleTag = (document.querySelector("title")?.textContent ?? "").replace(/\s+/g, " ").trim();

  let article: ReturnType<Readability<string>["parse"]> = null;
  let mutated = false;
  if (html.length <= READABILITY_MAX_CHARS) {
    try {
      mutated = true;
      article = new Readability(document as never, { charThreshold: MIN_ARTICLE_CHARS }).parse();
    } catch {
      article = null;
    }
  }
  const articleText = article?.content ? tidy(convert(article.content, CONVERT_OPTIONS)) : "";
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
    body = tidy(convert(root?.toString() ?? "", CONVERT_OPTIONS));
    if (body.length < articleText.length) body = articleText;
    usedArticle = false;
  }
  const title = (article?.title ?? "").replace(/\s+/g, " ").trim() || titleTag;
  const text = title && !body.startsWith(title) ? `# ${title}\n\n${body}` : body;
  return { title, text, article: usedArticle };
}
