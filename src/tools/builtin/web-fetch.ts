/**
 * web_fetch (also `trigger("tool::web_fetch", …)`): SSRF-protected HTTP GET with HTML-to-text conversion.
 *
 * Arguments: `url` (required, http or https), `maxSize` (bytes of body read, default 500000, at most 5000000).
 * Result: `{ url, status, contentType, content, truncated }`: `url` is the final URL after redirects, `content`
 * the body as text (HTML converted to readable text, main content first) capped at 100 KB, `truncated` true when
 * the body was cut at maxSize or the content at 100 KB. Non-2xx statuses are results too (status tells).
 *
 * Settings: `timeoutSeconds` (5–600, default 30; the whole fetch including redirects and body), `maxRedirects`
 * (0–10, default 5), `allowedHosts` (hosts, `*.suffix`, addresses or CIDRs that may be fetched although private).
 * Host services (ToolCallContext.services): `webResolver` (a HostResolver replacing the system DNS resolver) and
 * `webAllowedHosts` (string[] added to the allowedHosts setting by the host application).
 */
import { AccessDeniedError, ToolArgumentError } from "../../core/errors.js";
import { defineTool, integerSetting, stringListSetting } from "../../core/settings-declaration.js";
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type { RegisteredTool, ToolContext, ToolParameterDescriptor } from "../../core/types.js";
import type { HostResolver } from "../web/ssrf.js";
import { checkUrlShape } from "../web/url-shape.js";

/** Result of web_fetch. */
export interface WebFetchResult {
  /** The fetched URL (after redirects). */
  url: string;
  /** HTTP status code. */
  status: number;
  /** The response's Content-Type header ("" when absent). */
  contentType: string;
  /** The body as text: HTML converted to readable text, at most 100 KB. */
  content: string;
  /** True when the body was cut at maxSize or the content at 100 KB. */
  truncated: boolean;
}

/** Name of the ToolContext service that replaces DNS resolution (a HostResolver); used by tests and hosts. */
export const WEB_RESOLVER_SERVICE = "webResolver";
/** Name of the ToolContext service holding host-provided allowed hosts (string[]). */
export const WEB_ALLOWED_HOSTS_SERVICE = "webAllowedHosts";

export const WEB_FETCH_DEFAULT_MAX_SIZE = 500_000;
export const WEB_FETCH_MAX_SIZE_LIMIT = 5_000_000;

const MAX_REDIRECTS: ToolParameterDescriptor = {
  name: "maxRedirects",
  type: "integer",
  description: "Redirects followed per fetch; each hop is checked against the SSRF rules again.",
  min: 0,
  max: 10,
  default: 5,
};

const ALLOWED_HOSTS: ToolParameterDescriptor = {
  name: "allowedHosts",
  type: "string[]",
  description:
    "Hosts that may be fetched even though they are private or local: exact names, *.suffix patterns, IP addresses or CIDRs (e.g. intranet.example, *.corp.example, 10.0.0.0/8). The only way to reach a non-public address.",
  min: 0,
  max: 100,
  default: [],
  adminOnly: true,
};

const parameterDescriptors: ToolParameterDescriptor[] = [TIMEOUT_SECONDS_DESCRIPTOR, MAX_REDIRECTS, ALLOWED_HOSTS];

function servicesOf(context: ToolContext): { resolver?: HostResolver; extraHosts: string[] } {
  const resolver = context.services[WEB_RESOLVER_SERVICE];
  const extra = context.services[WEB_ALLOWED_HOSTS_SERVICE];
  return {
    resolver: typeof resolver === "function" ? (resolver as HostResolver) : undefined,
    extraHosts: Array.isArray(extra) ? extra.filter((h): h is string => typeof h === "string") : [],
  };
}

