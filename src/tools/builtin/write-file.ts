/**
 * write_file (`trigger("tool::file_write", …)` runs the same implementation): creates or
 * overwrites a file with UTF-8 text.
 *
 * - Overwriting an existing file requires that this chat read it (read_file, any view) and that its sha256 still
 *   matches the freshness ledger; otherwise a ToolExecutionError tells the model to read it first.
 * - Atomic: a temp file in the same directory, fsync, the old file's mode kept, then rename over the target.
 * - The freshness check and the write run under this process's lock on the real path (withPathLock), so of N
 *   concurrent writers holding the same stale read exactly one succeeds (per process, not across processes).
 * - A target whose final component is a symbolic link (even one pointing inside the root, even dangling) is
 *   refused: write to the link's target path directly.
 * - Parent directories are created only with createDirectories: true.
 * - The path policy applies to the target (decided on its nearest existing ancestor when it does not exist yet).
 *
 * Result: { path, size (bytes written), sha256, created }.
 */
import { clip, ToolArgumentError } from "../../core/errors.js";
import { openedFileRefusal } from "../../core/path-opened.js";
import {
  PATH_POLICY_DESCRIPTORS,
  pathArgumentsCheck,
  resolveAndValidatePath,
  toResultPath,
} from "../../core/path-policy.js";
import { defineTool } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolContext } from "../../core/types.js";
import {
  assertFresh,
  atomicWrite,
  formatBytes,
  ledgerChat,
  lstatOrUndefined,
  notReadRefusal,
  readWholeFile,
  refuseFinalSymlink,
  sha256,
  withPathLock,
} from "../fs/common.js";

/** Largest content write_file accepts (and largest file it will replace), 10 MiB. */
export const WRITE_CAP = 10 * 1024 * 1024;

/** Result of write_file. */
export interface WriteFileResult {
  path: string;
  /** Bytes written. */
  size: number;
  sha256: string;
  /** True when the file did not exist before. */
  created: boolean;
}

/** Writes `content` to `input` under the path policy and the freshness guard; returns what was written. */
export async function writeFileForChat(
  args: { path: string; content: string; createDirectories?: boolean },
  context: ToolContext,
): Promise<WriteFileResult & { absolute: string; real: string }> {
  const resolved = await resolveAndValidatePath(args.path, context, { kind: "file", purpose: "write" });
  const { absolute, real } = resolved;
  const data = Buffer.from(args.content, "utf8");
  if (data.length > WRITE_CAP) {
    throw new ToolArgumentError(
      `"content" is ${formatBytes(data.length)}, larger than the ${formatBytes(WRITE_CAP)} write_file writes at once. Write a smaller file, or split the content over several files.`,
      { argument: "content", rule: "size_cap", capBytes: WRITE_CAP },
    );
  }
  await refuseFinalSymlink(absolute, args.path);
  return withPathLock(real, async () => {
    const existing = await lstatOrUndefined(real);
    let mode: number | undefined;
    if (existing) {
      if (!existing.isFile()) {
        throw new ToolArgumentError(
          `"${clip(args.path)}" exists and is not a regular file; write_file only replaces files.`,
          {
            argument: "path",
            rule: "regular_file",
          },
        );
      }
      const current = await readWholeFile(real, args.path, WRITE_CAP, context.signal);
      await assertFresh(context, real, args.path, current.sha256);
      mode = current.info.mode & 0o7777;
    }
    if (context.signal.aborted) throw context.signal.reason;
    await atomicWrite(real, data, {
      mode,
      createDirectories: args.createDirectories === true,
      input: args.path,
      check: (fd, info) => openedFileRefusal(resolved, fd, info, context, { input: args.path, purpose: "write" }),
      // A file another process created since the lstat above was never read: not replaced.
      ...(existing ? {} : { createOnly: () => notReadRefusal(context, args.path) }),
    });
    const digest = sha256(data);
    // The chat knows what it just wrote: a follow-up write needs no re-read.
    await context.ledger.recordRead(ledgerChat(context), real, digest);
    return {
      path: toResultPath(absolute, context),
      size: data.length,
      sha256: digest,
      created: !existing,
      absolute,
      real,
    };
  });
}

export const writeFileTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  approval: { default: "allow", subject: { kind: "path", arguments: ["path"] } },
  definition: {
    name: "write_file",
    description:
      "Creates a file or replaces its whole content with UTF-8 text. To overwrite an existing file you must have read it with read_file in this chat, and it must not have changed since. For small edits prefer apply_patch.",
    parameters: {
      type: "object",
      properties: {
        path: {
          type: "string",
          description: "File to write: absolute, ~-prefixed, or relative to the working directory.",
        },
        content: { type: "string", description: "The complete new content of the file." },
        createDirectories: {
          type: "boolean",
          description: "Create missing parent directories. Default false.",
        },
      },
      required: ["path", "content"],
    },
  },
  settings: {
    title: "Write file",
    description:
      "Lets the model create and overwrite files within the allowed directories (read-before-write enforced).",
    category: "system",
    annotations: { destructiveHint: true, idempotentHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS],
  },
  validateArguments: pathArgumentsCheck("path"),
  async execute(args, context) {
    const {
      absolute: _a,
      real: _r,
      ...result
    } = await writeFileForChat(args as { path: string; content: string; createDirectories?: boolean }, context);
    return result;
  },
});
