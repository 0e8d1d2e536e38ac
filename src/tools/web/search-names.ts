/**
 * The names web_search's metadata needs (its provider enum, its host service), apart from the provider clients in
 * search-providers.ts, which load on the tool's first call.
 */

/** The providers web_search knows. */
export const SEARCH_PROVIDERS = ["tavily", "brave", "duckduckgo"] as const;
/** One of SEARCH_PROVIDERS. */
export type SearchProviderName = (typeof SEARCH_PROVIDERS)[number];

/** Name of the ToolContext service holding a WebSearchConfig. */
export const WEB_SEARCH_SERVICE = "webSearch";
