/**
 * Search providers of web_search: Tavily, Brave, DuckDuckGo.
 *
 * - Tavily: `POST {base}/search`, JSON `{ query, max_results, search_depth: "basic" }`,
 *   `Authorization: Bearer <TAVILY_API_KEY>`; response `{ results: [{ title, url, content, score }] }`.
 * - Brave: `GET {base}/res/v1/web/search?q=…&count=…`, headers `Accept: application/json` and
 *   `X-Subscription-Token: <BRAVE_API_KEY>`; response `{ web: { results: [{ title, url, description }] } }`
 *   (descriptions carry <strong> highlighting, stripped here).
 * - DuckDuckGo: `POST {base}/html/` with the form field `q` (no key); the HTML results page is parsed: each
 *   `.result` (ads `.result--ad` skipped) has `a.result__a` (title; href is a `//duckduckgo.com/l/?uddg=<url>`
 *   redirect or the URL itself) and `.result__snippet`.
 *
 * Base URLs and keys are host configuration, never model input: they come from the `webSearch` service of the
 * ToolContext or from the environment (TAVILY_API_KEY, TAVILY_BASE_URL, BRAVE_API_KEY, BRAVE_BASE_URL,
 * DUCKDUCKGO_BASE_URL). They are deliberately not per-user tool settings: a user who could point a base URL at a
 * server of theirs would receive the operator's API key. Provider requests therefore do not go through the SSRF
 * guard (a loopback fake in tests needs no allowedHosts); the result URLs are returned, never fetched.
 */

import { ToolExecutionError } from "../../core/errors.js";
import { readCapped } from "./fetch.js";
import { htmlToText, linkedom } from "./lazy-html.js";
import { SEARCH_PROVIDERS, type SearchProviderName, WEB_SEARCH_SERVICE } from "./search-names.js";
import { loadUndici } from "./undici.js";

export { SEARCH_PROVIDERS, type SearchProviderName, WEB_SEARCH_SERVICE };

/** One search result as web_search returns it. */
export interface SearchResult {
  title: string;
  url: string;
  /** Snippet or extracted content, plain text. */
  content: string;
}

/** Per-provider configuration: the API key and the base URL (scheme, host, optional path prefix). */
export interface SearchProviderConfig {
  apiKey?: string;
  baseUrl?: string;
}

/** Search configuration a host passes as the `webSearch` service (each field overrides the environment). */
export interface WebSearchConfig {
  tavily?: SearchProviderConfig;
  brave?: SearchProviderConfig;
  duckduckgo?: { baseUrl?: string };
}

export const DEFAULT_BASE_URLS: Record<SearchProviderName, string> = {
  tavily: "https://api.tavily.com",
  brave: "https://api.search.brave.com",
  duckduckgo: "https://html.duckduckgo.com",
};

/** Resolved configuration: every provider has a base URL; keys may be absent. */
export type ResolvedSearchConfig = Record<SearchProviderName, { apiKey?: string; baseUrl: string }>;

