/**
 * web_fetch on allowed loopback pages: clean text within caps, charsets, binary refusal, size and time limits.
 * The test server is reached through the allowedHosts setting, the only way a private address is fetched.
 */
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trigger } from "../../src/core/trigger.js";
import type { WebFetchResult } from "../../src/tools/builtin/web-fetch.js";
import { until } from "../helpers/until.js";
import { startServer, type TestServer, webRuntime } from "./servers.js";

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url));

let server: TestServer;
let hanging = 0;

beforeAll(async () => {
  server = await startServer(async (req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    switch (path) {
      case "/article":
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
        res.end(fixture("article.html"));
        return;
      case "/latin1":
        res.writeHead(200, { "content-type": "text/html" });
        res.end(fixture("latin1.html"));
        return;
      case "/sjis":
        res.writeHead(200, { "content-type": "text/plain; charset=Shift_JIS" });
        res.end(fixture("shift_jis.txt"));
        return;
      case "/json":
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"ok":true,"items":[1,2,3]}');
        return;
      case "/plain":
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("line one\nline two\n");
        return;
      case "/missing":
        res.writeHead(404, { "content-type": "text/plain" });
        res.end("no such page");
        return;
      case "/png":
        res.writeHead(200, { "content-type": "image/png" });
        res.end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]));
        return;
      case "/untyped-binary":
        res.removeHeader("content-type");
        res.writeHead(200);
        res.end(Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0, 0, 0]));
        return;
      case "/untyped-html":
        res.writeHead(200);
        res.end("<!doctype html><html><head><title>Untyped</title></head><body><p>Sniffed as HTML.</p></body></html>");
        return;
      case "/chunked-huge": {
        // No Content-Length: 2 MB of text in chunks; the reader must stop at maxSize.
        res.writeHead(200, { "content-type": "text/plain" });
        const chunk = "abcdefghij".repeat(6553);
        for (let i = 0; i < 32 && !res.destroyed; i++) {
          if (!res.write(chunk)) await new Promise((r) => res.once("drain", r));
        }
        res.end();
        return;
      }
      case "/lying-length": {
        // Content-Length claims 10 bytes less than the cap; the body actually sent is far above maxSize.
        res.writeHead(200, { "content-type": "text/plain", "content-length": String(400_000) });
        res.end("x".repeat(400_000));
        return;
      }
      case "/big-text":
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
        res.end("é".repeat(150_000));
        return;
      case "/gzip":
        res.writeHead(200, { "content-type": "text/plain", "content-encoding": "gzip" });
        res.end(gzipSync(Buffer.from("z".repeat(1_000_000))));
        return;
      case "/redirect-rel":
        res.writeHead(301, { location: "/plain" });
        res.end();
        return;
      case "/deep":
        res.writeHead(200, { "content-type": "text/html" });
        res.end(
          `<html><head><title>Deep</title></head><body>${"<div>".repeat(20_000)}bottom &amp; text${"</div>".repeat(20_000)}</body></html>`,
        );
        return;
      case "/huge-html":
        res.writeHead(200, { "content-type": "text/html" });
        res.end(
          `<html><head><title>Huge</title></head><body>${"<p>filler <b>words</b> here</p>".repeat(100_000)}</body></html>`,
        );
        return;
      case "/hang":
        hanging++;
        // Never answers; the tool's budget or the caller's cancel must end the call.
        return;
      default:
        res.writeHead(500);
        res.end();
    }
  });
});

afterAll(async () => {
  await server.close();
});

// web_fetch's own 100 KB content cap is tested here: the runtime-wide result cap (48 KiB by default) is raised.
const settings = { allowedHosts: ["127.0.0.1"], maxResultBytes: 1024 * 1024 };

async function fetchOk(path: string, args: Record<string, unknown> = {}): Promise<WebFetchResult> {
  const { call } = webRuntime();
  const outcome = await call("web_fetch", { url: `${server.origin}${path}`, ...args }, { settings });
  if (!outcome.ok) throw new Error(`${path}: ${outcome.error.code} ${outcome.error.message}`);
  return outcome.result as WebFetchResult;
}

describe("web_fetch content", () => {
  it("turns an article page into clean text, main content first, links absolute", async () => {
    const result = await fetchOk("/article");
    expect(result).toMatchObject({ url: `${server.origin}/article`, status: 200, truncated: false });
    expect(result.contentType).toBe("text/html; charset=utf-8");
    const text = result.content;
    expect(text.startsWith("# Tide Pools of the Northern Coast")).toBe(true);
    expect(text).toContain("Tide pools are rocky depressions");
    expect(text).toContain("What lives there");
    expect(text).toContain(`ochre sea stars [${server.origin}/species/ochre-sea-star]`);
    expect(text).toMatch(/Middle\s+Mussels, goose barnacles/);
    for (const noise of [
      "SCRIPT-SHOULD-NOT-APPEAR",
      "NavAboutLink",
      "FooterCopyright",
      "SidebarAdvertisement",
      "font-family",
      "javascript:",
    ]) {
      expect(text).not.toContain(noise);
    }
    expect(text).not.toMatch(/<[a-z]/i);
  });

  it("passes other text types through and returns non-2xx statuses as results", async () => {
    expect((await fetchOk("/plain")).content).toBe("line one\nline two\n");
    expect(JSON.parse((await fetchOk("/json")).content)).toEqual({ ok: true, items: [1, 2, 3] });
    expect(await fetchOk("/missing")).toMatchObject({ status: 404, content: "no such page", truncated: false });
    expect((await fetchOk("/untyped-html")).content).toContain("Sniffed as HTML.");
    expect(await fetchOk("/redirect-rel")).toMatchObject({ url: `${server.origin}/plain`, status: 200 });
  });

  it("decodes a Latin-1 page declared by <meta charset> and a Shift_JIS text body without U+FFFD", async () => {
    const latin = await fetchOk("/latin1");
    expect(latin.content).toContain("Café naïve");
    expect(latin.content).toContain("Grüße aus München: à la carte, crème brûlée, señor, © 2026.");
    expect(latin.content).not.toContain("\uFFFD");
    const sjis = await fetchOk("/sjis");
    expect(sjis.content).toBe("日本語のテキスト: こんにちは、世界。東京都千代田区。\n半角ｶﾀｶﾅ と 全角カタカナ。\n");
    expect(sjis.content).not.toContain("\uFFFD");
  });

  it("refuses binary types with a clear error", async () => {
    const { call } = webRuntime();
    for (const path of ["/png", "/untyped-binary"]) {
      const outcome = await call("web_fetch", { url: `${server.origin}${path}` }, { settings });
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) {
        expect(outcome.error.code).toBe("execution_failed");
        expect(outcome.error.message).toMatch(/not text; web_fetch only returns text/);
      }
    }
  });
});