/** Fetches `url` under the tool's settings; see the module docstring. Throws classified ToolErrors. */
export async function webFetch(args: { url: string; maxSize?: number }, context: ToolContext): Promise<WebFetchResult> {
  const { url } = args;
  const maxSize = args.maxSize ?? WEB_FETCH_DEFAULT_MAX_SIZE;
  if (!Number.isInteger(maxSize) || maxSize < 1 || maxSize > WEB_FETCH_MAX_SIZE_LIMIT) {
    throw new ToolArgumentError(
      `Invalid argument "maxSize": ${maxSize}; use an integer from 1 to ${WEB_FETCH_MAX_SIZE_LIMIT} (bytes).`,
      { argument: "maxSize" },
    );
  }
  // The fetch client, the SSRF guard and the HTML conversion load on the first fetch (registration is metadata only).
  const [{ guardedFetch }, { binaryRefusal, bodyKind, bodyToContent }, { rulesOf }, { matchHostRule, stricter }] =
    await Promise.all([
      import("../web/fetch.js"),
      import("../web/content.js"),
      import("../../core/approval/policy.js"),
      import("../../core/approval/rules.js"),
    ]);
  // Approval rules are matched on the URL the call names, before it runs; a redirect cannot be approved on the way,
  // so a hop to a host a rule denies or asks about is refused (fetching that URL directly goes through the rule).
  const hopRules = rulesOf(context.settings).filter((r) => r.decision !== "allow");
  const { resolver, extraHosts } = servicesOf(context);
  const allowedHosts = [...stringListSetting(context.settings.values, ALLOWED_HOSTS), ...extraHosts];
  const result = await guardedFetch(url, {
    maxBytes: maxSize,
    maxRedirects: integerSetting(context.settings.values, MAX_REDIRECTS),
    allowedHosts,
    resolver,
    signal: context.signal,
    checkRedirect: (target, from) => {
      const hits = hopRules.filter((r) => matchHostRule(r.match, target.hostname.replace(/^\[|\]$/g, "")));
      if (hits.length === 0) return;
      const rule = hits.find((r) => r.decision === hits.map((h) => h.decision).reduce(stricter))!;
      const why =
        rule.decision === "ask"
          ? `a redirect cannot be asked about on the way. Fetch ${target.href} directly (the user will be asked)`
          : "rules apply to every hop of a fetch. Do not fetch it";
      throw new AccessDeniedError(
        `Redirect from ${from} to ${target.href} refused: the approval rule "${rule.decision}: ${rule.match}" covers ${target.hostname}, and ${why}.`,
        { rule: "approval", host: target.hostname, redirectFrom: from, redirectTo: target.href },
      );
    },
    inspect: (response, at) => {
      const type = response.headers.get("content-type") ?? "";
      if (bodyKind(type) === "binary") throw binaryRefusal(at.href, type);
    },
  });
  const { content, truncated } = bodyToContent(result.body, result.contentType, result.url, result.truncated);
  return { url: result.url, status: result.status, contentType: result.contentType, content, truncated };
}

export const webFetchTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "host", argument: "url" } },
  definition: {
    name: "web_fetch",
    description:
      "Fetches a public web page or text file over http(s) and returns its text: HTML is converted to readable text (main content first), other text types are returned as is, binary files are refused. Private, local and cloud-metadata addresses are refused. Content is capped at 100 KB.",
    parameters: {
      type: "object",
      properties: {
        url: { type: "string", description: "Absolute http:// or https:// URL to fetch." },
        maxSize: {
          type: "integer",
          description: `Maximum bytes of the response body to read (default ${WEB_FETCH_DEFAULT_MAX_SIZE}); longer bodies are cut and truncated is true.`,
          minimum: 1,
          maximum: WEB_FETCH_MAX_SIZE_LIMIT,
          default: WEB_FETCH_DEFAULT_MAX_SIZE,
        },
      },
      required: ["url"],
    },
  },
  settings: {
    title: "Web fetch",
    description: "Lets the model read public web pages (SSRF-protected: private and local addresses are refused).",
    category: "system",
    annotations: { readOnlyHint: true, openWorldHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors,
  },
  // A URL that is not absolute http(s) is refused at once, before any approval is asked for.
  validateArguments: (args) => {
    checkUrlShape(String(args.url));
  },
  execute: (args, context) => webFetch(args as { url: string; maxSize?: number }, context),
});
