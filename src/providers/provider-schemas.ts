/**
 * Boundary rewriting of tool schemas and tool names for Gemini and Anthropic (issue 3, "Mapping";
 * 000_6d817c25d4590fa9.txt, "Tool Mapper"). Source schemas stay plain JSON Schema: whatever a provider rejects
 * is removed or rewritten here, on a copy, never in the source.
 *
 * - Gemini, raw JSON Schema (`parametersJsonSchema` of generateContent, `parameters` of the Interactions API):
 *   `$schema`/`$id`/`$comment` removed, local `$ref`s inlined where they are not recursive (a recursive one is left
 *   as `$ref` + `$defs`, which the JSON Schema field accepts). See {@link toGeminiJsonSchema}.
 * - Gemini, the older OpenAPI-subset `parameters` field: see {@link toGeminiOpenApiSchema} for every rewrite.
 * - Anthropic: `type: "object"` at the top of `input_schema`, and no `oneOf`/`anyOf`/`allOf` there (they are
 *   flattened into one object schema whose description lists the alternatives). See {@link toAnthropicInputSchema}.
 * - Tool names: each provider's name rule ({@link TOOL_NAME_RULES}); a {@link ToolNameMap} translates a sanitized
 *   wire name back to the registered tool name.
 */
import { createHash } from "node:crypto";
import type { Schema } from "@google/genai";
import type { JsonSchema } from "../core/types.js";
import { cloneJson, inlineLocalRefs, SchemaMappingError } from "./strict-schema.js";
import type { ProviderName } from "./types.js";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeList(schema: JsonSchema): string[] {
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) return schema.type.filter((t): t is string => typeof t === "string");
  return [];
}

function appendNote(description: unknown, note: string): string {
  return typeof description === "string" && description.trim() !== "" ? `${description.trimEnd()} ${note}` : note;
}

/** Keywords whose value maps names (not keywords) to subschemas. */
const NAME_MAP_KEYWORDS: ReadonlySet<string> = new Set(["properties", "patternProperties", "$defs", "definitions"]);
/** Keywords whose value is literal data. */
const LITERAL_KEYWORDS: ReadonlySet<string> = new Set(["enum", "const", "default", "examples", "example", "required"]);

/** Removes the `$schema`, `$id` and `$comment` keywords at every depth (a property named "$id" stays; a copy). */
function stripMetaKeywords(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(stripMetaKeywords);
  if (!isPlainObject(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "$schema" || k === "$id" || k === "$comment") continue;
    if (LITERAL_KEYWORDS.has(k)) out[k] = cloneJson(v);
    else if (NAME_MAP_KEYWORDS.has(k) && isPlainObject(v)) {
      out[k] = Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, stripMetaKeywords(sub)]));
    } else out[k] = stripMetaKeywords(v);
  }
  return out;
}

/** Inlines local `$ref`s; a recursive (or otherwise un-inlinable) schema is returned as a plain copy instead. */
function inlineWherePossible(schema: JsonSchema): JsonSchema {
  try {
    return inlineLocalRefs(schema);
  } catch (error) {
    if (error instanceof SchemaMappingError) return cloneJson(schema);
    throw error;
  }
}

// ─── Gemini: raw JSON Schema ────────────────────────────────────────────────────────────────────────────────

/**
 * The schema Gemini's raw JSON Schema fields take (`FunctionDeclaration.parametersJsonSchema`, and `parameters`
 * of an Interactions API function tool): a copy of the source with `$schema`/`$id`/`$comment` removed and local
 * `$ref`s inlined (a recursive reference is kept as `$ref` with its `$defs`, which these fields accept), and
 * `type: "object"` added at the top when absent. Everything else passes through: Gemini ignores the keywords it
 * does not enforce (minLength, maxLength…), and the executor validates against the source anyway.
 */
export function toGeminiJsonSchema(schema: JsonSchema): JsonSchema {
  const out = stripMetaKeywords(inlineWherePossible(schema)) as JsonSchema;
  if (out.type === undefined) out.type = "object";
  return out;
}

// ─── Gemini: OpenAPI-subset `parameters` ────────────────────────────────────────────────────────────────────

const GEMINI_TYPES: Record<string, string> = {
  string: "STRING",
  number: "NUMBER",
  integer: "INTEGER",
  boolean: "BOOLEAN",
  array: "ARRAY",
  object: "OBJECT",
};

