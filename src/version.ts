/** The package version, read once from package.json. */
import { packageVersion } from "./core/package-root.js";

export const VERSION: string = packageVersion();

/** Whether a command line (the arguments after the executable) asks only for the version: `--version` or `-V`. */
export function asksForVersion(args: readonly string[]): boolean {
  return args.length === 1 && (args[0] === "--version" || args[0] === "-V");
}
