/**
 * The tool registry: tools register themselves at import time with registerTool(); a second tool with the same name is
 * an error.
 */
import { withCommonSettings } from "./common-settings.js";
import { normalizeToolSettings, type ToolDeclaration } from "./settings-declaration.js";
import { ToolListChanges } from "./tool-changes.js";
import type { RegisteredTool } from "./types.js";

const TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;

/** A set of registered tools, keyed by name. The process-wide default instance backs the free functions below. */
export class ToolRegistryStore {
  readonly #tools = new Map<string, RegisteredTool>();
  /** Fires (with null: every user) when a tool is registered or removed, and (per user) when settings change. */
  readonly changes = new ToolListChanges();
  #generation = 0;
  #sorted: RegisteredTool[] | undefined;

  /** Increases whenever a tool is registered or removed: a cheap key for what is derived from the tool list. */
  get generation(): number {
    return this.#generation;
  }

  /**
   * Adds a tool and returns it as stored: settings metadata completed from its declaration (defaults derived from
   * the parameter descriptors, see settings-declaration.ts) plus the common settings that apply to it.
   * Throws Error when the name is already registered or is not a valid tool name (letters, digits, `_` and `-`,
   * starting with a letter, at most 64 characters), when the schema is not an object, or when the settings
   * declaration is inconsistent (see normalizeToolSettings).
   */
  register(tool: ToolDeclaration | RegisteredTool): RegisteredTool {
    const name = tool.definition.name;
    if (!TOOL_NAME.test(name)) {
      throw new Error(`Invalid tool name "${name}": use letters, digits, "_" or "-", starting with a letter (max 64).`);
    }
    if (this.#tools.has(name)) throw new Error(`A tool named "${name}" is already registered.`);
    if (tool.definition.parameters.type !== "object") {
      throw new Error(`Tool "${name}": parameters must be a JSON Schema with type "object".`);
    }
    const stored = withCommonSettings({ ...tool, settings: normalizeToolSettings(tool.definition, tool.settings) });
    this.#tools.set(name, stored);
    this.#generation++;
    this.#sorted = undefined;
    this.changes.emit(null);
    return stored;
  }

  /** Removes a tool; returns whether it was there. Meant for tests and hot-reloading hosts. */
  unregister(name: string): boolean {
    const removed = this.#tools.delete(name);
    if (removed) {
      this.#generation++;
      this.#sorted = undefined;
      this.changes.emit(null);
    }
    return removed;
  }

  /** The tool with that name, or undefined. */
  get(name: string): RegisteredTool | undefined {
    return this.#tools.get(name);
  }

  /** Every registered tool, sorted by name. */
  list(): RegisteredTool[] {
    this.#sorted ??= [...this.#tools.values()].sort((a, b) => a.definition.name.localeCompare(b.definition.name));
    return [...this.#sorted];
  }
}

/** The process-wide registry that built-ins register into at import time. */
export const defaultRegistry = new ToolRegistryStore();

/**
 * Registers a tool in the default registry and returns it as stored (see ToolRegistryStore.register); throws on a
 * duplicate name. The settings metadata may be omitted for a tool without settings.
 */
export function registerTool(tool: ToolDeclaration | RegisteredTool): RegisteredTool {
  return defaultRegistry.register(tool);
}

/** Looks a tool up in the default registry. */
export function getTool(name: string): RegisteredTool | undefined {
  return defaultRegistry.get(name);
}

/** All tools of the default registry, sorted by name. */
export function listTools(): RegisteredTool[] {
  return defaultRegistry.list();
}
