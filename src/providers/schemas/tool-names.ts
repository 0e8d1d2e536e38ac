/**
 * Tool-name mapping: each provider's name rule ({@link TOOL_NAME_RULES}), sanitizing a registered name to it, and
 * the two-way {@link ToolNameMap} that translates a sanitized wire name in a model's call back to the registered
 * tool name.
 */
import { createHash } from "node:crypto";
import type { ProviderName } from "../types.js";

/** A provider's tool-name rule: allowed characters, whether the first character is restricted, maximum length. */
export interface ToolNameRule {
  /** Matches a valid name. */
  valid: RegExp;
  /** Matches one character that is NOT allowed anywhere in a name. */
  invalidChar: RegExp;
  /** Matches a valid first character (names that fail get a `_` prefix). */
  firstChar: RegExp;
  maxLength: number;
}

/**
 * Tool-name rules per provider (documented limits, the narrowest where sources disagree):
 * OpenAI (Responses and Chat Completions) `^[a-zA-Z0-9_-]{1,64}$`; Anthropic `^[a-zA-Z0-9_-]{1,64}$`; Gemini: starts
 * with a letter or `_`, then letters, digits, `_ . : -`, at most 64 (newer API references allow 128; 64 is accepted
 * everywhere).
 */
export const TOOL_NAME_RULES: Record<ProviderName, ToolNameRule> = {
  openai: {
    valid: /^[a-zA-Z0-9_-]{1,64}$/,
    invalidChar: /[^a-zA-Z0-9_-]/g,
    firstChar: /^[a-zA-Z0-9_-]/,
    maxLength: 64,
  },
  "openai-chat": {
    valid: /^[a-zA-Z0-9_-]{1,64}$/,
    invalidChar: /[^a-zA-Z0-9_-]/g,
    firstChar: /^[a-zA-Z0-9_-]/,
    maxLength: 64,
  },
  anthropic: {
    valid: /^[a-zA-Z0-9_-]{1,64}$/,
    invalidChar: /[^a-zA-Z0-9_-]/g,
    firstChar: /^[a-zA-Z0-9_-]/,
    maxLength: 64,
  },
  gemini: {
    valid: /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/,
    invalidChar: /[^a-zA-Z0-9_.:-]/g,
    firstChar: /^[a-zA-Z_]/,
    maxLength: 64,
  },
};

function shortHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 8);
}

/**
 * A name valid under `provider`'s rule: returned unchanged when already valid; otherwise each disallowed character
 * becomes `_`, a disallowed first character gets a `_` prefix, an empty name becomes `tool`, and a name that is too
 * long is cut and ends with `_` + 8 hex digits of its SHA-256 (so long names that share a prefix stay distinct).
 */
export function sanitizeToolName(name: string, provider: ProviderName): string {
  const rule = TOOL_NAME_RULES[provider];
  if (rule.valid.test(name)) return name;
  let out = name.replace(rule.invalidChar, "_");
  if (out === "") out = "tool";
  if (!rule.firstChar.test(out)) out = `_${out}`;
  if (out.length > rule.maxLength) out = `${out.slice(0, rule.maxLength - 9)}_${shortHash(name)}`;
  return out;
}

/**
 * The two-way mapping between registered tool names and the names sent to one provider. Built deterministically
 * from the tool list (see {@link ToolNameMap.build}), so the loop can rebuild it from the same definitions, or take
 * it from the mapper options, and translate the name in a provider's tool call back with {@link fromWire}.
 */
export class ToolNameMap {
  readonly #toWire = new Map<string, string>();
  readonly #fromWire = new Map<string, string>();

  private constructor(readonly provider: ProviderName) {}

  /**
   * Maps `names` for `provider`: names already valid keep themselves; the others are sanitized
   * ({@link sanitizeToolName}) and, when that collides with a name taken earlier, suffixed `_2`, `_3`….
   * Duplicate input names map once.
   */
  static build(names: readonly string[], provider: ProviderName): ToolNameMap {
    const map = new ToolNameMap(provider);
    const rule = TOOL_NAME_RULES[provider];
    const unique = [...new Set(names)];
    for (const name of unique) if (rule.valid.test(name)) map.#set(name, name);
    for (const name of unique) {
      if (map.#toWire.has(name)) continue;
      const base = sanitizeToolName(name, provider);
      let wire = base;
      for (let n = 2; map.#fromWire.has(wire); n++) {
        const suffix = `_${n}`;
        wire = `${base.slice(0, rule.maxLength - suffix.length)}${suffix}`;
      }
      map.#set(name, wire);
    }
    return map;
  }

  #set(name: string, wire: string): void {
    this.#toWire.set(name, wire);
    this.#fromWire.set(wire, name);
  }

  /** The wire name of a registered tool name (a name not in the map is sanitized on the fly, not recorded). */
  toWire(name: string): string {
    return this.#toWire.get(name) ?? sanitizeToolName(name, this.provider);
  }

  /** The registered tool name for a wire name the model called, or undefined when no tool was sent under it. */
  fromWire(wireName: string): string | undefined {
    return this.#fromWire.get(wireName);
  }

  /** True when at least one name differs on the wire. */
  get renamed(): boolean {
    for (const [name, wire] of this.#toWire) if (name !== wire) return true;
    return false;
  }

  /** `[registeredName, wireName]` pairs in input order. */
  entries(): [string, string][] {
    return [...this.#toWire.entries()];
  }
}
