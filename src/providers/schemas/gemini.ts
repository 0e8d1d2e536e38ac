/**
 * The Gemini dialects of tool schemas. Source schemas stay plain JSON Schema: whatever Gemini rejects is removed or
 * rewritten here, on a copy.
 *
 * - Raw JSON Schema (`parametersJsonSchema` of generateContent, `parameters` of the Interactions API):
 *   `$schema`/`$id`/`$comment` removed, local `$ref`s inlined where they are not recursive (a recursive one is left
 *   as `$ref` + `$defs`, which the JSON Schema field accepts). See {@link toGeminiJsonSchema}.
 * - The older OpenAPI-subset `parameters` field: see {@link toGeminiOpenApiSchema} for every rewrite.
 */
import type { Schema } from "@google/genai";
import { appendNote, cloneJson, isPlainObject, mapSubschemas, mergeAllOf, typeList } from "../../core/json-schema.js";
import type { JsonSchema } from "../../core/types.js";
import { inlineLocalRefs, inlineWherePossible } from "../strict-schema.js";
import { toAnthropicInputSchema } from "./anthropic.js";

const META_KEYWORDS: ReadonlySet<string> = new Set(["$schema", "$id", "$comment"]);

/**
 * The schema Gemini's raw JSON Schema fields take (`FunctionDeclaration.parametersJsonSchema`, and `parameters`
 * of an Interactions API function tool): a copy of the source with `$schema`/`$id`/`$comment` removed and local
 * `$ref`s inlined (a recursive reference is kept as `$ref` with its `$defs`, which these fields accept), and
 * `type: "object"` added at the top when absent. Everything else passes through: Gemini ignores the keywords it
 * does not enforce (minLength, maxLength…), and the executor validates against the source anyway.
 */
export function toGeminiJsonSchema(schema: JsonSchema): JsonSchema {
  const out = mapSubschemas(inlineWherePossible(schema), (node) => {
    for (const key of META_KEYWORDS) delete node[key];
    return node;
  }) as JsonSchema;
  if (out.type === undefined) out.type = "object";
  return out;
}

// ─── The OpenAPI-subset `parameters` field ──────────────────────────────────────────────────────────────────

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

const COUNT_BOUNDS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"] as const;

function formatLiteral(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(JSON.stringify(value));
}

/** What one node's `type`, `enum`, `const` and `null`s come to in the subset, plus notes for the description. */
interface GeminiTyping {
  /** Non-null JSON type names the node admits. */
  types: string[];
  nullable: boolean;
  /** String enum values (the only kind the subset has). */
  enum?: unknown[];
  notes: string[];
}

function geminiTyping(node: JsonSchema): GeminiTyping {
  const declared = typeList(node);
  const typing: GeminiTyping = {
    types: declared.filter((t) => t !== "null" && GEMINI_TYPES[t] !== undefined),
    nullable: declared.includes("null"),
    notes: [],
  };
  const inferString = () => {
    if (typing.types.length === 0) typing.types = ["string"];
  };
  // const → enum of one string where possible; a non-string const becomes a description note.
  let enumValues: unknown[] | undefined = Array.isArray(node.enum) ? [...node.enum] : undefined;
  if (node.const !== undefined && enumValues === undefined) {
    if (node.const === null) typing.nullable = true;
    else if (typeof node.const === "string") {
      enumValues = [node.const];
      inferString();
    } else typing.notes.push(`Must be ${formatLiteral(node.const)}.`);
  }
  if (enumValues !== undefined) {
    if (enumValues.includes(null)) typing.nullable = true;
    const values = enumValues.filter((v) => v !== null);
    if (values.length > 0 && values.every((v) => typeof v === "string")) {
      typing.enum = values;
      inferString();
    } else if (values.length > 0) {
      // Gemini's enum is string-only. Stringifying would make the model send "2" where the executor expects 2
      // (a validation_failed on every call), so the values go into the description and the type is kept.
      typing.notes.push(`Allowed values: ${values.map(formatLiteral).join(", ")}.`);
    }
  }
  if (typing.types.length === 0 && (isPlainObject(node.properties) || node.required !== undefined)) {
    typing.types = ["object"];
  }
  if (typing.types.length === 0 && node.items !== undefined) typing.types = ["array"];
  return typing;
}

/**
 * Numeric bounds: `minimum`/`maximum` kept; `exclusiveMinimum`/`exclusiveMaximum` (rejected by the subset) become
 * the adjacent inclusive bound for integers and a description note for numbers (the executor still enforces them).
 */
