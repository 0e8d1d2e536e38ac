/**
 * The SSRF guard of web_fetch: every URL it fetches, redirects included, goes through assertNoSsrf first.
 *
 * Three layers, each sufficient on its own for the cases it sees:
 * 1. assertNoSsrf(url) before every request and every redirect hop: http/https only, no credentials, no
 *    `localhost` names, IP literals classified, every address a name resolves to classified; the checked
 *    addresses are pinned for the hop.
 * 2. The undici connector (createGuardedAgent) connects to a pinned address, never resolving the name a second
 *    time (so DNS rebinding between check and connect cannot work), and checks any host it was not given a pin
 *    for itself (undici's `connect.lookup` hook is never called for IP-literal URLs; the connector is).
 * 3. After the TCP connection is made, the socket's remote address must be the address that was checked.
 *
 * The only way to reach a non-public address is the `allowedHosts` list (a tool setting, plus a host-provided
 * list): an entry names a host (`intranet.example`, `*.corp.example`) whose addresses are then not classified,
 * or an address / CIDR (`10.1.2.3`, `10.0.0.0/8`) that a resolved address may fall in.
 */
import { lookup } from "node:dns/promises";
import { isIP, type Socket } from "node:net";
import { rootCertificates } from "node:tls";
import type { Agent, buildConnector } from "undici";
import { AccessDeniedError, ToolExecutionError } from "../../core/errors.js";
import { addressInRange, canonicalAddress, classifyAddress, sameAddress } from "./address.js";
import { loadUndici } from "./undici.js";
import { checkUrlShape, denyFetch as deny, normalizeHost } from "./url-shape.js";

export { checkUrlShape, normalizeHost };

/** Resolves a host name to every address it has (IPv4 and IPv6 text). Throws when the name does not resolve. */
export type HostResolver = (hostname: string) => Promise<string[]>;

/** What the guard is configured with for one fetch. */
export interface SsrfPolicy {
  /** Name resolution; default: the system resolver (`dns.lookup` with `all: true`). Injectable for tests. */
  resolver?: HostResolver;
  /** Hosts, `*.suffix` patterns, addresses or CIDRs that may be fetched although they are not public. */
  allowedHosts?: readonly string[];
}

/** The result of a passed check: the URL and the addresses the connection may use (in order). */
export interface CheckedTarget {
  url: URL;
  /** Lower-case host name without brackets or trailing dot, e.g. "example.com", "::1". */
  host: string;
  /** Canonical addresses that passed the check; the connection is made to the first one. */
  addresses: string[];
  /** True when the host or its addresses were admitted by allowedHosts rather than by being public. */
  allowedByList: boolean;
}

/** The system resolver: every A and AAAA address of the name, in resolver order. */
export const systemResolver: HostResolver = async (hostname) => {
  const records = await lookup(hostname, { all: true, verbatim: true });
  return records.map((r) => r.address);
};

function isAddressEntry(entry: string): boolean {
  return entry.includes("/") || isIP(entry.replace(/^\[|\]$/g, "")) !== 0;
}

/** True when `host` (normalized) is named by an allowedHosts entry (exact, `*.suffix` or `.suffix`). */
export function hostIsAllowed(host: string, allowedHosts: readonly string[] = []): boolean {
  const h = normalizeHost(host);
  for (const raw of allowedHosts) {
    const entry = normalizeHost(raw);
    if (!entry) continue;
    if (isAddressEntry(entry)) {
      if (isIP(h) !== 0 && addressInRange(h, entry)) return true;
      continue;
    }
    if (entry.startsWith("*.") || entry.startsWith(".")) {
      const suffix = entry.slice(entry.indexOf("."));
      if (h.endsWith(suffix) && h.length > suffix.length) return true;
    } else if (h === entry) {
      return true;
    }
  }
  return false;
}

function addressIsAllowed(address: string, allowedHosts: readonly string[] = []): boolean {
  return allowedHosts.some((raw) => {
    const entry = normalizeHost(raw);
    return isAddressEntry(entry) && addressInRange(address, entry);
  });
}

/**
 * Checks that `input` may be fetched and returns the addresses the connection must use
 * (assertNoSsrf). Throws AccessDeniedError (code access_denied) for a refused scheme, credentials in the URL,
 * a `localhost` name, an odd IP spelling that survived URL parsing, or any non-public address among those the host
 * resolves to (unless allowed by `policy.allowedHosts`); ToolArgumentError for text that is not an absolute URL;
 * ToolExecutionError when the name does not resolve. The resolver is called exactly once per call.
 */
