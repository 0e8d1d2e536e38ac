/**
 * The HTML conversion's last resort and its depth check (src/tools/web/tag-scan.ts): what they count and keep,
 * on the shapes a hostile page uses against a parser — extreme nesting, and openings that never close (a comment,
 * a script, a title, a tag, a lone "<"), each of which ends the scan instead of being searched for again.
 */
import { describe, expect, it } from "vitest";
import { htmlToReadableText } from "../../src/tools/web/html-to-text.js";
import { nestingDepth, stripTags } from "../../src/tools/web/tag-scan.js";

describe("nestingDepth", () => {
  it("counts open elements, not void, self-closing or optional-end ones, nor tags inside raw text", () => {
    expect(nestingDepth("<div><span>a</span><span>b</span></div>", 100)).toBe(2);
    expect(nestingDepth("<div><br><img src=x><hr/><input></div>", 100)).toBe(1);
    expect(nestingDepth("<ul><li>a<li>b<li>c</ul>", 100)).toBe(1);
    expect(nestingDepth(`<p>${"<p>x".repeat(1000)}`, 100)).toBe(0);
    expect(nestingDepth(`<script>${"<div>".repeat(1000)}</script><div></div>`, 100)).toBe(1);
    expect(nestingDepth(`<!-- ${"<div>".repeat(1000)} --><div></div>`, 100)).toBe(1);
    expect(nestingDepth("</div></div><div><div></div>", 100)).toBe(2);
  });

  it("stops counting once past the limit", () => {
    expect(nestingDepth("<b>".repeat(1_000_000), 5_000)).toBe(5_001);
  });
});

describe("stripTags", () => {
  it("keeps the text, breaks lines at block ends, drops scripts and styles, and finds the title", () => {
    const { title, text } = stripTags(
      "<!doctype html><html><head><title>T &amp; x</title><style>p{}</style></head><body><h1>Head</h1><p>a &lt; b</p>" +
        '<script>var s = "<p>not text</p>";</script>one<br>two <b>bold</b> 1 < 2</body></html>',
    );
    expect(title).toBe("T &amp; x");
    expect(text).not.toMatch(/not text|p\{\}|var s/);
    expect(text).toContain("Head");
    expect(text).toContain("a &lt; b\n");
    expect(text).toContain("one\ntwo");
    expect(text).toContain("bold");
    expect(text).toContain("1 < 2");
  });

  it("ends at an opening that never closes, keeping the text before it", () => {
    expect(stripTags(`before<!--${"<!--".repeat(100_000)}`).text).toBe("before");
    expect(stripTags(`before<script>${"<script>".repeat(100_000)}`).text.trim()).toBe("before");
    expect(stripTags(`before<div class="${"x".repeat(100_000)}`).text).toMatch(/^before<div class="x+$/);
    expect(stripTags(`a ${"<".repeat(100_000)}`).text).toBe(`a ${"<".repeat(100_000)}`);
    const unclosedTitle = stripTags(`<title>${"<title>".repeat(100_000)}`);
    expect(unclosedTitle.text.trim()).toBe("");
    expect(unclosedTitle.title.startsWith("<title><title>")).toBe(true);
  });
});

describe("htmlToReadableText on a page nested past any real one", () => {
  it("returns its stripped text and title (a short title line), entities decoded", () => {
    const html = `<html><head><title>Deep &amp; dark</title></head><body>${"<div>x ".repeat(99_000)}end &lt;3</body></html>`;
    const { title, text, article } = htmlToReadableText(html, "https://example.com/");
    expect(title).toBe("Deep & dark");
    expect(article).toBe(false);
    expect(text.startsWith("# Deep & dark\n\nx x x")).toBe(true);
    expect(text.endsWith("x end <3")).toBe(true);
    const untitled = htmlToReadableText(`<title>${"t".repeat(10_000)}${"<b>".repeat(6_000)}`);
    expect(untitled.title.length).toBeLessThanOrEqual(300);
  });
});
