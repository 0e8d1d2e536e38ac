/**
 * Registry names of imported tools: `mcp__<server>__<tool>`, with every character outside `[A-Za-z0-9_-]`
 * replaced by `_`, at most 64 characters. A longer name keeps as much of both parts as fits and ends with `_` and
 * an 8-hex-digit hash of the original server and tool names, so it stays unique and never changes between runs.
 */
import { createHash } from "node:crypto";

/** The longest tool name the registry (and every provider) accepts. */
export const MAX_TOOL_NAME_LENGTH = 64;

/** Replaces characters a tool name cannot hold with `_` (collapsing nothing, so the mapping stays predictable). */
export function sanitizeNamePart(part: string): string {
  const cleaned = part.replace(/[^A-Za-z0-9_-]/g, "_");
  return cleaned === "" ? "_" : cleaned;
}

/** A short stable hash (8 hex digits of sha256) of a server and tool name pair. */
export function shortHash(server: string, tool: string): string {
  return createHash("sha256").update(`${server}\u0000${tool}`).digest("hex").slice(0, 8);
}

/** The registry name of tool `tool` of server `server` (deterministic; see the module comment). */
export function importedToolName(server: string, tool: string): string {
  const s = sanitizeNamePart(server);
  const t = sanitizeNamePart(tool);
  const full = `mcp__${s}__${t}`;
  if (full.length <= MAX_TOOL_NAME_LENGTH) return full;
  const suffix = `_${shortHash(server, tool)}`;
  const room = MAX_TOOL_NAME_LENGTH - "mcp____".length - suffix.length;
  // Give the tool part at least half of the room (its name is what the model reads), the server the rest.
  const serverRoom = Math.min(s.length, Math.max(8, room - Math.min(t.length, room - 8)));
  const toolRoom = room - serverRoom;
  return `mcp__${s.slice(0, serverRoom)}__${t.slice(0, toolRoom)}${suffix}`;
}

/**
 * Whether the registry name `toolName` can be a tool of server `server`: the name starts with the server's part as
 * {@link importedToolName} writes it (the whole sanitized name then `__`, or, in a name shortened to the limit, at
 * least its first 8 characters). Conservative: two servers whose names share a prefix may both qualify.
 */
export function serverMayOwnTool(server: string, toolName: string): boolean {
  const s = sanitizeNamePart(server);
  if (toolName.startsWith(`mcp__${s}__`)) return true;
  return toolName.length === MAX_TOOL_NAME_LENGTH && toolName.startsWith(`mcp__${s.slice(0, 8)}`);
}
