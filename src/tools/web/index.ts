/**
 * `toolhost/web`: the web tools' guards, usable on their own — the SSRF guard (address policy, a guarded undici
 * agent that checks every connection and redirect), a guarded fetch with size and time caps, and HTML to
 * readable text.
 */
export { type GuardedFetchOptions, type GuardedFetchResult, guardedFetch } from "./fetch.js";
export { htmlToReadableText, type ReadableText } from "./html-to-text.js";
export {
  type AddressPins,
  assertNoSsrf,
  createGuardedAgent,
  type HostResolver,
  type SsrfPolicy,
} from "./ssrf.js";