function nonEmpty(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

/** Merges the host's WebSearchConfig over the environment and the default base URLs. */
export function resolveSearchConfig(
  config: WebSearchConfig | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedSearchConfig {
  return {
    tavily: {
      apiKey: nonEmpty(config?.tavily?.apiKey) ?? nonEmpty(env.TAVILY_API_KEY),
      baseUrl: nonEmpty(config?.tavily?.baseUrl) ?? nonEmpty(env.TAVILY_BASE_URL) ?? DEFAULT_BASE_URLS.tavily,
    },
    brave: {
      apiKey: nonEmpty(config?.brave?.apiKey) ?? nonEmpty(env.BRAVE_API_KEY),
      baseUrl: nonEmpty(config?.brave?.baseUrl) ?? nonEmpty(env.BRAVE_BASE_URL) ?? DEFAULT_BASE_URLS.brave,
    },
    duckduckgo: {
      baseUrl:
        nonEmpty(config?.duckduckgo?.baseUrl) ?? nonEmpty(env.DUCKDUCKGO_BASE_URL) ?? DEFAULT_BASE_URLS.duckduckgo,
    },
  };
}

/**
 * Which provider serves a request: the asked one when it needs no key or has one; otherwise DuckDuckGo (the documented
 * "fallback to duckduckgo"). With no provider asked: `preferred` ("auto" means Tavily, then Brave, when keyed).
 */
export function chooseProvider(
  asked: SearchProviderName | undefined,
  config: ResolvedSearchConfig,
  preferred: SearchProviderName | "auto" = "auto",
): SearchProviderName {
  const usable = (p: SearchProviderName) => p === "duckduckgo" || !!config[p].apiKey;
  const want = asked ?? (preferred === "auto" ? undefined : preferred);
  if (want) return usable(want) ? want : "duckduckgo";
  if (usable("tavily")) return "tavily";
  if (usable("brave")) return "brave";
  return "duckduckgo";
}

/** The environment variable holding `provider`'s API key, or undefined for DuckDuckGo (no key). */
export function missingKeyVariable(provider: SearchProviderName): string | undefined {
  return KEY_NAMES[provider] || undefined;
}

const RESPONSE_LIMIT_BYTES = 4_000_000;
const PROVIDER_TITLES: Record<SearchProviderName, string> = {
  tavily: "Tavily",
  brave: "Brave",
  duckduckgo: "DuckDuckGo",
};
const KEY_NAMES: Record<SearchProviderName, string> = {
  tavily: "TAVILY_API_KEY",
  brave: "BRAVE_API_KEY",
  duckduckgo: "",
};

function endpoint(base: string, path: string): URL {
  const root = base.endsWith("/") ? base : `${base}/`;
  return new URL(path.replace(/^\//, ""), root);
}

/** Plain text of an HTML fragment (tags stripped, entities decoded, whitespace collapsed). */
export function fragmentText(html: string | undefined | null): string {
  if (!html) return "";
  return htmlToText()
    .convert(html, { wordwrap: false, selectors: [{ selector: "a", options: { ignoreHref: true } }] })
    .replace(/\s+/g, " ")
    .trim();
}

async function call(
  provider: SearchProviderName,
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string },
  signal: AbortSignal | undefined,
): Promise<{ status: number; text: string }> {
  const name = PROVIDER_TITLES[provider];
  const { fetch } = await loadUndici();
  let response: Awaited<ReturnType<typeof fetch>>;
  try {
    response = await fetch(url, { ...init, signal, redirect: "follow" });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    const cause = (error as { cause?: Error }).cause;
    throw new ToolExecutionError(
      `${name} search could not be reached (${(cause as NodeJS.ErrnoException | undefined)?.code ?? cause?.message ?? (error as Error).message}). Try again later or use another provider.`,
      { provider },
    );
  }
  const { body } = await readCapped(response, RESPONSE_LIMIT_BYTES).catch((error) => {
    if (signal?.aborted) throw signal.reason;
    throw new ToolExecutionError(`Reading the ${name} response failed: ${(error as Error).message}.`, { provider });
  });
  const text = new TextDecoder("utf-8").decode(body);
  if (response.status === 401 || response.status === 403) {
    throw new ToolExecutionError(
      `${name} refused the request (HTTP ${response.status})${KEY_NAMES[provider] ? `: check ${KEY_NAMES[provider]}` : ""}. Try provider "duckduckgo".`,
      { provider, status: response.status },
    );
  }
  if (response.status === 429) {
    throw new ToolExecutionError(
      `${name} rate-limited the request (HTTP 429). Wait and retry, or use another provider.`,
      {
        provider,
        status: 429,
      },
    );
  }
  if (response.status < 200 || response.status >= 300) {
    throw new ToolExecutionError(`${name} answered HTTP ${response.status}. Try again later or use another provider.`, {
      provider,
      status: response.status,
    });
  }
  return { status: response.status, text };
}

function parseJson(provider: SearchProviderName, text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    if (value && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new ToolExecutionError(`${PROVIDER_TITLES[provider]} returned a response that is not a JSON object.`, {
    provider,
  });
}

function str(value: unknown): string {
  return typeof value === "string" ? value : "";
}

/** Tavily /search. */
export async function searchTavily(
  query: string,
  maxResults: number,
  config: { apiKey?: string; baseUrl: string },
  signal?: AbortSignal,
): Promise<SearchResult[]> {
  const { text } = await call(
    "tavily",
    endpoint(config.baseUrl, "search"),
    {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${config.apiKey ?? ""}` },
      body: JSON.stringify({ query, max_results: maxResults, search_depth: "basic", include_answer: false }),
    },
    signal,
  );
  const data = parseJson("tavily", text);
  const results = Array.isArray(data.results) ? (data.results as Record<string, unknown>[]) : [];
  return results
    .map((r) => ({ title: str(r.title).trim(), url: str(r.url), content: str(r.content).trim() }))
    .filter((r) => r.url !== "")
    .slice(0, maxResults);
}

/** Brave web search. */
export async function searchBrave(
  query: string,
  maxResults: number,
  config: { apiKey?: string; baseUrl: string },
  signal?: AbortSignal,
): Promise<SearchResult[]> {
  const url = endpoint(config.baseUrl, "res/v1/web/search");
  url.searchParams.set("q", query);
  url.searchParams.set("count", String(Math.min(maxResults, 20)));
  const { text } = await call(
    "brave",
    url,
    { method: "GET", headers: { accept: "application/json", "x-subscription-token": config.apiKey ?? "" } },
    signal,
  );
  const data = parseJson("brave", text);
  const web = data.web as { results?: unknown } | undefined;
  const results = Array.isArray(web?.results) ? (web.results as Record<string, unknown>[]) : [];
  return results
    .map((r) => ({ title: fragmentText(str(r.title)), url: str(r.url), content: fragmentText(str(r.description)) }))
    .filter((r) => r.url !== "")
    .slice(0, maxResults);
}

/** The target of a DuckDuckGo result link: the `uddg` parameter of its /l/ redirect, or the href itself. */
export function duckDuckGoTarget(href: string): string | undefined {
  let url: URL;
  try {
    url = new URL(href, "https://duckduckgo.com/");
  } catch {
    return undefined;
  }
  const target = url.searchParams.get("uddg");
  if (target) {
    try {
      url = new URL(target);
    } catch {
      return undefined;
    }
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  if (!target && /(^|\.)duckduckgo\.com$/.test(url.hostname)) return undefined;
  return url.href;
}

/** The part of a linkedom element the DuckDuckGo parser uses. */
interface DomElement {
  getAttribute(name: string): string | null;
  querySelector(selector: string): DomElement | null;
  classList: { contains(name: string): boolean };
  textContent: string | null;
}

/** Parses a DuckDuckGo HTML results page into results (ads skipped). */
export function parseDuckDuckGoHtml(html: string, maxResults: number): SearchResult[] {
  const { document } = linkedom().parseHTML(html);
  const out: SearchResult[] = [];
  for (const node of Array.from(document.querySelectorAll(".result")) as DomElement[]) {
    if (out.length >= maxResults) break;
    if (node.classList.contains("result--ad")) continue;
    const link = node.querySelector("a.result__a");
    if (!link) continue;
    const url = duckDuckGoTarget(link.getAttribute("href") ?? "");
    if (!url) continue;
    const title = (link.textContent ?? "").replace(/\s+/g, " ").trim();
    const content = (node.querySelector(".result__snippet")?.textContent ?? "").replace(/\s+/g, " ").trim();
    out.push({ title, url, content });
  }
  return out;
}

/** DuckDuckGo HTML results. Throws ToolExecutionError when the page is a bot challenge rather than results. */
export async function searchDuckDuckGo(
  query: string,
  maxResults: number,
  config: { baseUrl: string },
  signal?: AbortSignal,
): Promise<SearchResult[]> {
  const { text, status } = await call(
    "duckduckgo",
    endpoint(config.baseUrl, "html/"),
    {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        accept: "text/html",
        "user-agent": "Mozilla/5.0 (compatible; Toolhost/0.1; +web_search)",
      },
      body: new URLSearchParams({ q: query, b: "" }).toString(),
    },
    signal,
  );
  const results = parseDuckDuckGoHtml(text, maxResults);
  if (
    results.length === 0 &&
    !/no-results|No results/i.test(text) &&
    (status === 202 || /anomaly|captcha/i.test(text))
  ) {
    throw new ToolExecutionError(
      "DuckDuckGo answered with a bot-check page instead of results. Retry later, or configure TAVILY_API_KEY or BRAVE_API_KEY.",
      { provider: "duckduckgo", status },
    );
  }
  return results;
}

/** Runs one search on `provider`. */
export function runSearch(
  provider: SearchProviderName,
  query: string,
  maxResults: number,
  config: ResolvedSearchConfig,
  signal?: AbortSignal,
): Promise<SearchResult[]> {
  switch (provider) {
    case "tavily":
      return searchTavily(query, maxResults, config.tavily, signal);
    case "brave":
      return searchBrave(query, maxResults, config.brave, signal);
    case "duckduckgo":
      return searchDuckDuckGo(query, maxResults, config.duckduckgo, signal);
  }
}