/** Formats the OpenAPI-subset field accepts, per Gemini type; any other format is dropped. */
const GEMINI_FORMATS: Record<string, ReadonlySet<string>> = {
  STRING: new Set(["enum", "date-time"]),
  INTEGER: new Set(["int32", "int64"]),
  NUMBER: new Set(["float", "double"]),
};

function formatLiteral(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(JSON.stringify(value));
}

/** Merges `allOf` branches (already inlined) into their parent: properties and required united, first value wins. */
function mergeAllOf(node: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(node.allOf)) return node;
  const { allOf, ...base } = node;
  const out: Record<string, unknown> = { ...base };
  for (const raw of allOf as unknown[]) {
    if (!isPlainObject(raw)) continue;
    const branch = mergeAllOf(raw);
    for (const [k, v] of Object.entries(branch)) {
      if (k === "properties" && isPlainObject(v)) {
        out.properties = { ...(v as object), ...((out.properties as object | undefined) ?? {}) };
      } else if (k === "required" && Array.isArray(v)) {
        out.required = [...new Set([...((out.required as string[] | undefined) ?? []), ...(v as string[])])];
      } else if (k === "description" && typeof out.description === "string" && typeof v === "string") {
        if (!out.description.includes(v)) out.description = `${out.description} ${v}`;
      } else if (!(k in out)) out[k] = v;
    }
  }
  return out;
}

function toGeminiNode(raw: unknown): Record<string, unknown> {
  if (!isPlainObject(raw)) return {};
  const node = mergeAllOf(raw) as JsonSchema;
  const out: Record<string, unknown> = {};
  let description = typeof node.description === "string" ? node.description : undefined;
  const note = (text: string) => {
    description = appendNote(description, text);
  };

  const types = typeList(node);
  let nullable = types.includes("null");
  let nonNull = types.filter((t) => t !== "null" && GEMINI_TYPES[t] !== undefined);

  // const → enum of one string where possible; a non-string const becomes a description note.
  let enumValues: unknown[] | undefined = Array.isArray(node.enum) ? [...node.enum] : undefined;
  if (node.const !== undefined && enumValues === undefined) {
    if (node.const === null) nullable = true;
    else if (typeof node.const === "string") {
      enumValues = [node.const];
      if (nonNull.length === 0) nonNull = ["string"];
    } else note(`Must be ${formatLiteral(node.const)}.`);
  }
  if (enumValues !== undefined) {
    if (enumValues.includes(null)) nullable = true;
    const values = enumValues.filter((v) => v !== null);
    if (values.length > 0 && values.every((v) => typeof v === "string")) {
      out.enum = values;
      if (nonNull.length === 0) nonNull = ["string"];
    } else if (values.length > 0) {
      // Gemini's enum is string-only. Stringifying would make the model send "2" where the executor expects 2
      // (a validation_failed on every call), so the values go into the description and the type is kept.
      note(`Allowed values: ${values.map(formatLiteral).join(", ")}.`);
    }
  }
  if (nonNull.length === 0 && (isPlainObject(node.properties) || node.required !== undefined)) nonNull = ["object"];
  if (nonNull.length === 0 && node.items !== undefined) nonNull = ["array"];

  if (nonNull.length > 1) {
    // A type array ["string", "integer"] ("Proto field is not repeating") becomes anyOf of single types.
    out.anyOf = nonNull.map((t) => toGeminiNode({ ...node, type: t, description: undefined }));
    if (description !== undefined) out.description = description;
    if (nullable) out.nullable = true;
    return out;
  }
  const type = nonNull[0] !== undefined ? GEMINI_TYPES[nonNull[0]] : undefined;
  if (type !== undefined) out.type = type;
  if (nullable) out.nullable = true;

  if (typeof node.title === "string") out.title = node.title;
  if (typeof node.format === "string" && type !== undefined && GEMINI_FORMATS[type]?.has(node.format)) {
    out.format = node.format;
  }
  if (typeof node.pattern === "string") out.pattern = node.pattern;
  if (typeof node.minimum === "number") out.minimum = node.minimum;
  if (typeof node.maximum === "number") out.maximum = node.maximum;
  // exclusiveMinimum/Maximum are rejected: an integer bound becomes the inclusive one next to it, a number bound
  // becomes a description note (the executor still enforces it on the source schema).
  for (const [key, inclusive, word] of [
    ["exclusiveMinimum", "minimum", "greater"],
    ["exclusiveMaximum", "maximum", "less"],
  ] as const) {
    const bound = node[key];
    if (typeof bound !== "number") continue;
    if (type === "INTEGER") {
      const value = key === "exclusiveMinimum" ? Math.floor(bound) + 1 : Math.ceil(bound) - 1;
      const current = out[inclusive];
      out[inclusive] =
        typeof current !== "number"
          ? value
          : key === "exclusiveMinimum"
            ? Math.max(current, value)
            : Math.min(current, value);
    } else note(`Must be ${word} than ${bound}.`);
  }
  for (const key of ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"] as const) {
    const value = node[key];
    if (typeof value === "number" && Number.isInteger(value) && value >= 0) out[key] = String(value);
  }
  if (
    node.default !== undefined &&
    node.default !== null &&
    (typeof node.default !== "object" || type === "OBJECT" || type === "ARRAY")
  ) {
    out.default = cloneJson(node.default);
  }

  if (type === "OBJECT" && isPlainObject(node.properties)) {
    const properties: Record<string, unknown> = {};
    for (const [name, child] of Object.entries(node.properties)) properties[name] = toGeminiNode(child);
    if (Object.keys(properties).length > 0) {
      out.properties = properties;
      const required = (Array.isArray(node.required) ? node.required : []).filter((k) => k in properties);
      if (required.length > 0) out.required = required;
      if (Array.isArray(node.propertyOrdering))
        out.propertyOrdering = node.propertyOrdering.filter((k) => k in properties);
    }
  }
  if (type === "ARRAY") {
    const items = Array.isArray(node.items) ? node.items[0] : node.items;
    if (items !== undefined) out.items = toGeminiNode(items);
  }
  const alternatives = [
    ...(Array.isArray(node.anyOf) ? node.anyOf : []),
    ...(Array.isArray(node.oneOf) ? node.oneOf : []),
  ];
  if (alternatives.length > 0) {
    const branches: Record<string, unknown>[] = [];
    for (const alt of alternatives) {
      if (isPlainObject(alt) && (alt.type === "null" || (alt.const === null && alt.type === undefined))) {
        out.nullable = true;
        continue;
      }
      branches.push(toGeminiNode(alt));
    }
    if (branches.length === 1 && out.type === undefined) Object.assign(out, branches[0]);
    else if (branches.length > 0) out.anyOf = branches;
  }
  if (description !== undefined) out.description = description;
  return out;
}

