/**
 * web_search against loopback fakes of Tavily (/search), Brave (/res/v1/web/search) and DuckDuckGo (/html/),
 * built from the providers' documented request and response formats.
 */
import { readFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { WebSearchResult } from "../../src/tools/builtin/web-search.js";
import { duckDuckGoTarget, parseDuckDuckGoHtml } from "../../src/tools/web/search-providers.js";
import { startServer, type TestServer, webRuntime } from "./servers.js";

const ddgPage = readFileSync(new URL("./fixtures/duckduckgo-results.html", import.meta.url), "utf8");

interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage["headers"];
  body: string;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

const ENV_NAMES = [
  "TAVILY_API_KEY",
  "TAVILY_BASE_URL",
  "BRAVE_API_KEY",
  "BRAVE_BASE_URL",
  "DUCKDUCKGO_BASE_URL",
] as const;
const savedEnv = new Map<string, string | undefined>();

let fake: TestServer;
let seen: Seen[] = [];
let mode: "normal" | "unauthorized" | "challenge" = "normal";

beforeAll(async () => {
  // Real keys in the environment must neither change these tests' outcomes nor be sent anywhere.
  for (const name of ENV_NAMES) {
    savedEnv.set(name, process.env[name]);
    delete process.env[name];
  }
  fake = await startServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const body = await readBody(req);
    seen.push({ method: req.method ?? "", path: url.pathname, query: url.searchParams, headers: req.headers, body });
    if (mode === "unauthorized") {
      res.writeHead(401, { "content-type": "application/json" });
      res.end('{"detail":{"error":"Unauthorized: missing or invalid API key."}}');
      return;
    }
    if (url.pathname === "/tavily/search" && req.method === "POST") {
      const request = JSON.parse(body) as { query: string; max_results: number };
      // Shape of Tavily's documented /search response.
      const all = [
        {
          title: "Async Patterns | Docs",
          url: "https://docs.example.org/async",
          content: "Promise.all runs work in parallel.",
          score: 0.91,
          raw_content: null,
        },
        {
          title: "Cancellation",
          url: "https://docs.example.org/abort",
          content: "AbortSignal cancels fetches.",
          score: 0.84,
          raw_content: null,
        },
        {
          title: "Generators",
          url: "https://docs.example.org/gen",
          content: "for await iterates streams.",
          score: 0.5,
          raw_content: null,
        },
      ];
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          query: request.query,
          answer: null,
          images: [],
          results: all.slice(0, request.max_results),
          response_time: "1.02",
        }),
      );
      return;
    }
    if (url.pathname === "/brave/res/v1/web/search" && req.method === "GET") {
      const count = Number(url.searchParams.get("count") ?? 20);
      // Shape of Brave's documented WebSearchApiResponse (type "search", web.results[] of SearchResult).
      const results = [
        {
          type: "search_result",
          title: "<strong>TypeScript</strong> async &amp; await",
          url: "https://www.example.com/ts-async",
          description: "Learn <strong>async</strong> patterns: it&#x27;s simpler than callbacks.",
          age: "2 days ago",
          language: "en",
          family_friendly: true,
          meta_url: { scheme: "https", netloc: "example.com", hostname: "www.example.com", path: "› ts-async" },
        },
        {
          type: "search_result",
          title: "Promises explained",
          url: "https://blog.example.net/promises",
          description: "Chaining, errors and microtasks.",
          family_friendly: true,
        },
      ];
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          type: "search",
          query: { original: url.searchParams.get("q"), more_results_available: false },
          mixed: { type: "mixed", main: [{ type: "web", index: 0, all: false }] },
          web: { type: "search", results: results.slice(0, count), family_friendly: true },
        }),
      );
      return;
    }
    if (url.pathname === "/ddg/html/" && req.method === "POST") {
      if (mode === "challenge") {
        res.writeHead(202, { "content-type": "text/html" });
        res.end("<html><body><form id='challenge-form'>anomaly detected: select all squares</form></body></html>");
        return;
      }
      res.writeHead(200, { "content-type": "text/html; charset=UTF-8" });
      res.end(ddgPage);
      return;
    }
    res.writeHead(404);
    res.end();
  });
});

