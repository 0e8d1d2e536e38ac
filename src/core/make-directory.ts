/**
 * Creating a directory with its missing parents, one level at a time. Node's `mkdir(…, { recursive: true })` never
 * returns for some paths (under `/proc`, where creating a directory keeps failing with ENOENT): these helpers walk
 * up to the deepest existing ancestor and create each missing level once, so a path that cannot be created fails
 * at once with the system's error.
 */
import { mkdirSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname, resolve } from "node:path";

/** The missing levels of `path`, outermost first (empty when it exists); `exists` tells whether a path exists. */
function missingLevels(path: string, exists: (p: string) => boolean): string[] {
  const levels: string[] = [];
  let current = resolve(path);
  while (!exists(current)) {
    levels.unshift(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  return levels;
}

/**
 * Creates `path` and its missing parents (each with `mode`, e.g. 0o700), like `mkdir -p`. Throws the system error
 * (ENOENT, EACCES, ENOTDIR…) of the first level that cannot be created; never loops.
 */
export function makeDirectoriesSync(path: string, mode = 0o777): void {
  for (const level of missingLevels(path, existsAt)) {
    try {
      mkdirSync(level, { mode });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
}

/** The asynchronous form of {@link makeDirectoriesSync}. */
export async function makeDirectories(path: string, mode = 0o777): Promise<void> {
  for (const level of missingLevels(path, existsAt)) {
    try {
      await mkdir(level, { mode });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
}

/** Whether something exists at `path` (a file in the way makes the next mkdir fail with ENOTDIR, as it should). */
function existsAt(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}
