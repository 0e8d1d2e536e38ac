// Bundles the CLI (dist/cli/bin.js, emitted by tsc) into dist/bundle/ with esbuild: one entry chunk plus a chunk
// per lazily imported module, so a command loads a few large files instead of ~700 small ones (Node 20 has no
// module compile cache). Binary-shipping packages stay external and load from node_modules; better-sqlite3's JavaScript
// is bundled (loading its dozen CommonJS files cost a short process ~10 ms) while its native addon loads from the
// installed package by path (storage/database.ts).
import { rmSync, writeFileSync } from "node:fs";
import { build } from "esbuild";

const outdir = new URL("../dist/bundle/", import.meta.url).pathname;
rmSync(outdir, { recursive: true, force: true });
const result = await build({
  entryPoints: { toolhost: new URL("../dist/cli/bin.js", import.meta.url).pathname },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // web-tree-sitter and tree-sitter-bash load their .wasm files relative to their own modules.
  external: ["@vscode/ripgrep", "pg-native", "web-tree-sitter", "tree-sitter-bash"],
  // Bundled CommonJS dependencies call require(); give the ESM chunks one.
  banner: { js: "import { createRequire as __toolhostCreateRequire } from 'node:module'; const require = __toolhostCreateRequire(import.meta.url);" },
  chunkNames: "chunks/[name]-[hash]",
  legalComments: "none",
  logLevel: "warning",
  metafile: Boolean(process.env.TOOLHOST_BUNDLE_METAFILE),
});
// TOOLHOST_BUNDLE_METAFILE=path writes esbuild's metafile (which input went into which chunk, bytes) for analysis.
if (process.env.TOOLHOST_BUNDLE_METAFILE) writeFileSync(process.env.TOOLHOST_BUNDLE_METAFILE, JSON.stringify(result.metafile));
