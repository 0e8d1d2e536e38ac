/**
 * The one per-user data directory every Toolhost command uses (the SQLite database, generated images, spilled
 * outputs). It does not depend on where a command runs: `TOOLHOST_DATA_DIR` when set, else the XDG data
 * directory (`$XDG_DATA_HOME/toolhost`, or `~/.local/share/toolhost` when XDG_DATA_HOME is unset or not absolute,
 * as the XDG Base Directory specification says).
 */

import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { readConfig } from "./config.js";

/** Where the data directory came from: an explicit option, `TOOLHOST_DATA_DIR`, `XDG_DATA_HOME`, or the home default. */
export type DataDirSource = "option" | "TOOLHOST_DATA_DIR" | "XDG_DATA_HOME" | "home";

/** The resolved data directory (absolute) and why it is that one. */
export interface DataDirChoice {
  path: string;
  source: DataDirSource;
}

/**
 * Resolves the data directory: `explicit` (an option, resolved against the current directory) wins, then
 * `TOOLHOST_DATA_DIR` (resolved likewise), then `$XDG_DATA_HOME/toolhost` (only when XDG_DATA_HOME is absolute),
 * then `<home>/.local/share/toolhost`. Pure: creates nothing.
 */
export function chooseDataDir(explicit?: string, env: NodeJS.ProcessEnv = process.env): DataDirChoice {
  if (explicit) return { path: resolve(explicit), source: "option" };
  const configured = readConfig(env).dataDir;
  if (configured) return { path: configured, source: "TOOLHOST_DATA_DIR" };
  const xdg = env.XDG_DATA_HOME?.trim();
  if (xdg && isAbsolute(xdg)) return { path: join(xdg, "toolhost"), source: "XDG_DATA_HOME" };
  return { path: join(env.HOME?.trim() || homedir(), ".local", "share", "toolhost"), source: "home" };
}

/** The data directory's absolute path (see chooseDataDir). */
export function resolveDataDir(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  return chooseDataDir(explicit, env).path;
}
