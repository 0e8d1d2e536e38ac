/**
 * The one set of JSON Schema primitives every schema walker in Toolhost shares: the argument validator
 * (core/arg-parsing.ts), the OpenAI strict-mode derivation (providers/strict-schema.ts) and the provider dialects
 * (providers/schemas/). They answer the questions a walker must get right the same way everywhere: which keywords
 * hold subschemas, which hold names of subschemas (so a property called "enum" or "$ref" is a name, not a keyword),
 * which hold literal data that is never walked, and how JSON Pointer tokens are written (RFC 6901).
 */
import type { JsonSchema } from "./types.js";

/** True for a JSON object (not null, not an array). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Sets `target[key] = value` as an own data property. A key "__proto__" (an own key of JSON.parse's output) would
 * otherwise set the target's prototype instead, dropping the key and making its value's properties inherited; every
 * other key is a plain assignment (much faster than defineProperty).
 */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/** Deep copy of JSON data (schemas are JSON: no cycles by construction; frozen inputs are fine). */
export function cloneJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => cloneJson(v)) as T;
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) setOwn(out, k, cloneJson(v));
  return out as T;
}

/** The node's `type` as a list of type names (`"string"` → `["string"]`; absent → `[]`). */
export function typeList(schema: JsonSchema): string[] {
  if (typeof schema.type === "string") return [schema.type];
  if (Array.isArray(schema.type)) return schema.type.filter((t): t is string => typeof t === "string");
  return [];
}

/** True when the node describes an object: its type includes "object", or it is untyped and declares properties. */
export function isObjectSchema(schema: JsonSchema): boolean {
  return typeList(schema).includes("object") || (schema.type === undefined && isPlainObject(schema.properties));
}

/** The seven JSON Schema type names. */
export const JSON_TYPES: ReadonlySet<string> = new Set([
  "string",
  "number",
  "integer",
  "boolean",
  "object",
  "array",
  "null",
]);

/** Keywords whose value is literal data, not subschemas: never walked (a `$ref` inside an enum is data). */
export const LITERAL_KEYWORDS: ReadonlySet<string> = new Set([
  "enum",
  "const",
  "default",
  "examples",
  "example",
  "required",
]);

/** Keywords whose value maps names (not keywords) to subschemas. */
export const NAME_MAP_KEYWORDS: ReadonlySet<string> = new Set([
  "properties",
  "patternProperties",
  "$defs",
  "definitions",
  "dependentSchemas",
]);

/** Keywords whose value is one subschema (for `items`, possibly a list of them). */
export const SUBSCHEMA_KEYWORDS: ReadonlySet<string> = new Set([
  "items",
  "additionalItems",
  "additionalProperties",
  "unevaluatedProperties",
  "propertyNames",
  "contains",
  "not",
  "if",
  "then",
  "else",
]);

/** Keywords whose value is a list of subschemas combined by a logic rule. */
export const COMBINATOR_KEYWORDS = ["allOf", "anyOf", "oneOf"] as const;

/** True when the node combines subschemas (`allOf`, `anyOf` or `oneOf` present as a list). */
export function hasCombinator(schema: Record<string, unknown>): boolean {
  return COMBINATOR_KEYWORDS.some((k) => Array.isArray(schema[k]));
}

/** Decodes one JSON Pointer token (`~1` → `/`, `~0` → `~`, after URI-fragment percent-decoding). */
export function decodePointerToken(token: string): string {
  return decodeURIComponent(token).replace(/~1/g, "/").replace(/~0/g, "~");
}

/** Encodes one JSON Pointer token (`~` → `~0`, `/` → `~1`). */
export function encodePointerToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** `description` with `note` appended after a space (or `note` alone when there is no description). */
export function appendNote(description: unknown, note: string): string {
  return typeof description === "string" && description.trim() !== "" ? `${description.trimEnd()} ${note}` : note;
}

/**
 * Merges `allOf` branches into their parent, recursively: properties and required united (the parent's property
 * wins), descriptions joined, any other keyword taken from the first node that has it. Returns a new node; a node
 * without `allOf` is returned as is. Branches are expected to be `$ref`-free (inline first).
 */
export function mergeAllOf(node: Record<string, unknown>): Record<string, unknown> {
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

/**
 * Copies a schema through `visit`, which sees every subschema (not names, not literal data) once, children first
 * already transformed. Use it for keyword-removing rewrites that must not touch a property named like a keyword.
 */
export function mapSubschemas(
  node: unknown,
  visit: (node: Record<string, unknown>) => Record<string, unknown>,
): unknown {
  if (Array.isArray(node)) return node.map((v) => mapSubschemas(v, visit));
  if (!isPlainObject(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (LITERAL_KEYWORDS.has(k)) out[k] = cloneJson(v);
    else if (NAME_MAP_KEYWORDS.has(k) && isPlainObject(v)) {
      out[k] = Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, mapSubschemas(sub, visit)]));
    } else out[k] = mapSubschemas(v, visit);
  }
  return visit(out);
}
