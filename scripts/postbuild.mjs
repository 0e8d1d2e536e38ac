// Marks the CLI entries executable after the build (tsc and esbuild do not set file modes).
import { chmodSync, existsSync } from "node:fs";

for (const path of ["../dist/cli/bin.js", "../dist/bundle/toolhost.js"]) {
  const bin = new URL(path, import.meta.url);
  if (existsSync(bin)) chmodSync(bin, 0o755);
}
