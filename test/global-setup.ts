/**
 * Guards the real per-user data directory: the suite must not create `~/.local/share/toolhost` (or
 * `$XDG_DATA_HOME/toolhost` of the invoking shell). Fails the run when it appeared during the tests.
 */
import { existsSync } from "node:fs";
import { chooseDataDir } from "../src/core/data-dir.js";

export default function setup(): () => void {
  const real = chooseDataDir(undefined, { ...process.env, TOOLHOST_DATA_DIR: "" }).path;
  const existed = existsSync(real);
  return () => {
    if (!existed && existsSync(real)) {
      throw new Error(`The test suite created the real data directory ${real}; tests must use temp directories.`);
    }
  };
}