function copyNumericBounds(node: JsonSchema, type: string | undefined, out: Record<string, unknown>, notes: string[]) {
  if (typeof node.minimum === "number") out.minimum = node.minimum;
  if (typeof node.maximum === "number") out.maximum = node.maximum;
  for (const [key, inclusive, word] of [
    ["exclusiveMinimum", "minimum", "greater"],
    ["exclusiveMaximum", "maximum", "less"],
  ] as const) {
    const bound = node[key];
    if (typeof bound !== "number") continue;
    if (type !== "INTEGER") {
      notes.push(`Must be ${word} than ${bound}.`);
      continue;
    }
    const lower = key === "exclusiveMinimum";
    const value = lower ? Math.floor(bound) + 1 : Math.ceil(bound) - 1;
    const current = out[inclusive];
    out[inclusive] = typeof current !== "number" ? value : lower ? Math.max(current, value) : Math.min(current, value);
  }
}

/** Scalar keywords of the subset: title, format (when allowed), pattern, count bounds as int64 strings, default. */
function copyScalars(node: JsonSchema, type: string | undefined, out: Record<string, unknown>): void {
  if (typeof node.title === "string") out.title = node.title;
  if (typeof node.format === "string" && type !== undefined && GEMINI_FORMATS[type]?.has(node.format)) {
    out.format = node.format;
  }
  if (typeof node.pattern === "string") out.pattern = node.pattern;
  for (const key of COUNT_BOUNDS) {
    const value = node[key];
    if (typeof value === "number" && Number.isInteger(value) && value >= 0) out[key] = String(value);
  }
  const fallback = node.default;
  if (
    fallback !== undefined &&
    fallback !== null &&
    (typeof fallback !== "object" || type === "OBJECT" || type === "ARRAY")
  ) {
    out.default = cloneJson(fallback);
  }
}

/** Object properties (with their `required` and `propertyOrdering`) and array items, converted. */
function copyChildren(node: JsonSchema, type: string | undefined, out: Record<string, unknown>): void {
  if (type === "OBJECT" && isPlainObject(node.properties)) {
    const properties: Record<string, unknown> = {};
    for (const [name, child] of Object.entries(node.properties)) properties[name] = toGeminiNode(child);
    if (Object.keys(properties).length > 0) {
      out.properties = properties;
      const required = (Array.isArray(node.required) ? node.required : []).filter((k) => k in properties);
      if (required.length > 0) out.required = required;
      if (Array.isArray(node.propertyOrdering)) {
        out.propertyOrdering = node.propertyOrdering.filter((k) => k in properties);
      }
    }
  }
  if (type === "ARRAY") {
    const items = Array.isArray(node.items) ? node.items[0] : node.items;
    if (items !== undefined) out.items = toGeminiNode(items);
  }
}

/** `anyOf`/`oneOf` read as `anyOf`; `{type: "null"}` branches become `nullable: true`; a lone branch is merged in. */
function copyAlternatives(node: JsonSchema, out: Record<string, unknown>): void {
  const alternatives = [
    ...(Array.isArray(node.anyOf) ? node.anyOf : []),
    ...(Array.isArray(node.oneOf) ? node.oneOf : []),
  ];
  if (alternatives.length === 0) return;
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

function toGeminiNode(raw: unknown): Record<string, unknown> {
  if (!isPlainObject(raw)) return {};
  const node = mergeAllOf(raw) as JsonSchema;
  const typing = geminiTyping(node);
  const out: Record<string, unknown> = {};
  const describe = (notes: string[]) => {
    const base = typeof node.description === "string" ? node.description : undefined;
    const text = notes.reduce<string | undefined>((d, note) => appendNote(d, note), base);
    if (text !== undefined) out.description = text;
  };
  if (typing.types.length > 1) {
    // A type array ["string", "integer"] ("Proto field is not repeating") becomes anyOf of single types.
    out.anyOf = typing.types.map((t) => toGeminiNode({ ...node, type: t, description: undefined }));
    describe(typing.notes);
    if (typing.nullable) out.nullable = true;
    return out;
  }
  const type = typing.types[0] !== undefined ? GEMINI_TYPES[typing.types[0]] : undefined;
  if (type !== undefined) out.type = type;
  if (typing.nullable) out.nullable = true;
  if (typing.enum !== undefined) out.enum = typing.enum;
  const notes = [...typing.notes];
  copyScalars(node, type, out);
  copyNumericBounds(node, type, out, notes);
  copyChildren(node, type, out);
  copyAlternatives(node, out);
  describe(notes);
  return out;
}

/**
 * The Gemini OpenAPI-subset `Schema` for `FunctionDeclaration.parameters` (the older field; prefer
 * `parametersJsonSchema`, see {@link toGeminiJsonSchema}), or `undefined` for a tool without parameters (an
 * OBJECT with no properties is rejected; the field may be left unset). Rewrites, on a copy:
 *
 * - top-level `oneOf`/`anyOf`/`allOf` flattened into one object as the Anthropic dialect does;
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
