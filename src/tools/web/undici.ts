/**
 * undici, loaded on first use: it is large (about 1 MB of JavaScript), and a process that never fetches a page
 * (a CLI call of another tool, an MCP session without web tools) should not pay for parsing it.
 */
type Undici = typeof import("undici");

let loading: Promise<Undici> | undefined;

/**
 * The undici module; the first call imports it, later calls share that import. undici is CommonJS: imported
 * natively its named exports are on the namespace, but through a bundler (the shipped CLI is bundled) they may
 * sit only on `default`, so both shapes are accepted.
 */
export function loadUndici(): Promise<Undici> {
  loading ??= import("undici").then((namespace) => {
    const mod = namespace as Undici & { default?: Undici };
    return typeof mod.fetch === "function" ? mod : (mod.default as Undici);
  });
  return loading;
}