/**
 * The Gemini OpenAPI-subset `Schema` for `FunctionDeclaration.parameters` (the older field; prefer
 * `parametersJsonSchema`, see {@link toGeminiJsonSchema}), or `undefined` for a tool without parameters (an
 * OBJECT with no properties is rejected; the field may be left unset). Rewrites, on a copy:
 *
 * - top-level `oneOf`/`anyOf`/`allOf` flattened into one object as {@link toAnthropicInputSchema} does;
 * - local `$ref`s inlined, `allOf` merged, `oneOf` read as `anyOf`, `{type: "null"}` branches → `nullable: true`;
 * - types upper-cased (`"STRING"`…); a type array → the single type + `nullable: true` (several non-null types
 *   become `anyOf` of single types);
 * - `const` → an enum of one string when it is a string, else a description note; non-string enums are dropped and
 *   their values listed in the description (stringifying them would make the model send `"2"` for `2`, which the
 *   executor rejects); `null` in an enum → `nullable: true`;
 * - integer `exclusiveMinimum`/`exclusiveMaximum` → the adjacent inclusive bound; number ones → a description note;
 * - formats other than STRING `enum`/`date-time`, INTEGER `int32`/`int64`, NUMBER `float`/`double` dropped;
 * - count bounds (`minLength`, `maxItems`…) written as int64 strings, as the API's Schema declares them;
 * - `$schema`, `additionalProperties`, `propertyNames`, `patternProperties`, `not`, `examples`, `$defs` and every
 *   other keyword outside the subset removed.
 *
 * Throws SchemaMappingError for a recursive, dangling or non-local `$ref` (the subset has no references).
 */
export function toGeminiOpenApiSchema(schema: JsonSchema): Schema | undefined {
  // Top-level oneOf/anyOf/allOf are flattened into one object first, exactly as for Anthropic: function
  // parameters must be one OBJECT, and a root anyOf would otherwise leave the tool with no parameters at all.
  const out = toGeminiNode(toAnthropicInputSchema(inlineLocalRefs(schema)));
  out.type = "OBJECT";
  delete out.nullable;
  if (!isPlainObject(out.properties)) return undefined;
  return out as Schema;
}

