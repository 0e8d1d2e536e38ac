/**
 * The checks of a web_fetch URL that need neither the network nor address parsing (src/tools/web/ssrf.ts does the
 * rest): kept apart so web_fetch's registration does not load the address tables (ipaddr.js) before its first
 * call.
 */
import { AccessDeniedError, ToolArgumentError } from "../../core/errors.js";

/** Normalizes a URL host for comparisons: lower case, no IPv6 brackets, no trailing dots. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  while (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

/** Throws the AccessDeniedError (rule "ssrf") of a refused fetch, with the hint of the rule it broke. */
export function denyFetch(message: string, details: Record<string, unknown>, addressRule = true): never {
  const hint = addressRule
    ? ' web_fetch only fetches public addresses; an administrator can allow a private host with the web_fetch setting "allowedHosts".'
    : " web_fetch only fetches http:// and https:// URLs without credentials.";
  throw new AccessDeniedError(`${message}${hint}`, { rule: "ssrf", ...details });
}

/**
 * The checks of a URL that need no network: it parses as an absolute URL (ToolArgumentError otherwise), is http or
 * https, carries no credentials and names a host (AccessDeniedError otherwise). Returns the parsed URL. Used before
 * every request (through assertNoSsrf) and by the approval gate, so a URL web_fetch would refuse is refused before
 * anyone is asked about it.
 */
export function checkUrlShape(input: string | URL): URL {
  let url: URL;
  try {
    url = typeof input === "string" ? new URL(input) : new URL(input.href);
  } catch {
    throw new ToolArgumentError(
      `Invalid argument "url": ${JSON.stringify(String(input).slice(0, 200))} is not an absolute URL. Give a full http(s) URL such as https://example.com/page.`,
      { argument: "url", rule: "url" },
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    denyFetch(`The scheme "${url.protocol}" is not allowed.`, { scheme: url.protocol }, false);
  }
  if (url.username || url.password) denyFetch("URLs with credentials (user:password@) are not fetched.", {}, false);
  if (!normalizeHost(url.hostname)) denyFetch("The URL has no host.", {});
  return url;
}
