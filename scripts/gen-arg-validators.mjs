// Rewrites src/core/generated/argument-validators.ts from the built tools' argument schemas (run after `npm run build`;
// `npm run gen:validators` does both and builds again).
import { writeFileSync } from "node:fs";
import { generateArgumentValidators } from "../dist/core/arg-validator-codegen.js";
import { defaultRegistry } from "../dist/core/registry.js";
import { registerBuiltinTools } from "../dist/tools/index.js";

registerBuiltinTools();

writeFileSync(
  new URL("../src/core/generated/argument-validators.ts", import.meta.url),
  generateArgumentValidators(defaultRegistry.list()),
);
