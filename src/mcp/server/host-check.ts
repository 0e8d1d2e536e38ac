/**
 * DNS-rebinding protection for `/mcp` (MCP over Streamable HTTP): a web page whose name an attacker re-points to
 * 127.0.0.1 reaches a local server with its own name in `Host` and its own origin in `Origin`. The endpoint answers
 * only requests whose `Host` hostname (port ignored) and, when a browser sent one, `Origin` hostname are allowed.
 *
 * Defaults follow the MCP TypeScript SDK: a server bound to a loopback address accepts the loopback names
 * (`localhost`, `127.0.0.1`, `[::1]`) only; a server bound to any other address checks nothing unless told which
 * names to accept. `TOOLHOST_MCP_ALLOWED_HOSTS` and `TOOLHOST_MCP_ALLOWED_ORIGINS` (comma-separated hostnames
 * without ports, IPv6 in brackets; `*` turns the check off) replace the defaults.
 */
import { readConfig } from "../../core/config.js";

/**
 * The loopback names allowed by default: the list the MCP SDK's `localhostAllowedHostnames()` and
 * `localhostAllowedOrigins()` give (test/server/mcp-host-check.test.ts pins that), kept here so that building the
 * service does not load the SDK, which loads on the first `/mcp` request.
 */
export const LOOPBACK_HOSTNAMES: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

/** Which `Host` and `Origin` hostnames `/mcp` accepts; null: that header is not checked. */
export interface McpHostPolicy {
  allowedHosts: readonly string[] | null;
  allowedOrigins: readonly string[] | null;
}

/** Whether `host` (an address or name a server binds) is a loopback one. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare);
}

/** A configured list of names: `*` among them means any name (no check). */
function anyName(items: readonly string[] | undefined): string[] | null | undefined {
  if (items === undefined) return undefined;
  return items.includes("*") ? null : [...items];
}

/**
 * The policy for a server bound to `bindHost`: TOOLHOST_MCP_ALLOWED_HOSTS / TOOLHOST_MCP_ALLOWED_ORIGINS when set,
 * else loopback names for a loopback binding and no check otherwise. A bound loopback address other than the three
 * loopback names (e.g. 127.0.0.2) is allowed too.
 */
export function mcpHostPolicy(bindHost: string, env: NodeJS.ProcessEnv = process.env): McpHostPolicy {
  const loopback = isLoopbackHost(bindHost);
  const own = bindHost.includes(":") && !bindHost.startsWith("[") ? `[${bindHost}]` : bindHost.toLowerCase();
  const config = readConfig(env);
  const hosts = anyName(config.mcpAllowedHosts);
  const origins = anyName(config.mcpAllowedOrigins);
  const withOwn = (names: string[]) => (names.includes(own) ? names : [...names, own]);
  return {
    allowedHosts: hosts !== undefined ? hosts : loopback ? withOwn([...LOOPBACK_HOSTNAMES]) : null,
    allowedOrigins: origins !== undefined ? origins : loopback ? withOwn([...LOOPBACK_HOSTNAMES]) : null,
  };
}

/**
 * Checks a request's `Host` and `Origin` against the policy (with the MCP SDK's validators, loaded on first use).
 * Resolves to undefined when it may proceed, else to a 403 response in the JSON-RPC error shape MCP clients read,
 * saying which name was refused and how to allow it.
 */
export async function mcpHostRejection(request: Request, policy: McpHostPolicy): Promise<Response | undefined> {
  if (!policy.allowedHosts && !policy.allowedOrigins) return undefined;
  const { validateHostHeader, validateOriginHeader } = await import("@modelcontextprotocol/server");
  let message: string | undefined;
  if (policy.allowedHosts) {
    const host = validateHostHeader(request.headers.get("host"), [...policy.allowedHosts]);
    if (!host.ok)
      message = `${host.message}. /mcp answers only requests addressed to ${policy.allowedHosts.join(", ")} (DNS-rebinding protection); to reach it under another name, add that name to TOOLHOST_MCP_ALLOWED_HOSTS.`;
  }
  if (!message && policy.allowedOrigins) {
    const origin = validateOriginHeader(request.headers.get("origin"), [...policy.allowedOrigins]);
    if (!origin.ok)
      message = `${origin.message}. /mcp accepts browser requests only from ${policy.allowedOrigins.join(", ")} (DNS-rebinding protection); to allow a web client's origin, add its hostname to TOOLHOST_MCP_ALLOWED_ORIGINS.`;
  }
  if (!message) return undefined;
  return Response.json({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }, { status: 403 });
}
