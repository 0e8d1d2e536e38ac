/**
 * web_search (also `trigger("tool::web_search", …)`): multi-provider web search (Tavily, Brave,
 * DuckDuckGo).
 *
 * Arguments: `query` (required), `provider` ("tavily" | "brave" | "duckduckgo"), `maxResults` (1–20, default 5).
 * Result: `{ results: [{ title, url, content }], provider }`, where `provider` names the provider that actually
 * served the results: a provider asked for without its API key (TAVILY_API_KEY, BRAVE_API_KEY) falls back to
 * DuckDuckGo, which needs none, and the result's `notice` (or the error, when DuckDuckGo fails too) names the
 * missing variable. Without `provider`, the `defaultProvider` setting decides ("auto": Tavily when
 * keyed, else Brave when keyed, else DuckDuckGo).
 *
 * Enabled by default: DuckDuckGo works without a key, and search only sends the query to the provider; result
 * URLs are returned, never fetched. Keys and base URLs are host configuration (see search-providers.ts).
 */
import { ToolArgumentError, ToolError, ToolExecutionError } from "../../core/errors.js";
import { defineTool, stringSetting } from "../../core/settings-declaration.js";
import { TIMEOUT_SECONDS_DESCRIPTOR } from "../../core/settings-policy.js";
import type { RegisteredTool, ToolContext, ToolParameterDescriptor } from "../../core/types.js";
import { SEARCH_PROVIDERS, type SearchProviderName, WEB_SEARCH_SERVICE } from "../web/search-names.js";
import type { SearchResult, WebSearchConfig } from "../web/search-providers.js";

/** Result of web_search. */
export interface WebSearchResult {
  results: SearchResult[];
  /** The provider that served the results. */
  provider: SearchProviderName;
  /**
   * Present when the provider asked for (argument or `defaultProvider` setting) has no API key and DuckDuckGo
   * served instead: names the missing variable, e.g. "tavily was asked for, but TAVILY_API_KEY is not set; …".
   */
  notice?: string;
}

export const WEB_SEARCH_DEFAULT_MAX_RESULTS = 5;
export const WEB_SEARCH_MAX_RESULTS_LIMIT = 20;
const DEFAULT_PROVIDER_VALUES = ["auto", ...SEARCH_PROVIDERS] as const;

const DEFAULT_PROVIDER: ToolParameterDescriptor = {
  name: "defaultProvider",
  type: "string",
  description:
    'Provider used when the model names none: "auto" (Tavily if TAVILY_API_KEY is set, else Brave if BRAVE_API_KEY is set, else DuckDuckGo), or a provider name.',
  allowedValues: DEFAULT_PROVIDER_VALUES,
  default: "auto",
};

const parameterDescriptors: ToolParameterDescriptor[] = [
  { ...TIMEOUT_SECONDS_DESCRIPTOR, default: 20 },
  DEFAULT_PROVIDER,
];

/** Runs a search under the tool's settings and the host's search configuration. Throws classified ToolErrors. */
export async function webSearch(
  args: { query: string; provider?: SearchProviderName; maxResults?: number },
  context: ToolContext,
): Promise<WebSearchResult> {
  const query = args.query.trim();
  if (!query)
    throw new ToolArgumentError('Invalid argument "query": it is empty; give search words.', { argument: "query" });
  const maxResults = args.maxResults ?? WEB_SEARCH_DEFAULT_MAX_RESULTS;
  // The provider clients (and the fetch stack under them) load on the first search: registration is metadata only.
  const { chooseProvider, missingKeyVariable, resolveSearchConfig, runSearch } = await import(
    "../web/search-providers.js"
  );
  const config = resolveSearchConfig(context.services[WEB_SEARCH_SERVICE] as WebSearchConfig | undefined);
  const preferred = stringSetting(context.settings.values, DEFAULT_PROVIDER) as SearchProviderName | "auto";
  const provider = chooseProvider(args.provider, config, preferred);
  const asked = args.provider ?? (preferred === "auto" ? undefined : preferred);
  const missing = asked && asked !== provider ? missingKeyVariable(asked) : undefined;
  const notice = missing
    ? `${asked} was asked for, but ${missing} is not set on the server, so DuckDuckGo (no key needed) answered instead. Set ${missing} to search with ${asked}.`
    : undefined;
  try {
    const results = await runSearch(provider, query, maxResults, config, context.signal);
    return notice ? { results, provider, notice } : { results, provider };
  } catch (error) {
    // The failure is DuckDuckGo's, but the cause is the missing key: say both.
    if (notice && error instanceof ToolError) {
      throw new ToolExecutionError(`${notice} DuckDuckGo then failed: ${error.message}`, {
        ...error.details,
        askedProvider: asked,
        missingVariable: missing,
      });
    }
    throw error;
  }
}

export const webSearchTool: RegisteredTool = defineTool({
  // Approval: allowed by default (nothing a rule could match).
  approval: { default: "allow" },
  definition: {
    name: "web_search",
    description:
      "Searches the web and returns results with title, url and a content snippet. Providers: tavily, brave (need API keys) and duckduckgo (no key; used when the asked provider has no key). The result names the provider that served it. Use web_fetch to read a result page.",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "Search query.", minLength: 1 },
        provider: {
          type: "string",
          enum: [...SEARCH_PROVIDERS],
          description: 'Search provider: "tavily", "brave" or "duckduckgo". Default: the configured default provider.',
        },
        maxResults: {
          type: "integer",
          description: `Maximum number of results (default ${WEB_SEARCH_DEFAULT_MAX_RESULTS}).`,
          minimum: 1,
          maximum: WEB_SEARCH_MAX_RESULTS_LIMIT,
          default: WEB_SEARCH_DEFAULT_MAX_RESULTS,
        },
      },
      required: ["query"],
    },
  },
  settings: {
    title: "Web search",
    description: "Lets the model search the web (Tavily, Brave or DuckDuckGo).",
    category: "system",
    annotations: { readOnlyHint: true, openWorldHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors,
  },
  execute: (args, context) =>
    webSearch(args as { query: string; provider?: SearchProviderName; maxResults?: number }, context),
});
