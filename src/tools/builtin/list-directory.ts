/**
 * list_directory (000_6d817c25d4590fa9.txt, "Built-in Tools"): readdir(path, { withFileTypes: true }) →
 * { path, entries: { name, type }[] }. The path is absolute, `~`-prefixed, or relative to the chat working
 * directory.
 */
import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { NotFoundError, ToolArgumentError } from "../../core/errors.js";
import { registerTool } from "../../core/registry.js";
import type { RegisteredTool, ToolContext } from "../../core/types.js";

/** Entry kinds reported by list_directory. */
export type EntryType = "file" | "directory" | "symlink" | "other";

/** The type of a directory entry as list_directory reports it. */
export function entryType(entry: Dirent): EntryType {
  if (entry.isFile()) return "file";
  if (entry.isDirectory()) return "directory";
  if (entry.isSymbolicLink()) return "symlink";
  return "other";
}

function resolvePath(path: string, context: ToolContext): string {
  if (path === "~" || path.startsWith("~/")) return join(homedir(), path.slice(1));
  return isAbsolute(path) ? resolve(path) : resolve(context.workingDirectory ?? process.cwd(), path);
}

export const listDirectoryTool: RegisteredTool = {
  definition: {
    name: "list_directory",
    description: "Lists the files and directories at a path (absolute, ~-prefixed, or relative to the working directory).",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "Directory to list: absolute, ~-prefixed, or relative to the working directory." },
      },
      required: ["path"],
    },
  },
  settings: {
    title: "List directory",
    description: "Lets the model list directory contents.",
    category: "system",
    enabledByDefault: true,
    canDisable: true,
    defaultParameters: {},
    parameterDescriptors: [],
  },
  async execute(args, context) {
    const { path } = args as { path: string };
    if (path.trim() === "") throw new ToolArgumentError('Invalid argument "path": must not be empty.', { argument: "path" });
    const absolute = resolvePath(path, context);
    let entries: Dirent[];
    try {
      entries = await readdir(absolute, { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") throw new NotFoundError(`No such directory: ${path}`, { path });
      if (code === "ENOTDIR") throw new ToolArgumentError(`Not a directory: ${path}; use read_file for files.`, { argument: "path" });
      throw error;
    }
    return {
      path,
      entries: entries
        .map((e) => ({ name: e.name, type: entryType(e) }))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    };
  },
};

registerTool(listDirectoryTool);
