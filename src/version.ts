/** The package version, read once from package.json. */
import { packageVersion } from "./core/package-root.js";

export const VERSION: string = packageVersion();
