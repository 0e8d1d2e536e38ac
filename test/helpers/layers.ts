/**
 * The layering rule of the design document, as a check over an import graph: each folder under src/ is a layer,
 * and an import may only point to a layer below its own (or stay in its layer). Tools additionally import
 * nothing from storage: what they need from outside arrives through their context as an interface.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, posix, relative, resolve, sep } from "node:path";

/** The layers from top to bottom (one folder each under src/). */
export const LAYERS = [
  "cli",
  "server",
  "mcp",
  "adapters",
  "app",
  "agents",
  "loop",
  "providers",
  "tools",
  "storage",
  "core",
] as const;

/** Top-level files and the layer they belong to (index.ts is the public façade above every layer). */
const FILE_LAYERS: Record<string, string> = { "index.ts": "(public API)", "version.ts": "core" };

/** Imports that the order alone would allow but the design forbids: from → forbidden targets. */
const FORBIDDEN: Record<string, readonly string[]> = { tools: ["storage"] };

/** One import that breaks the rule. */
export interface LayerViolation {
  file: string;
  specifier: string;
  from: string;
  to: string;
}

function layerOf(path: string): string | undefined {
  const first = path.split("/")[0] ?? "";
  if (path.includes("/")) return first;
  return FILE_LAYERS[first];
}

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^;]*?\sfrom\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|^import\s+["']([^"']+)["']/gm;

/** The relative import specifiers of a TypeScript source (static, type-only, re-exports and dynamic imports). */
export function importSpecifiers(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (spec?.startsWith(".")) out.push(spec);
  }
  return out;
}

/**
 * The violations in an import graph given as source texts keyed by their path relative to src/ (posix
 * separators, e.g. "core/runtime.ts").
 */
export function findLayerViolations(files: ReadonlyMap<string, string>): LayerViolation[] {
  const rank = (layer: string) => (LAYERS as readonly string[]).indexOf(layer);
  const violations: LayerViolation[] = [];
  for (const [file, source] of files) {
    const from = layerOf(file);
    if (!from || from === "(public API)") continue;
    for (const specifier of importSpecifiers(source)) {
      const target = posix.normalize(posix.join(posix.dirname(file), specifier));
      const to = layerOf(target);
      if (!to || to === from) continue;
      const upward = rank(from) < 0 || rank(to) < 0 || rank(to) < rank(from);
      if (upward || FORBIDDEN[from]?.includes(to)) violations.push({ file, specifier, from, to });
    }
  }
  return violations;
}

/** Reads every .ts file under `srcDir` into the map findLayerViolations takes. */
export function readSourceTree(srcDir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".ts")) files.set(relative(srcDir, path).split(sep).join("/"), readFileSync(path, "utf8"));
    }
  };
  walk(resolve(srcDir));
  return files;
}