afterAll(async () => {
  await fake.close();
  for (const [name, value] of savedEnv) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

afterEach(() => {
  seen = [];
  mode = "normal";
});

const config = (keys: { tavily?: string; brave?: string } = {}) => ({
  webSearch: {
    tavily: { apiKey: keys.tavily, baseUrl: `${fake.origin}/tavily` },
    brave: { apiKey: keys.brave, baseUrl: `${fake.origin}/brave` },
    duckduckgo: { baseUrl: `${fake.origin}/ddg` },
  },
});

async function search(
  args: Record<string, unknown>,
  services: Record<string, unknown>,
  settings?: Record<string, unknown>,
) {
  const { call } = webRuntime();
  return call("web_search", args, { services, settings });
}

async function searchOk(
  args: Record<string, unknown>,
  services: Record<string, unknown>,
  settings?: Record<string, unknown>,
) {
  const outcome = await search(args, services, settings);
  if (!outcome.ok) throw new Error(`${outcome.error.code}: ${outcome.error.message}`);
  return outcome.result as WebSearchResult;
}

describe("web_search providers", () => {
  it("Tavily: POST /search with a Bearer key and max_results; results mapped", async () => {
    const result = await searchOk(
      { query: "typescript async", provider: "tavily", maxResults: 2 },
      config({ tavily: "tvly-test" }),
    );
    expect(result).toEqual({
      provider: "tavily",
      results: [
        {
          title: "Async Patterns | Docs",
          url: "https://docs.example.org/async",
          content: "Promise.all runs work in parallel.",
        },
        { title: "Cancellation", url: "https://docs.example.org/abort", content: "AbortSignal cancels fetches." },
      ],
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.authorization).toBe("Bearer tvly-test");
    expect(seen[0]!.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(seen[0]!.body)).toMatchObject({ query: "typescript async", max_results: 2 });
  });

  it("Brave: GET /res/v1/web/search with X-Subscription-Token and count; highlighting stripped", async () => {
    const result = await searchOk({ query: "ts async", provider: "brave" }, config({ brave: "brave-key" }));
    expect(result).toEqual({
      provider: "brave",
      results: [
        {
          title: "TypeScript async & await",
          url: "https://www.example.com/ts-async",
          content: "Learn async patterns: it's simpler than callbacks.",
        },
        {
          title: "Promises explained",
          url: "https://blog.example.net/promises",
          content: "Chaining, errors and microtasks.",
        },
      ],
    });
    expect(seen[0]!.headers["x-subscription-token"]).toBe("brave-key");
    expect(seen[0]!.headers.accept).toBe("application/json");
    expect(seen[0]!.query.get("q")).toBe("ts async");
    expect(seen[0]!.query.get("count")).toBe("5");
  });

  it("DuckDuckGo: POST /html/ with q; ads and non-http results skipped, uddg targets decoded", async () => {
    const result = await searchOk({ query: "typescript async patterns", provider: "duckduckgo" }, config());
    expect(result.provider).toBe("duckduckgo");
    expect(result.results).toEqual([
      {
        title: "Async Patterns in TypeScript & JavaScript",
        url: "https://docs.example.org/async-patterns?v=2&lang=en",
        content: "Use async/await with Promise.all for parallel work, and AbortSignal for cancellation.",
      },
      {
        title: "Understanding Promises",
        url: "https://blog.example.net/posts/promises",
        content: "A walk through promise chaining, error handling and microtasks.",
      },
      {
        title: "Async Generators and for await",
        url: "https://www.example.com/ts/generators",
        content: "Iterate over streams with for await...of.",
      },
    ]);
    expect(new URLSearchParams(seen[0]!.body).get("q")).toBe("typescript async patterns");
    expect(parseDuckDuckGoHtml(ddgPage, 2)).toHaveLength(2);
    expect(duckDuckGoTarget("//duckduckgo.com/l/?uddg=file%3A%2F%2F%2Fetc%2Fpasswd")).toBeUndefined();
  });

  it("falls back to DuckDuckGo when the asked provider has no key, and says so in provider", async () => {
    for (const provider of ["tavily", "brave"]) {
      seen = [];
      const result = await searchOk({ query: "q", provider }, config());
      expect(result.provider).toBe("duckduckgo");
      expect(seen.map((s) => s.path)).toEqual(["/ddg/html/"]);
      expect(result.notice).toContain(provider === "tavily" ? "TAVILY_API_KEY is not set" : "BRAVE_API_KEY is not set");
    }
    // A provider that has its key (or none asked for) carries no notice.
    expect((await searchOk({ query: "q", provider: "tavily" }, config({ tavily: "t" }))).notice).toBeUndefined();
    expect((await searchOk({ query: "q" }, config())).notice).toBeUndefined();
  });

  it("when the fallback fails too, the error names the missing variable, not just DuckDuckGo", async () => {
    mode = "challenge";
    try {
      const outcome = await search({ query: "q", provider: "tavily" }, config());
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) {
        expect(outcome.error.message).toMatch(/^tavily was asked for, but TAVILY_API_KEY is not set/);
        expect(outcome.error.details).toMatchObject({ missingVariable: "TAVILY_API_KEY" });
      }
      // The defaultProvider setting counts as asking, too.
      const viaSetting = await search({ query: "q" }, config(), { defaultProvider: "brave" });
      expect(!viaSetting.ok && viaSetting.error.message).toMatch(/BRAVE_API_KEY is not set/);
    } finally {
      mode = "normal";
    }
  });

  it("without a provider: Tavily when keyed, else Brave when keyed, else DuckDuckGo; or the defaultProvider setting", async () => {
    expect((await searchOk({ query: "q" }, config({ tavily: "t", brave: "b" }))).provider).toBe("tavily");
    expect((await searchOk({ query: "q" }, config({ brave: "b" }))).provider).toBe("brave");
    expect((await searchOk({ query: "q" }, config())).provider).toBe("duckduckgo");
    expect(
      (await searchOk({ query: "q" }, config({ tavily: "t", brave: "b" }), { defaultProvider: "brave" })).provider,
    ).toBe("brave");
  });

  it("reads keys and base URLs from the environment when the host passes no configuration", async () => {
    process.env.TAVILY_API_KEY = "tvly-env";
    process.env.TAVILY_BASE_URL = `${fake.origin}/tavily`;
    try {
      const result = await searchOk({ query: "env", provider: "tavily", maxResults: 1 }, {});
      expect(result.provider).toBe("tavily");
      expect(result.results).toHaveLength(1);
      expect(seen[0]!.headers.authorization).toBe("Bearer tvly-env");
    } finally {
      delete process.env.TAVILY_API_KEY;
      delete process.env.TAVILY_BASE_URL;
    }
  });

  it("reports provider failures as classified errors that say what to do", async () => {
    mode = "unauthorized";
    const denied = await search({ query: "q", provider: "brave" }, config({ brave: "wrong" }));
    expect(denied.ok).toBe(false);
    if (!denied.ok) {
      expect(denied.error.code).toBe("execution_failed");
      expect(denied.error.message).toMatch(/HTTP 401.*BRAVE_API_KEY/);
    }
    mode = "challenge";
    const challenged = await search({ query: "q", provider: "duckduckgo" }, config());
    expect(challenged.ok).toBe(false);
    if (!challenged.ok) expect(challenged.error.message).toMatch(/bot-check/);
  });

  it("validates arguments and keeps a plain JSON Schema", async () => {
    for (const args of [
      { query: "q", provider: "google" },
      { query: "q", maxResults: 0 },
      { query: "q", maxResults: 21 },
      {},
    ]) {
      const outcome = await search(args, config());
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) expect(outcome.error.code).toBe("validation_failed");
    }
    expect(seen).toEqual([]);
    const { runtime } = webRuntime();
    const tool = runtime.registry.get("web_search")!;
    expect(JSON.stringify(tool.definition.parameters)).not.toMatch(/"(oneOf|anyOf|allOf|\$ref)"/);
    expect(tool.settings.enabledByDefault).toBe(true);
  });
});
