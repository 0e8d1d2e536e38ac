/**
 * apply_patch (also `trigger("tool::apply_patch", …)`): applies a unified diff or a
 * `*** Begin Patch` envelope to one or more files, all or nothing.
 *
 * The implementation is src/tools/fs/apply-patch-engine.ts, loaded on the first call; the patch's text is parsed and
 * its paths' text checked (src/tools/fs/patch-parse.ts) before the call runs, so a malformed patch is refused as
 * any bad argument is.
 *
 * - Formats and the tolerant pre-pass: see ../fs/patch-parse.ts. With `path` given, header-less hunks apply to it.
 * - Each hunk is located by its context and removed lines: first at the line its header names (shifted by what
 *   earlier hunks added or removed), then at the nearest line within the file, comparing exactly, then ignoring
 *   trailing whitespace, then ignoring surrounding whitespace; an envelope `@@ anchor` narrows the search to after
 *   the anchor line. Context lines keep the file's bytes; added lines take the file's line ending (CRLF stays CRLF).
 *   Bytes outside the hunks are preserved exactly (a file that is not valid UTF-8 is refused, not re-encoded).
 * - Every target (and move destination) goes through the path policy; updated, deleted and moved files need a
 *   fresh read by this chat (the freshness guard of write_file). Everything is checked and computed before the
 *   first byte is written, so a failure in the second file leaves the first untouched; a write the file system
 *   fails halfway (a file the patch adds in the way of another, a full disk) undoes the writes before it. Planning
 *   and writing run under this process's lock on every target's real path (taken in sorted order), so concurrent
 *   stale writers cannot both pass the freshness check.
 * - A target or move destination whose final component is a symbolic link (inside the root, outside, or dangling)
 *   is refused (validation_failed): patch the link's target path directly. Links in parent directories are fine.
 * - A hunk that does not apply names its file and hunk, shows the lines it expected and what the file holds there.
 *
 * Result: { patched: true, path, files: { path, action, hunks }[] } (`path`: the first file, re-anchored).
 */
import { PATH_POLICY_DESCRIPTORS } from "../../core/path-policy.js";
import { defineTool, lazyExecute } from "../../core/settings-declaration.js";
import type { RegisteredTool } from "../../core/types.js";
import { patchArgumentsRefusal, patchTargets } from "../fs/patch-parse.js";

export type { ApplyPatchResult } from "../fs/apply-patch-engine.js";

export const applyPatchTool: RegisteredTool = defineTool({
  // Approval: allowed by default; the path policy (or SSRF guard) confines it, rules match its subject.
  // Rules match every file the patch touches, as the tool's own parser reads it (renames, quoted names, padding).
  approval: {
    default: "allow",
    subject: { kind: "path", arguments: ["path"], patchArgument: "patch", namedPaths: patchTargets },
  },
  definition: {
    name: "apply_patch",
    description:
      'Edits files with a patch, all or nothing: a unified diff ("--- a/f" / "+++ b/f" headers and "@@ -l,n +l,n @@" hunks; several files, new and deleted files) or a "*** Begin Patch" envelope (*** Add File / *** Update File / *** Delete File / *** Move to, "@@" hunks, *** End Patch). Files you change must have been read with read_file first.',
    parameters: {
      type: "object",
      properties: {
        patch: { type: "string", description: "The patch text." },
        path: {
          type: "string",
          description:
            "Target file for hunks that carry no file headers: absolute, ~-prefixed, or relative to the working directory.",
        },
      },
      required: ["patch"],
    },
  },
  settings: {
    title: "Apply patch",
    description:
      "Lets the model edit files with unified diffs within the allowed directories (read-before-write enforced).",
    category: "system",
    annotations: { destructiveHint: true, idempotentHint: false },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors: [...PATH_POLICY_DESCRIPTORS],
  },
  // The patch's text (syntax, the paths it names) is checked before the call runs; the engine, which touches the
  // files, loads on the first call.
  validateArguments: (args) => patchArgumentsRefusal(args as { patch: string; path?: string }),
  execute: lazyExecute(() =>
    import("../fs/apply-patch-engine.js").then(
      ({ applyPatch }) =>
        (args, context) =>
          applyPatch(args as { patch: string; path?: string }, context),
    ),
  ),
});
