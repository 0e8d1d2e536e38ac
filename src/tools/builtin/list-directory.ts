/**
 * list_directory: readdir(path, { withFileTypes: true }) → { path, entries: { name, type }[] }, under the shared path
 * policy.
 *
 * Entries are sorted by name (code-unit order); entries covered by deniedPaths are left out; at most
 * `maxEntries` (setting, default 1000) are returned, with `truncated: true` and `totalEntries` when more exist.
 * A symlink is reported as "symlink" and never followed.
 */
import type { Dirent } from "node:fs";
import {
  PATH_POLICY_DESCRIPTORS,
  pathArgumentsCheck,
  resolveAndValidatePath,
  toResultPath,
  walkExclusion,
} from "../../core/path-policy.js";
import { pathSystemError } from "../../core/path-refusals.js";
import { defineTool, integerSetting } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolContext, ToolParameterDescriptor } from "../../core/types.js";
import { readDirectory } from "../fs/common.js";

/** Entry kinds reported by list_directory. */
export type EntryType = "file" | "directory" | "symlink" | "other";

/** The type of a directory entry as list_directory reports it. */
export function entryType(entry: Dirent): EntryType {
  if (entry.isFile()) return "file";
  if (entry.isDirectory()) return "directory";
  if (entry.isSymbolicLink()) return "symlink";
  return "other";
}

const MAX_ENTRIES: ToolParameterDescriptor = {
  name: "maxEntries",
  type: "integer",
  description: "Most entries returned by one call; more set truncated.",
  min: 1,
  max: 100_000,
  default: 1000,
};

/** Result of list_directory. */
export interface ListDirectoryResult {
  /** The directory, relative to the chat working directory (absolute when none is bound or outside it). */
  path: string;
  entries: { name: string; type: EntryType }[];
  truncated: boolean;
  totalEntries: number;
}

/**
 * Reads a directory's entries (sorted, denied ones removed), with the call's path policy. Shared by list_directory
 * and file_list.
 * Throws what resolveAndValidatePath throws (access_denied, not_found, validation_failed for a file).
 */
export async function readDirectoryEntries(input: string, context: ToolContext) {
  const { absolute, real, policy } = await resolveAndValidatePath(input, context, {
    mustExist: true,
    kind: "directory",
  });
  // The whole directory (the entries are all kept anyway), its first entries on the event loop like the lookups
  // before it (readDirectory, docs/filesystem.md). Its failure (no permission to read it, a directory removed
  // meanwhile) is classified as every failure on a path argument is, naming the path as given (pathSystemError),
  // not left to surface as an unclassified system error.
  let entries: Dirent[];
  try {
    entries = await readDirectory(real);
  } catch (error) {
    throw pathSystemError(error, input);
  }
  if (context.signal.aborted) throw context.signal.reason;
  // Containment of the denied paths is decided once for the directory, not per entry (an entry is never followed).
  const excluded = walkExclusion(policy, absolute, real);
  const kept = policy.denied.length === 0 ? entries : entries.filter((e) => !excluded(e.name));
  kept.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { absolute, real, entries: kept, policy };
}

export const listDirectoryTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "list_directory",
    description:
      "Lists the files and directories at a path (absolute, ~-prefixed, or relative to the working directory), sorted by name.",
    parameters: {
      type: "object",
      properties: {
        path: {
          type: "string",
          description: "Directory to list: absolute, ~-prefixed, or relative to the working directory.",
        },
      },
      required: ["path"],
    },
  },
  settings: {
    title: "List directory",
    description: "Lets the model list directory contents within the allowed directories.",
    category: "system",
    annotations: { readOnlyHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS, MAX_ENTRIES],
  },
  outputSchema: {
    type: "object",
    properties: {
      path: { type: "string" },
      entries: {
        type: "array",
        items: {
          type: "object",
          properties: { name: { type: "string" }, type: { type: "string" } },
          required: ["name", "type"],
        },
      },
      truncated: { type: "boolean" },
      totalEntries: { type: "integer" },
    },
    required: ["path", "entries", "truncated", "totalEntries"],
  },
  validateArguments: pathArgumentsCheck("path"),
  async execute(args, context): Promise<ListDirectoryResult> {
    const { path } = args as { path: string };
    const { absolute, entries } = await readDirectoryEntries(path, context);
    const max = integerSetting(context.settings.values, MAX_ENTRIES);
    return {
      path: toResultPath(absolute, context),
      entries: entries.slice(0, max).map((e) => ({ name: e.name, type: entryType(e) })),
      truncated: entries.length > max,
      totalEntries: entries.length,
    };
  },
});
