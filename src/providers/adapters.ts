/** Alias entry for callers importing the adapter factory from "providers/adapters" (see ./index.ts). */
export { createProviderAdapter, isProviderName, PROVIDER_ENV, PROVIDER_NAMES, providerConfigFromEnv } from "./index.js";
