/**
 * The SSRF-checked HTTP GET behind web_fetch.
 *
 * Redirects are followed by hand (`redirect: "manual"`), at most `maxRedirects` times, and every hop goes through
 * assertNoSsrf again before anything is sent to it. All hops share one guarded undici Agent (see ssrf.ts), which
 * connects only to checked addresses. The body is read as a stream and cut at `maxBytes` whatever
 * Content-Length says; the caller's signal (the tool's time budget) aborts everything.
 */
import type { Response } from "undici";
import { AccessDeniedError, ToolError, ToolExecutionError } from "../../core/errors.js";
import { type AddressPins, assertNoSsrf, createGuardedAgent, type SsrfPolicy } from "./ssrf.js";
import { loadUndici } from "./undici.js";

/** Options of guardedFetch. */
export interface GuardedFetchOptions extends SsrfPolicy {
  /** Stop reading the body after this many bytes (decompressed); `truncated` then says so. */
  maxBytes: number;
  /** Redirects followed before giving up (0 = none followed). Default 5. */
  maxRedirects?: number;
  /** Aborts the request and the body read (the tool's time budget or the caller's cancel). */
  signal?: AbortSignal;
  /**
   * Called with each redirect's target (and the URL that redirected) before anything is sent to it; may throw to
   * refuse the hop (web_fetch: a host its approval rules deny or ask about).
   */
  checkRedirect?: (target: URL, from: string) => void;
  /** Called with the response headers before the body is read; may throw to refuse it (e.g. binary types). */
  inspect?: (response: Response, url: URL) => void;
  /** Extra trusted TLS root certificates (PEM), e.g. an intranet CA; the system roots stay trusted. */
  ca?: string | Buffer | (string | Buffer)[];
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/** What guardedFetch returns. */
export interface GuardedFetchResult {
  /** The final URL after redirects. */
  url: string;
  status: number;
  /** The Content-Type header, or "" when absent. */
  contentType: string;
  /** The body, at most maxBytes long. */
  body: Uint8Array;
  /** True when the body was longer than maxBytes and was cut. */
  truncated: boolean;
  /** Every URL requested, in order (the first is the input). */
  chain: string[];
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** User-Agent sent by web_fetch. */
export const DEFAULT_USER_AGENT = "Toolhost-web_fetch/0.1";

/** Reads a response body up to `maxBytes`; cancels the rest. */
export async function readCapped(
  response: Response,
  maxBytes: number,
): Promise<{ body: Uint8Array; truncated: boolean }> {
  if (!response.body) return { body: new Uint8Array(0), truncated: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.byteLength > maxBytes) {
      chunks.push(value.subarray(0, maxBytes - size));
      size = maxBytes;
      truncated = true;
      await reader.cancel().catch(() => {});
      break;
    }
    chunks.push(value);
    size += value.byteLength;
  }
  return { body: Buffer.concat(chunks, size), truncated };
}

/**
 * GETs `url` with the SSRF guard on every hop. Throws AccessDeniedError when a hop is refused (nothing is sent to
 * it), ToolExecutionError for too many redirects, a redirect without Location, or a network failure; rethrows the
 * signal's reason when aborted.
 */
export async function guardedFetch(url: string, options: GuardedFetchOptions): Promise<GuardedFetchResult> {
  const policy: SsrfPolicy = { resolver: options.resolver, allowedHosts: options.allowedHosts };
  const pins: AddressPins = new Map();
  const { fetch } = await loadUndici();
  const agent = await createGuardedAgent(policy, pins, options.ca ? { ca: options.ca } : {});
  const maxRedirects = options.maxRedirects ?? 5;
  const chain: string[] = [];
  try {
    let current = url;
    for (let hop = 0; ; hop++) {
      let checked: Awaited<ReturnType<typeof assertNoSsrf>>;
      try {
        checked = await assertNoSsrf(current, policy);
      } catch (error) {
        const from = chain[chain.length - 1];
        if (from && error instanceof AccessDeniedError) {
          throw new AccessDeniedError(`Redirect from ${from} to ${current} refused: ${error.message}`, {
            ...error.details,
            redirectFrom: from,
            redirectTo: current,
          });
        }
        throw error;
      }
      pins.set(checked.host, checked.addresses);
      chain.push(checked.url.href);
      let response: Response;
      try {
        response = await fetch(checked.url.href, {
          dispatcher: agent,
          redirect: "manual",
          signal: options.signal,
          headers: {
            "user-agent": DEFAULT_USER_AGENT,
            accept: "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5",
            ...options.headers,
          },
        });
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        const cause = (error as { cause?: unknown }).cause;
        if (cause instanceof ToolError) throw cause;
        const detail =
          cause instanceof Error ? `${(cause as NodeJS.ErrnoException).code ?? ""} ${cause.message}` : String(error);
        throw new ToolExecutionError(
          `Fetching ${checked.url.href} failed: ${detail.trim()}. Check the URL or try later.`,
          {
            url: checked.url.href,
          },
        );
      }
      const location = response.headers.get("location");
      if (REDIRECTS.has(response.status)) {
        await response.body?.cancel().catch(() => {});
        if (!location) {
          throw new ToolExecutionError(`${checked.url.href} answered ${response.status} without a Location header.`, {
            url: checked.url.href,
            status: response.status,
          });
        }
        if (hop >= maxRedirects) {
          throw new ToolExecutionError(
            `Too many redirects (more than ${maxRedirects}) starting at ${url}; last one pointed to ${location}. Fetch the final URL directly.`,
            { url, chain },
          );
        }
        let next: URL;
        try {
          next = new URL(location, checked.url);
        } catch {
          throw new ToolExecutionError(
            `${checked.url.href} redirected to an invalid URL "${location.slice(0, 200)}".`,
            {
              url: checked.url.href,
            },
          );
        }
        options.checkRedirect?.(next, checked.url.href);
        current = next.href;
        continue;
      }
      options.inspect?.(response, checked.url);
      const { body, truncated } = await readCapped(response, options.maxBytes).catch((error) => {
        if (options.signal?.aborted) throw options.signal.reason;
        throw new ToolExecutionError(`Reading the body of ${checked.url.href} failed: ${(error as Error).message}.`, {
          url: checked.url.href,
        });
      });
      return {
        url: checked.url.href,
        status: response.status,
        contentType: response.headers.get("content-type") ?? "",
        body,
        truncated,
        chain,
      };
    }
  } finally {
    agent.destroy().catch(() => {});
  }
}
