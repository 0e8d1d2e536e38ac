import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HeadTailCapture, utf8Prefix, utf8Suffix } from "../../src/tools/shell/output-cap.js";

const MARKER = /\n\[\.\.\. (\d+) bytes, (\d+) lines cut here \.\.\.\]\n/;

function capture(text: string, cap: number, chunkSizes: number[] = [7]): ReturnType<HeadTailCapture["result"]> {
  const bytes = Buffer.from(text, "utf8");
  const c = new HeadTailCapture(cap);
  let at = 0;
  let i = 0;
  while (at < bytes.length) {
    const size = Math.max(1, chunkSizes[i++ % chunkSizes.length] ?? 1);
    c.push(bytes.subarray(at, at + size));
    at += size;
  }
  return c.result();
}

describe("UTF-8 boundaries", () => {
  it("never cuts a character in half at either end", () => {
    const text = Buffer.from("a😀é€b", "utf8"); // 1 + 4 + 2 + 3 + 1 bytes
    for (let max = 0; max <= text.length; max++) {
      const head = utf8Prefix(text, max).toString("utf8");
      const tail = utf8Suffix(text, max).toString("utf8");
      expect(head).not.toContain("\uFFFD");
      expect(tail).not.toContain("\uFFFD");
      expect("a😀é€b".startsWith(head)).toBe(true);
      expect("a😀é€b".endsWith(tail)).toBe(true);
      expect(Buffer.byteLength(head)).toBeLessThanOrEqual(max);
      expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(max);
    }
  });
});

describe("HeadTailCapture", () => {
  it("returns short output verbatim", () => {
    const out = capture("hello\nwörld\n", 1024);
    expect(out).toEqual({ text: "hello\nwörld\n", truncated: false, totalBytes: 13 });
  });

  it("keeps head and tail of long output with a marker stating the dropped bytes, within the cap", () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i}`).join("\n");
    const out = capture(lines, 2048, [4096, 3, 100]);
    expect(out.truncated).toBe(true);
    expect(Buffer.byteLength(out.text)).toBeLessThanOrEqual(2048);
    expect(out.text.startsWith("line 0\nline 1\n")).toBe(true);
    expect(out.text.endsWith("line 4998\nline 4999")).toBe(true);
    const [head, tail] = out.text.split(MARKER.exec(out.text)?.[0] ?? "\0");
    const dropped = Number(MARKER.exec(out.text)?.[1]);
    expect(dropped).toBe(Buffer.byteLength(lines) - Buffer.byteLength(head ?? "") - Buffer.byteLength(tail ?? ""));
  });

  it("keeps multi-byte characters whole at every cap and chunking", () => {
    for (const unit of ["😀é", "€", "é", "a😀"]) {
      const text = unit.repeat(2000);
      for (let cap = 256; cap < 300; cap++) {
        for (const chunks of [[1], [5], [4096], [3, 1000]]) {
          const out = capture(text, cap, chunks);
          expect(out.truncated).toBe(true);
          expect(Buffer.byteLength(out.text)).toBeLessThanOrEqual(cap);
          const [head, tail] = out.text.split(MARKER);
          expect(text.startsWith(head ?? "x"), `head at cap ${cap}`).toBe(true);
          expect(out.text.endsWith(unit), `tail at cap ${cap}`).toBe(true);
          expect(text.endsWith(out.text.slice(out.text.lastIndexOf("]\n") + 2))).toBe(true);
          expect(head).not.toContain("\uFFFD");
          void tail;
        }
      }
    }
  });

  it("holds the cap, keeps characters whole, and counts the elided bytes exactly (property)", () => {
    fc.assert(
      fc.property(
        fc
          .string({ unit: "binary", maxLength: 3000 })
          .filter(
            (s) => !s.includes("\uFFFD") && !/[\uD800-\uDFFF]/.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, "")),
          ),
        fc.integer({ min: 256, max: 1500 }),
        fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 5 }),
        (text, cap, chunks) => {
          const out = capture(text, cap, chunks);
          const total = Buffer.byteLength(text);
          expect(out.totalBytes).toBe(total);
          expect(Buffer.byteLength(out.text)).toBeLessThanOrEqual(cap);
          if (total <= cap) {
            expect(out).toEqual({ text, truncated: false, totalBytes: total });
            return;
          }
          expect(out.truncated).toBe(true);
          const match = MARKER.exec(out.text);
          expect(match).not.toBeNull();
          const head = out.text.slice(0, match?.index);
          const tail = out.text.slice((match?.index ?? 0) + (match?.[0].length ?? 0));
          expect(text.startsWith(head)).toBe(true);
          expect(text.endsWith(tail)).toBe(true);
          expect(head + tail).not.toContain("\uFFFD");
          expect(Number(match?.[1])).toBe(total - Buffer.byteLength(head) - Buffer.byteLength(tail));
          const breaks = (t: string) => t.split("\n").length - 1;
          expect(Number(match?.[2])).toBe(breaks(text) - breaks(head) - breaks(tail));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("stays exact and compact with a slow writer's one-byte chunks", () => {
    const text = Array.from({ length: 20_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
    const out = capture(text, 4096, [1]);
    const [head, , , tail] = out.text.split(MARKER);
    expect(text.startsWith(head ?? "x")).toBe(true);
    expect(text.endsWith(tail ?? "x")).toBe(true);
    expect(Buffer.byteLength(out.text)).toBeLessThanOrEqual(4096);
    expect(Buffer.byteLength(out.text)).toBeGreaterThan(4000);
  });

  it("does not keep the dropped middle in memory", () => {
    const c = new HeadTailCapture(4096);
    const chunk = Buffer.alloc(64 * 1024, 0x79);
    for (let i = 0; i < 200; i++) c.push(chunk); // 12.5 MiB through a 4 KiB cap
    const out = c.result();
    expect(out.totalBytes).toBe(200 * 64 * 1024);
    expect(Buffer.byteLength(out.text)).toBeLessThanOrEqual(4096);
    expect(c.retainedBytes).toBeLessThanOrEqual(4096 + 64 * 1024);
    for (let i = 0; i < 200; i++) c.push(chunk);
    expect(c.retainedBytes).toBeLessThanOrEqual(4096 + 64 * 1024);
    expect(Buffer.byteLength(c.result().text)).toBeLessThanOrEqual(4096);
  });
});