export async function assertNoSsrf(input: string | URL, policy: SsrfPolicy = {}): Promise<CheckedTarget> {
  const url = checkUrlShape(input);
  const host = normalizeHost(url.hostname);
  const allowedHosts = policy.allowedHosts ?? [];
  const listed = hostIsAllowed(host, allowedHosts);
  if (isIP(host) !== 0) {
    const verdict = classifyAddress(host);
    if (!verdict.public && !listed)
      deny(`The address ${host} is refused: ${verdict.reason}.`, { host, range: verdict.range });
    return { url, host, addresses: [canonicalAddress(host)!], allowedByList: !verdict.public };
  }
  // The WHATWG URL parser turns decimal, octal, hex and short dotted IPv4 into a dotted quad; anything numeric
  // left here is not a host name we can trust any resolver to read the same way.
  if (/^[0-9.]+$/.test(host) || /^0x[0-9a-f]+$/i.test(host.split(".").pop() ?? "")) {
    deny(`The host "${host}" is an unusual spelling of an IP address.`, { host });
  }
  if (!listed && (host === "localhost" || host.endsWith(".localhost"))) {
    deny(`The host "${host}" names this machine (loopback).`, { host, range: "loopback" });
  }

  let resolved: string[];
  try {
    resolved = await (policy.resolver ?? systemResolver)(host);
  } catch (error) {
    throw new ToolExecutionError(
      `The host "${host}" could not be resolved (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}). Check the URL's spelling.`,
      { host, rule: "dns" },
    );
  }
  const addresses = [...new Set(resolved.map((a) => canonicalAddress(a)).filter((a): a is string => !!a))];
  if (addresses.length === 0) {
    throw new ToolExecutionError(`The host "${host}" has no IP address. Check the URL's spelling.`, {
      host,
      rule: "dns",
    });
  }
  let viaList = listed;
  if (!listed) {
    for (const address of addresses) {
      const verdict = classifyAddress(address);
      if (verdict.public) continue;
      if (addressIsAllowed(address, allowedHosts)) {
        viaList = true;
        continue;
      }
      deny(`The host "${host}" resolves to ${address}, refused: ${verdict.reason}.`, {
        host,
        address,
        range: verdict.range,
      });
    }
  }
  return { url, host, addresses, allowedByList: viaList };
}

/**
 * Pinned addresses per host (normalized) for the life of one fetch: set by the caller after each assertNoSsrf,
 * read by the connector, so the connection goes to the checked address without a second lookup.
 */
export type AddressPins = Map<string, string[]>;

/**
 * An undici Agent whose connector enforces the policy on every connection, including each redirect hop made
 * through it: a pinned host connects to its first pinned address; an unpinned host (or an IP literal) is checked
 * by assertNoSsrf on the spot; after connecting, the socket's remote address must equal the address used,
 * else the socket is destroyed and the request fails with AccessDeniedError. `options.ca` adds trusted TLS roots
 * (an intranet's private CA); certificates are always verified against the URL's host name, not the address.
 */
export async function createGuardedAgent(
  policy: SsrfPolicy,
  pins: AddressPins,
  options: { connectTimeoutMs?: number; ca?: string | Buffer | (string | Buffer)[] } = {},
): Promise<Agent> {
  const { Agent, buildConnector } = await loadUndici();
  // Node replaces its root store when `ca` is given: keep the system roots and add the extra ones.
  const ca = options.ca ? [...rootCertificates, ...[options.ca].flat()] : undefined;
  const base = buildConnector({ timeout: options.connectTimeoutMs ?? 10_000, ...(ca ? { ca } : {}) });
  const connector: buildConnector.connector = (options, callback) => {
    const host = normalizeHost(options.hostname);
    const run = async (): Promise<string> => {
      const pinned = pins.get(host);
      if (pinned && pinned.length > 0) return pinned[0]!;
      const scheme = options.protocol === "https:" ? "https" : "http";
      const literal = isIP(host) === 6 ? `[${host}]` : host;
      const checked = await assertNoSsrf(
        `${scheme}://${literal}:${options.port || (scheme === "https" ? 443 : 80)}/`,
        policy,
      );
      pins.set(host, checked.addresses);
      return checked.addresses[0]!;
    };
    run().then(
      (address) => {
        // servername keeps TLS SNI and certificate checks on the name while the TCP connection uses the address.
        const servername = options.servername || (isIP(host) === 0 ? host : undefined);
        try {
          base({ ...options, hostname: address, ...(servername ? { servername } : {}) }, (error, socket) => {
            if (error || !socket) {
              callback(error ?? new Error("connection failed"), null);
              return;
            }
            const remote = (socket as Socket).remoteAddress;
            if (!sameAddress(address, remote)) {
              socket.destroy();
              callback(
                new AccessDeniedError(
                  `The connection to "${host}" reached ${remote ?? "an unknown address"} instead of the checked ${address}; refused.`,
                  { rule: "ssrf", host, address: remote ?? null },
                ),
                null,
              );
              return;
            }
            callback(null, socket);
          });
        } catch (error) {
          callback(error as Error, null);
        }
      },
      (error) => callback(error as Error, null),
    );
  };
  return new Agent({ connect: connector, connections: 4, pipelining: 1 });
}
