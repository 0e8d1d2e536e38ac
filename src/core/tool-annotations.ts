/**
 * Tool behaviour hints (the MCP tool annotations) derived from a tool's settings metadata. A tool states what it
 * knows in `settings.annotations`; what it leaves out is filled in conservatively, following the protocol's own
 * defaults: not read-only, destructive unless read-only, not idempotent, and closed-world unless declared.
 */
import type { RegisteredTool, ToolAnnotationHints } from "./types.js";

/** The complete hints of a tool: declared values win, the rest follow the conservative defaults above. */
export function deriveToolAnnotations(tool: RegisteredTool): Required<ToolAnnotationHints> {
  const declared = tool.settings.annotations ?? {};
  const readOnlyHint = declared.readOnlyHint ?? false;
  return {
    readOnlyHint,
    destructiveHint: readOnlyHint ? false : (declared.destructiveHint ?? true),
    idempotentHint: readOnlyHint ? true : (declared.idempotentHint ?? false),
    openWorldHint: declared.openWorldHint ?? tool.settings.external !== undefined,
  };
}
