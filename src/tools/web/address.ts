/**
 * Address classification for the SSRF guard: assertNoSsrf refuses requests to internal IP ranges.
 *
 * The rule is an allowlist, not a blocklist: an address is public only when ipaddr.js classifies it as plain
 * `unicast` (IPv4) or as `unicast` inside global unicast 2000::/3 (IPv6). Everything else is refused: private
 * (10/8, 172.16/12, 192.168/16), loopback, link-local (169.254/16 with the cloud metadata service, fe80::/10),
 * carrier-grade NAT (100.64/10), multicast, broadcast, unspecified (0.0.0.0/8, ::), reserved and documentation
 * ranges, benchmarking, IPv6 unique-local (fc00::/7), site-local, discard, Teredo. IPv6 forms that embed an IPv4
 * address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged
 * by the embedded IPv4 address.
 */
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/** The verdict on one IP address. */
export interface AddressVerdict {
  /** The address in canonical text form (IPv6 without brackets, zero-compressed). */
  address: string;
  /** True when the address is a public unicast address that web_fetch may connect to. */
  public: boolean;
  /** ipaddr.js range name (e.g. "loopback", "private", "linkLocal") or a more precise one of ours. */
  range: string;
  /** For refused addresses: a short human explanation, e.g. "loopback address". */
  reason?: string;
}

const RANGE_REASONS: Record<string, string> = {
  unspecified: "unspecified address (0.0.0.0/8 or ::)",
  broadcast: "broadcast address",
  multicast: "multicast address",
  linkLocal: "link-local address (169.254.0.0/16 holds cloud metadata services; fe80::/10)",
  loopback: "loopback address",
  carrierGradeNat: "carrier-grade NAT address (100.64.0.0/10)",
  private: "private network address",
  reserved: "reserved or documentation address",
  uniqueLocal: "IPv6 unique-local address (fc00::/7)",
  deprecatedSiteLocal: "IPv6 site-local address (fec0::/10)",
  discard: "IPv6 discard-only address (100::/64)",
  teredo: "Teredo tunnel address (its IPv4 endpoint cannot be checked)",
  benchmarking: "benchmarking address",
  amt: "AMT address",
  as112: "AS112 address",
  as112v6: "AS112 address",
  orchid: "ORCHID address",
  orchid2: "ORCHID address",
  droneRemoteIdProtocolEntityTags: "drone remote ID address",
  rfc6145: "IPv4-translated address",
  nat64Local: "local-use NAT64 address (64:ff9b:1::/48)",
  ipv4Compatible: "IPv4-compatible IPv6 address (::a.b.c.d, deprecated)",
  notGlobalUnicast: "IPv6 address outside global unicast 2000::/3",
};

function refused(address: string, range: string): AddressVerdict {
  return { address, public: false, range, reason: RANGE_REASONS[range] ?? `${range} address` };
}

function classifyV4(v4: ipaddr.IPv4, shown: string): AddressVerdict {
  const range = v4.range();
  if (range === "unicast") return { address: shown, public: true, range };
  return refused(shown, range);
}

/**
 * Classifies one IP address given as text (IPv4 dotted quad or IPv6, brackets and a zone id allowed).
 * Returns `public: false` for anything that is not a public unicast address, and also for text that is not a
 * canonical IP address at all (odd spellings such as "0x7f000001" or "127.1" are refused here, never
 * reinterpreted: the URL parser normalizes them before this is called).
 */
export function classifyAddress(input: string): AddressVerdict {
  let text = input.trim();
  if (text.startsWith("[") && text.endsWith("]")) text = text.slice(1, -1);
  const zone = text.indexOf("%");
  if (zone !== -1) return refused(text, "linkLocal");
  if (isIP(text) === 0) return { address: text, public: false, range: "invalid", reason: "not a canonical IP address" };
  const parsed = ipaddr.parse(text);
  if (parsed.kind() === "ipv4") return classifyV4(parsed as ipaddr.IPv4, parsed.toString());

  const v6 = parsed as ipaddr.IPv6;
  const shown = v6.toString();
  const parts = v6.parts;
  const range = v6.range();
  // Forms that carry an IPv4 address: judge the IPv4 address.
  if (range === "ipv4Mapped") return { ...classifyV4(v6.toIPv4Address(), shown), address: shown };
  if (parts.slice(0, 6).every((p) => p === 0)) {
    // ::/96: IPv4-compatible (deprecated) addresses, plus :: and ::1 which ipaddr.js names itself.
    if (range === "unspecified" || range === "loopback") return refused(shown, range);
    return refused(shown, "ipv4Compatible");
  }
  if (range === "rfc6052") {
    // 64:ff9b::/96 is well-known NAT64 and embeds the IPv4 target in its last 32 bits; 64:ff9b:1::/48 is local.
    if (parts[0] === 0x64 && parts[1] === 0xff9b && parts.slice(2, 6).every((p) => p === 0)) {
      const embedded = ipaddr.fromByteArray(v6.toByteArray().slice(12)) as ipaddr.IPv4;
      const verdict = classifyV4(embedded, shown);
      return verdict.public
        ? { ...verdict, range: "nat64" }
        : { ...verdict, reason: `NAT64 form of a ${verdict.reason}` };
    }
    return refused(shown, "nat64Local");
  }
  if (range === "6to4") {
    const bytes = v6.toByteArray();
    const embedded = ipaddr.fromByteArray(bytes.slice(2, 6)) as ipaddr.IPv4;
    const verdict = classifyV4(embedded, shown);
    return verdict.public ? { ...verdict, range: "6to4" } : { ...verdict, reason: `6to4 form of a ${verdict.reason}` };
  }
  if (range !== "unicast") return refused(shown, range);
  // Global unicast is 2000::/3; anything else ipaddr.js calls "unicast" is unassigned or special.
  if ((parts[0]! & 0xe000) !== 0x2000) return refused(shown, "notGlobalUnicast");
  return { address: shown, public: true, range };
}

/** The canonical text of an IP address (IPv4-mapped IPv6 kept as IPv6), or undefined when `input` is no IP. */
export function canonicalAddress(input: string | undefined): string | undefined {
  if (!input) return undefined;
  let text = input.trim();
  if (text.startsWith("[") && text.endsWith("]")) text = text.slice(1, -1);
  if (isIP(text) === 0) return undefined;
  return ipaddr.parse(text).toString();
}

/** True when two address texts denote the same address (IPv4 and its IPv4-mapped IPv6 form count as equal). */
export function sameAddress(a: string | undefined, b: string | undefined): boolean {
  const x = canonicalAddress(a);
  const y = canonicalAddress(b);
  if (!x || !y) return false;
  if (x === y) return true;
  const unmap = (s: string) => ipaddr.process(s).toString();
  return unmap(x) === unmap(y);
}

/**
 * True when `address` lies in `cidrOrAddress` ("10.0.0.0/8", "fd00::/8", or a single address). Unparseable
 * entries match nothing. An IPv4 entry also matches the IPv4-mapped IPv6 form of its addresses.
 */
export function addressInRange(address: string, cidrOrAddress: string): boolean {
  const a = canonicalAddress(address);
  if (!a) return false;
  const ip = ipaddr.process(a);
  try {
    if (cidrOrAddress.includes("/")) {
      const [net, bits] = ipaddr.parseCIDR(cidrOrAddress.trim());
      if (net.kind() !== ip.kind()) return false;
      return ip.match([net, bits] as [typeof ip, number]);
    }
    const other = canonicalAddress(cidrOrAddress);
    return other !== undefined && ipaddr.process(other).toString() === ip.toString();
  } catch {
    return false;
  }
}
