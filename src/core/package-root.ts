/**
 * Where Toolhost is installed: the directory of its package.json, found by walking up from this module's own
 * location. Works from the compiled tree (dist/core/…), from the bundled CLI (dist/bundle/…) and from the
 * TypeScript sources, so nothing depends on how deep a file sits.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let cached: { root: string; version: string } | undefined;

function find(): { root: string; version: string } {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      const pkg = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "toolhost") return { root: dir, version: pkg.version ?? "0.0.0" };
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error("Toolhost's package.json was not found above its own code.");
    dir = parent;
  }
}

/** The absolute directory holding Toolhost's package.json. Throws Error when the installation is incomplete. */
export function packageRoot(): string {
  cached ??= find();
  return cached.root;
}

/** The version in Toolhost's package.json. */
export function packageVersion(): string {
  cached ??= find();
  return cached.version;
}

/** Toolhost's own installed code (dist/, node_modules/, package.json of this package), which tools never touch. */
export function installationPaths(): string[] {
  const root = packageRoot();
  return [join(root, "dist"), join(root, "node_modules"), join(root, "package.json")];
}
