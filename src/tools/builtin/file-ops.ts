/**
 * The file tools, answering through `trigger('tool::file_read' | 'tool::file_write' | 'tool::file_list', …)` with their
 * own result shapes, on the same implementation as read_file, write_file and list_directory (same path policy, same
 * freshness ledger). Registered with enabledByDefault: false so a model is not offered two tools for the same job;
 * trigger() may still run a tool that is off only by default.
 *
 * - file_read { path, maxBytes? } → { content, path (absolute; a spill's name for a spill), size (whole file,
 *   bytes) }; text files only (10 MiB ceiling); content holds at most maxBytes bytes, cut on a character boundary.
 * - file_write { path, content } → { written: true, path (absolute), size (bytes written) }; the freshness guard
 *   applies under the same per-path lock as write_file (writeFileForChat), a final symbolic link is refused, and
 *   parent directories are created.
 * - file_list { path, recursive? } → { path (absolute), entries: { name, type, size, modified }[] }; `recursive`
 *   walks subdirectories (names relative to `path`, symlinks not followed), at most 10,000 entries.
 */
import { lstat, opendir } from "node:fs/promises";
import { join } from "node:path";
import { isSpillName } from "../../core/output-spill.js";
import { isExcludedEntry, PATH_POLICY_DESCRIPTORS, pathArgumentsCheck } from "../../core/path-policy.js";
import { defineTool } from "../../core/settings-declaration.js";
import { decodeText } from "../../core/text-probe.js";
import type { RegisteredTool, ToolAnnotationHints, ToolContext } from "../../core/types.js";
import { readDirectoryEntries } from "./list-directory.js";
import { assertTextual, readFileForChat } from "./read-file.js";
import { writeFileForChat } from "./write-file.js";

/** Most entries file_list returns. */
export const FILE_LIST_CAP = 10_000;

const settings = (title: string, description: string, annotations: ToolAnnotationHints) => ({
  title,
  description,
  category: "system" as const,
  annotations,
  enabledByDefault: false,
  canDisable: true,
  parameterDescriptors: [...PATH_POLICY_DESCRIPTORS],
});

/** Cuts UTF-8 bytes to at most `max` without splitting a character. */
function cutUtf8(bytes: Buffer, max: number): Buffer {
  if (bytes.length <= max) return bytes;
  let end = max;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

export const fileReadTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "file_read",
    description: "Reads a text file's contents (optionally only the first maxBytes bytes). Prefer read_file.",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "File path, relative to the working directory (or absolute)." },
        maxBytes: { type: "integer", minimum: 0, description: "Most bytes of content to return." },
      },
      required: ["path"],
    },
  },
  settings: settings("File read", "tool::file_read: reads a text file (same rules as read_file).", {
    readOnlyHint: true,
  }),
  validateArguments: pathArgumentsCheck("path"),
  async execute(args, context) {
    const { path, maxBytes } = args as { path: string; maxBytes?: number };
    const { bytes, real } = await readFileForChat(path, context, "text");
    assertTextual(bytes, path);
    const shown = maxBytes === undefined ? bytes : cutUtf8(bytes, maxBytes);
    // A spill is named by its spill name: no answer tells where the server keeps spills.
    return { content: decodeText(shown).text, path: isSpillName(path) ? path : real, size: bytes.length };
  },
});

export const fileWriteTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "file_write",
    description: "Writes content to a file (read it first to overwrite). Prefer write_file.",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "File path, relative to the working directory (or absolute)." },
        content: { type: "string", description: "Content to write to the file." },
      },
      required: ["path", "content"],
    },
  },
  settings: settings("File write", "tool::file_write: writes a file (same rules as write_file).", {
    destructiveHint: true,
    idempotentHint: true,
  }),
  validateArguments: pathArgumentsCheck("path"),
  async execute(args, context) {
    const { path, content } = args as { path: string; content: string };
    const result = await writeFileForChat({ path, content, createDirectories: true }, context);
    return { written: true, path: result.real, size: result.size };
  },
});

interface ListedEntry {
  name: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  modified: string;
}

async function describeEntry(full: string, name: string, type: ListedEntry["type"]): Promise<ListedEntry> {
  const info = await lstat(full).catch(() => null);
  return {
    name,
    type,
    size: info && type !== "directory" ? info.size : 0,
    modified: info ? info.mtime.toISOString() : "",
  };
}

function typeOf(e: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): ListedEntry["type"] {
  return e.isFile() ? "file" : e.isDirectory() ? "directory" : e.isSymbolicLink() ? "symlink" : "other";
}

export const fileListTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "file_list",
    description:
      "Lists a directory with sizes and modification times, optionally recursively. Prefer list_directory or glob.",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "Directory path, relative to the working directory (or absolute)." },
        recursive: { type: "boolean", description: "Also list subdirectories' contents. Default false." },
      },
      required: ["path"],
    },
  },
  settings: settings("File list", "tool::file_list: lists a directory with metadata (same rules as list_directory).", {
    readOnlyHint: true,
  }),
  validateArguments: pathArgumentsCheck("path"),
  async execute(args, context: ToolContext) {
    const { path, recursive } = args as { path: string; recursive?: boolean };
    const { real, absolute, entries, policy } = await readDirectoryEntries(path, context);
    const out: ListedEntry[] = [];
    let truncated = false;
    for (const e of entries) {
      if (out.length >= FILE_LIST_CAP) {
        truncated = true;
        break;
      }
      out.push(await describeEntry(join(real, e.name), e.name, typeOf(e)));
    }
    if (recursive) {
      const queue = entries.filter((e) => e.isDirectory()).map((e) => e.name);
      while (queue.length > 0 && !truncated) {
        if (context.signal.aborted) throw context.signal.reason;
        const rel = queue.shift()!;
        const children: { name: string; type: ListedEntry["type"] }[] = [];
        try {
          for await (const c of await opendir(join(real, rel))) children.push({ name: c.name, type: typeOf(c) });
        } catch {
          continue;
        }
        children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        for (const c of children) {
          const relChild = `${rel}/${c.name}`;
          if (isExcludedEntry(policy, join(absolute, relChild), join(real, relChild))) continue;
          if (out.length >= FILE_LIST_CAP) {
            truncated = true;
            break;
          }
          out.push(await describeEntry(join(real, relChild), relChild, c.type));
          if (c.type === "directory") queue.push(relChild);
        }
      }
    }
    return truncated ? { path: real, entries: out, truncated } : { path: real, entries: out };
  },
});
