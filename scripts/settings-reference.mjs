// Rewrites docs/settings-reference.md from the built tools' parameter descriptors (run after `npm run build`).
import { writeFileSync } from "node:fs";
import { builtinSettingsReference } from "../dist/tools/settings-reference.js";

writeFileSync(new URL("../docs/settings-reference.md", import.meta.url), builtinSettingsReference());
