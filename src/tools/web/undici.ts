/**
 * undici, loaded on first use: it is large (about 1 MB of JavaScript), and a process that never fetches a page
 * (a CLI call of another tool, an MCP session without web tools) should not pay for parsing it.
 */
type Undici = typeof import("undici");

let loading: Promise<Undici> | undefined;

/** The undici module; the first call imports it, later calls share that import. */
export function loadUndici(): Promise<Undici> {
  loading ??= import("undici");
  return loading;
}