describe("web_fetch through the function-id API", () => {
  it("answers trigger('tool::web_fetch', { url, maxSize }) as in the seed's example, and refuses SSRF there too", async () => {
    const { runtime } = webRuntime();
    const result = await trigger<WebFetchResult>(
      "tool::web_fetch",
      { url: `${server.origin}/article`, maxSize: 100_000 },
      { runtime, services: { webAllowedHosts: ["127.0.0.1"] } },
    );
    expect(result.status).toBe(200);
    expect(result.content.slice(0, 500)).toContain("Tide pools are rocky depressions");
    await expect(
      trigger("tool::web_fetch", { url: `http://2130706433:${server.port}/article` }, { runtime }),
    ).rejects.toMatchObject({
      code: "access_denied",
    });
  });
});

describe("web_fetch limits", () => {
  it("cuts a chunked body at maxSize", async () => {
    const result = await fetchOk("/chunked-huge", { maxSize: 1000 });
    expect(result.truncated).toBe(true);
    expect(result.content).toBe("abcdefghij".repeat(100));
  });

  it("cuts at maxSize whatever Content-Length says", async () => {
    const result = await fetchOk("/lying-length", { maxSize: 5000 });
    expect(result.truncated).toBe(true);
    expect(result.content.length).toBe(5000);
  });

  it("caps content at 100 KB without splitting a character", async () => {
    const result = await fetchOk("/big-text");
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.content, "utf8")).toBe(100_000);
    expect(result.content).not.toContain("\uFFFD");
  });

  it("applies maxSize to the decompressed body", async () => {
    const result = await fetchOk("/gzip", { maxSize: 2000 });
    expect(result).toMatchObject({ truncated: true, content: "z".repeat(2000) });
  });

  it("survives hostile markup: 20 000-deep nesting and a 3 MB page convert within the caps", async () => {
    const deep = await fetchOk("/deep");
    expect(deep.content).toBe("# Deep\n\nbottom & text");
    const huge = await fetchOk("/huge-html", { maxSize: 5_000_000 });
    expect(huge.truncated).toBe(true);
    expect(huge.content.startsWith("# Huge\n\nfiller words here")).toBe(true);
    expect(Buffer.byteLength(huge.content, "utf8")).toBeLessThanOrEqual(100_000);
  });

  it("rejects a maxSize out of range as a validation error", async () => {
    const { call } = webRuntime();
    for (const maxSize of [0, -5, 1.5, 50_000_000, "10"]) {
      const outcome = await call("web_fetch", { url: `${server.origin}/plain`, maxSize }, { settings });
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) expect(outcome.error.code).toBe("validation_failed");
    }
  });

  // The time budget ending a hanging fetch (timeoutSeconds = 5, the minimum) is checked in
  // test/tools/time-budget.test.ts, with the other tools' budget checks.
  it("ends a hanging fetch on cancel (aborted)", async () => {
    const { call } = webRuntime();
    const controller = new AbortController();
    const pending = call("web_fetch", { url: `${server.origin}/hang` }, { settings, signal: controller.signal });
    const start = hanging;
    await until(() => hanging !== start, "the request to reach the hanging route");
    controller.abort();
    const aborted = await pending;
    expect(aborted.ok).toBe(false);
    if (!aborted.ok) expect(aborted.error.code).toBe("aborted");
  });

  it("exposes plain JSON Schema arguments and the documented settings", async () => {
    const { runtime } = webRuntime();
    const tool = runtime.registry.get("web_fetch")!;
    const schema = JSON.stringify(tool.definition.parameters);
    expect(schema).not.toMatch(/"(oneOf|anyOf|allOf|\$ref)"/);
    expect(tool.definition.parameters.required).toEqual(["url"]);
    expect(tool.settings.enabledByDefault).toBe(true);
    // Its own settings, plus the common ones every tool has (approval policy, output cap).
    expect(tool.settings.defaultParameters).toMatchObject({
      timeoutSeconds: 30,
      maxRedirects: 5,
      allowedHosts: [],
      maxResultBytes: 48 * 1024,
      maxResultLines: 2000,
    });
    expect(Object.keys(tool.settings.defaultParameters).sort()).toEqual([
      "allowedHosts",
      "approval",
      "approvalRules",
      "maxRedirects",
      "maxResultBytes",
      "maxResultLines",
      "timeoutSeconds",
    ]);
  });
});