// ─── Anthropic ──────────────────────────────────────────────────────────────────────────────────────────────

function describeBranch(branch: Record<string, unknown>): string {
  const props = isPlainObject(branch.properties) ? Object.keys(branch.properties) : [];
  const required = Array.isArray(branch.required) ? (branch.required as string[]) : [];
  const parts: string[] = [];
  if (typeof branch.description === "string" && branch.description.trim() !== "") parts.push(branch.description.trim());
  if (required.length > 0) parts.push(`requires ${required.join(", ")}`);
  const optional = props.filter((p) => !required.includes(p));
  if (optional.length > 0) parts.push(`may set ${optional.join(", ")}`);
  return parts.join("; ") || "an empty object";
}

/**
 * The `input_schema` of an Anthropic tool: a copy of the source with `type: "object"` at the top and no
 * top-level `oneOf`/`anyOf`/`allOf` (Anthropic rejects them there). Rewrites:
 *
 * - top-level `allOf`: the object branches are merged into the top (properties and required united);
 * - top-level `anyOf`/`oneOf`: the object branches are flattened into one object whose properties are the union of
 *   theirs, whose `required` keeps the keys required by the top and by every branch, and whose description lists
 *   the alternatives ("Accepts one of: (1) requires path; (2) requires url."). The executor still validates
 *   arguments against the source schema, so a call that satisfies no branch is a validation_failed the model can
 *   correct;
 * - top-level `$schema` removed. Nested combinators, `$ref`s and `$defs` are kept (Anthropic accepts them there);
 *   top-level branches that are `$ref`s are resolved first when they can be.
 */
export function toAnthropicInputSchema(schema: JsonSchema): JsonSchema & { type: "object" } {
  const hasTopCombinator = ["oneOf", "anyOf", "allOf"].some((k) => Array.isArray(schema[k]));
  let out: Record<string, unknown> = cloneJson(schema) as Record<string, unknown>;
  delete out.$schema;
  if (hasTopCombinator) {
    const resolved = inlineWherePossible(schema) as Record<string, unknown>;
    const defs = { $defs: out.$defs, definitions: out.definitions };
    out = { ...resolved };
    delete out.$schema;
    if (defs.$defs !== undefined) out.$defs = defs.$defs;
    if (defs.definitions !== undefined) out.definitions = defs.definitions;
    if (Array.isArray(out.allOf)) out = mergeAllOf(out);
    const alternatives = [
      ...(Array.isArray(out.anyOf) ? out.anyOf : []),
      ...(Array.isArray(out.oneOf) ? out.oneOf : []),
    ].filter(isPlainObject) as Record<string, unknown>[];
    const exclusive = Array.isArray(out.oneOf);
    delete out.anyOf;
    delete out.oneOf;
    if (alternatives.length > 0) {
      const branches = alternatives
        .map((b) => mergeAllOf(b))
        .filter((b) => b.type === undefined || typeList(b as JsonSchema).includes("object"));
      const properties: Record<string, unknown> = isPlainObject(out.properties) ? { ...out.properties } : {};
      for (const branch of branches) {
        if (!isPlainObject(branch.properties)) continue;
        for (const [name, prop] of Object.entries(branch.properties))
          if (!(name in properties)) properties[name] = prop;
      }
      const baseRequired = Array.isArray(out.required) ? (out.required as string[]) : [];
      const requiredByAll =
        branches.length === 0
          ? []
          : branches
              .map((b) => (Array.isArray(b.required) ? (b.required as string[]) : []))
              .reduce((acc, list) => acc.filter((k) => list.includes(k)));
      const required = [...new Set([...baseRequired, ...requiredByAll])].filter((k) => k in properties);
      out.properties = properties;
      if (required.length > 0) out.required = required;
      else delete out.required;
      const listing = branches.map((b, i) => `(${i + 1}) ${describeBranch(b)}`).join("; ");
      if (branches.length > 0) {
        out.description = appendNote(
          out.description,
          `Accepts ${exclusive ? "exactly one" : "one or more"} of: ${listing}.`,
        );
      }
    }
  }
  out.type = "object";
  return out as JsonSchema & { type: "object" };
}

// ─── Tool names ─────────────────────────────────────────────────────────────────────────────────────────────

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
