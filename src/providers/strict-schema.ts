/**
 * OpenAI strict-mode schema derivation: optional arguments stay optional in the source schema.
 *
 * Source schemas are plain JSON Schema: a genuine optional uses a single type and is absent from `required`, and
 * length bounds stay on the source. OpenAI's strict mode (Responses `strict: true`) has no optional key, so
 * {@link toStrictSchema} derives that dialect at the boundary, never in the source:
 *
 * - every object is `additionalProperties: false` and lists every property in `required`, at every depth;
 * - a previously optional key becomes nullable with a type union (`type: ["integer", "null"]`, never `anyOf`);
 *   an enum of an optional key gains `null`;
 * - `minLength`/`maxLength` (and other pure assertions OpenAI rejects, such as `uniqueItems`) are dropped, as are
 *   formats OpenAI rejects (e.g. `uri`); numeric bounds, `enum`, `pattern`, `minItems`/`maxItems` are kept;
 * - local `$ref`s (`#/$defs/…`, `#/definitions/…`, `#`) are inlined first; a recursive one is a
 *   {@link SchemaMappingError}, never a stack overflow or a hang;
 * - `oneOf`/`anyOf`/`allOf`/`not` are kept as they are, so {@link isStrictCompatible} reports the schema as not
 *   strict-compatible and the mapper sends the tool non-strict with a warning.
 *
 * The executor still validates arguments against the SOURCE schema (src/core/arg-parsing.ts), reading the `null`s a
 * strict model sends for optional keys as absent, so dropped bounds are still enforced.
 */

import { BrandedError, errorBrand } from "../core/errors.js";
import {
  cloneJson,
  decodePointerToken,
  encodePointerToken,
  isObjectSchema,
  isPlainObject,
  JSON_TYPES,
  LITERAL_KEYWORDS as LITERAL_KEYS,
  NAME_MAP_KEYWORDS as NAME_MAP_KEYS,
  typeList,
} from "../core/json-schema.js";
import type { JsonSchema } from "../core/types.js";

export { cloneJson } from "../core/json-schema.js";

/**
 * A schema cannot be mapped to a provider's dialect: a recursive or dangling local `$ref`, a non-local `$ref`, or
 * a schema that expands beyond {@link MAX_INLINED_NODES} nodes. `pointer` is the JSON pointer of the offending
 * `$ref` inside the schema; `ref` is its value. Mappers catch it and fall back (non-strict) or report it per tool.
 */
export class SchemaMappingError extends BrandedError {
  static override readonly brand: symbol = errorBrand("SchemaMappingError");
  override readonly name = "SchemaMappingError";
  readonly code = "schema_mapping_failed" as const;
  constructor(
    message: string,
    readonly pointer: string,
    readonly ref?: string,
  ) {
    super(message);
  }
}

/** Upper bound on nodes produced while inlining `$ref`s (guards against exponential expansion). */
export const MAX_INLINED_NODES = 20_000;

/** OpenAI strict mode limits: nesting depth of objects/arrays, total properties, values of one enum. */
export const STRICT_LIMITS = { maxDepth: 10, maxProperties: 5000, maxEnumValues: 1000 } as const;

/** String formats OpenAI strict mode accepts; any other `format` is dropped by {@link toStrictSchema}. */
export const STRICT_SUPPORTED_FORMATS: ReadonlySet<string> = new Set([
  "date-time",
  "time",
  "date",
  "duration",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "uuid",
]);

/** Keywords a strict-mode schema node may carry (anything else makes it incompatible). */
const STRICT_ALLOWED_KEYS: ReadonlySet<string> = new Set([
  "type",
  "description",
  "title",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "enum",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "pattern",
  "format",
  "minItems",
  "maxItems",
]);

/**
 * Pure assertions OpenAI strict mode rejects and the executor still enforces on the source schema: dropping them
 * never changes the shape the model must produce. Also annotations strict mode does not take.
 */
const STRICT_DROPPED_KEYS: ReadonlySet<string> = new Set([
  "minLength",
  "maxLength",
  "uniqueItems",
  "minProperties",
  "maxProperties",
  "contains",
  "minContains",
  "maxContains",
  "dependentRequired",
  "propertyNames",
  "if",
  "then",
  "else",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "$anchor",
  "readOnly",
  "writeOnly",
  "deprecated",
  "contentEncoding",
  "contentMediaType",
]);

/** True when the schema contains a `$ref` anywhere (outside literal values). */
export function hasRefs(schema: unknown): boolean {
  const stack: [unknown, boolean][] = [[schema, false]];
  while (stack.length > 0) {
    const [node, isNameMap] = stack.pop()!;
    if (Array.isArray(node)) for (const v of node) stack.push([v, false]);
    else if (isPlainObject(node)) {
      if (isNameMap) {
        for (const v of Object.values(node)) stack.push([v, false]);
        continue;
      }
      if (typeof node.$ref === "string") return true;
      for (const [k, v] of Object.entries(node)) if (!LITERAL_KEYS.has(k)) stack.push([v, NAME_MAP_KEYS.has(k)]);
    }
  }
  return false;
}

/**
 * Returns a copy of `schema` with every local `$ref` (`#`, `#/$defs/Name`, `#/definitions/Name`, or any JSON
 * pointer into the same document) replaced by a copy of its target, and the top-level `$defs`/`definitions`
 * removed. Sibling keywords next to a `$ref` are merged over the target (the sibling wins), as 2020-12 allows.
 * Never mutates `schema`.
 *
 * Throws SchemaMappingError for a recursive reference (a `$ref` reached again while it is being expanded), a
 * reference whose target does not exist, a non-local reference (`https://…`, `other.json#…`), and an expansion
 * beyond MAX_INLINED_NODES nodes. Runs in bounded time and stack depth proportional to the expanded size.
 */
export function inlineLocalRefs(schema: JsonSchema): JsonSchema {
  let produced = 0;
  const resolve = (ref: string, at: string): unknown => {
    if (ref !== "#" && !ref.startsWith("#/")) {
      throw new SchemaMappingError(
        `Schema at "${at}" uses a non-local $ref "${ref}"; inline the referenced schema into the tool's parameters.`,
        at,
        ref,
      );
    }
    let node: unknown = schema;
    for (const token of ref === "#" ? [] : ref.slice(2).split("/")) {
      const key = decodePointerToken(token);
      node = Array.isArray(node) ? node[Number(key)] : isPlainObject(node) ? node[key] : undefined;
      if (node === undefined) {
        throw new SchemaMappingError(
          `Schema at "${at}" has a $ref "${ref}" that points nowhere; fix the reference.`,
          at,
          ref,
        );
      }
    }
    return node;
  };
  const walk = (node: unknown, at: string, expanding: readonly string[], isNameMap = false): unknown => {
    if (++produced > MAX_INLINED_NODES) {
      throw new SchemaMappingError(
        `Schema expands beyond ${MAX_INLINED_NODES} nodes once its $refs are inlined; simplify the schema.`,
        at,
      );
    }
    if (Array.isArray(node)) return node.map((v, i) => walk(v, `${at}/${i}`, expanding));
    if (!isPlainObject(node)) return node;
    if (isNameMap) {
      return Object.fromEntries(
        Object.entries(node).map(([name, sub]) => [name, walk(sub, `${at}/${encodePointerToken(name)}`, expanding)]),
      );
    }
    if (typeof node.$ref === "string") {
      const ref = node.$ref;
      if (expanding.includes(ref)) {
        throw new SchemaMappingError(
          `Schema at "${at}" has a recursive $ref "${ref}" that cannot be inlined; providers that need a flat schema ` +
            "cannot express it — bound the recursion (e.g. a fixed nesting depth) in the tool's parameters.",
          at,
          ref,
        );
      }
      const target = walk(resolve(ref, at), at, [...expanding, ref]);
      const { $ref: _ignored, ...siblings } = node;
      if (Object.keys(siblings).length === 0) return target;
      const merged: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
      for (const [k, v] of Object.entries(siblings)) {
        merged[k] = LITERAL_KEYS.has(k)
          ? cloneJson(v)
          : walk(v, `${at}/${encodePointerToken(k)}`, expanding, NAME_MAP_KEYS.has(k));
      }
      return merged;
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      out[k] = LITERAL_KEYS.has(k)
        ? cloneJson(v)
        : walk(v, `${at}/${encodePointerToken(k)}`, expanding, NAME_MAP_KEYS.has(k));
    }
    return out;
  };
  const { $defs: _defs, definitions: _definitions, ...rest } = schema;
  const referencesDefs = hasRefs(rest);
  if (!referencesDefs) return cloneJson(rest) as JsonSchema;
  return walk(rest, "#", []) as JsonSchema;
}

/** Makes a derived node accept null: a type union (never anyOf) and `null` added to an enum. */
function makeNullable(node: JsonSchema): JsonSchema {
  const out: JsonSchema = { ...node };
  if (typeof out.type === "string") {
    if (out.type !== "null") out.type = [out.type, "null"];
  } else if (Array.isArray(out.type)) {
    if (!out.type.includes("null")) out.type = [...out.type, "null"];
  }
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  return out;
}

function describeDefault(description: string | undefined, value: unknown): string {
  if (description && /\bdefault/i.test(description)) return description; // the author already says it
  const note = `Default: ${JSON.stringify(value)}.`;
  return description ? `${description} ${note}` : note;
}

function toStrictNode(node: unknown, isRoot: boolean): unknown {
  if (!isPlainObject(node)) return node;
  const source = node as JsonSchema;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(source)) {
    if (STRICT_DROPPED_KEYS.has(key)) continue;
    switch (key) {
      case "properties":
      case "required":
      case "additionalProperties":
        break; // handled below
      case "const":
        if (source.enum === undefined) out.enum = [cloneJson(value)];
        break;
      case "format":
        if (typeof value === "string" && STRICT_SUPPORTED_FORMATS.has(value)) out.format = value;
        break;
      case "items":
        out.items = (
          Array.isArray(value) ? value.map((v) => toStrictNode(v, false)) : toStrictNode(value, false)
        ) as JsonSchema;
        break;
      case "anyOf":
      case "oneOf":
      case "allOf":
        out[key] = (Array.isArray(value) ? value.map((v) => toStrictNode(v, false)) : cloneJson(value)) as JsonSchema[];
        break;
      case "not":
        out.not = toStrictNode(value, false) as JsonSchema;
        break;
      default:
        out[key] = cloneJson(value);
    }
  }
  // An optional key with a default reads as "null means the default": say so, since `default` is dropped.
  if (source.default !== undefined && !isRoot) out.description = describeDefault(source.description, source.default);

  if (isObjectSchema(source) || isRoot) {
    if (isRoot && out.type === undefined) out.type = "object";
    const props = isPlainObject(source.properties) ? (source.properties as Record<string, JsonSchema>) : undefined;
    const closable = source.additionalProperties === undefined || source.additionalProperties === false;
    if (props !== undefined || isRoot) {
      const required = new Set(Array.isArray(source.required) ? source.required : []);
      const properties: Record<string, JsonSchema> = {};
      for (const [name, propSchema] of Object.entries(props ?? {})) {
        const derived = toStrictNode(propSchema, false) as JsonSchema;
        properties[name] = required.has(name) ? derived : makeNullable(derived);
      }
      out.properties = properties;
      out.required = Object.keys(properties);
      out.additionalProperties = closable ? false : cloneJson(source.additionalProperties);
    } else if (source.additionalProperties !== undefined) {
      // A free-form object (no declared properties) cannot be expressed in strict mode; keep it as it is so
      // isStrictCompatible reports it.
      out.additionalProperties = cloneJson(source.additionalProperties);
    }
  }
  return out;
}

/**
 * Derives the OpenAI strict-mode dialect of a tool's parameters schema (see the module comment for the rules).
 * Returns a new schema; `schema` is never mutated (frozen schemas are fine). The result is strict-compatible
 * unless the source uses something strict mode cannot express (`oneOf`/`anyOf`/`allOf`/`not`, free-form objects,
 * `additionalProperties` other than false, untyped nodes): check with {@link isStrictCompatible}.
 *
 * Throws SchemaMappingError for a recursive, dangling or non-local `$ref`.
 */
export function toStrictSchema(schema: JsonSchema): JsonSchema {
  const inlined = inlineLocalRefs(schema);
  return toStrictNode(inlined, true) as JsonSchema;
}

/**
 * Lists why `schema` is not valid OpenAI strict-mode schema, one readable line per problem prefixed with its
 * JSON pointer (e.g. `#/properties/opts: additionalProperties must be false`). An empty list means compatible.
 * Checks: `type: "object"` at the top; every object has `properties`, `additionalProperties: false` and every
 * property in `required`; no `oneOf`/`anyOf`/`allOf`/`not`/`$ref`/`$defs`/`minLength`/`maxLength`/`default` or
 * other keyword outside the strict subset; every node typed (or an enum); formats OpenAI accepts; arrays with one
 * `items` schema; nesting depth, property count and enum sizes within OpenAI's limits.
 */
export function strictSchemaProblems(schema: JsonSchema): string[] {
  const problems: string[] = [];
  let propertyCount = 0;
  const check = (node: unknown, at: string, depth: number, isRoot: boolean): void => {
    if (problems.length > 50) return;
    if (!isPlainObject(node)) {
      problems.push(`${at}: must be a schema object, got ${JSON.stringify(node)}`);
      return;
    }
    if (depth > STRICT_LIMITS.maxDepth) {
      problems.push(`${at}: nested deeper than ${STRICT_LIMITS.maxDepth} levels`);
      return;
    }
    const s = node as JsonSchema;
    for (const key of Object.keys(s)) {
      if (!STRICT_ALLOWED_KEYS.has(key)) problems.push(`${at}: keyword "${key}" is not allowed in strict mode`);
    }
    const types = typeList(s);
    if (s.type === undefined && !Array.isArray(s.enum)) problems.push(`${at}: needs a "type"`);
    if (s.type !== undefined && (types.length === 0 || types.some((t) => !JSON_TYPES.has(t)))) {
      problems.push(`${at}: unknown type ${JSON.stringify(s.type)}`);
    }
    if (Array.isArray(s.type) && new Set(s.type).size !== s.type.length) problems.push(`${at}: duplicate types`);
    if (isRoot && s.type !== "object") problems.push(`${at}: the top level must be type "object" (not nullable)`);
    if (s.format !== undefined && !(typeof s.format === "string" && STRICT_SUPPORTED_FORMATS.has(s.format))) {
      problems.push(`${at}: format ${JSON.stringify(s.format)} is not supported in strict mode`);
    }
    if (s.enum !== undefined) {
      if (!Array.isArray(s.enum) || s.enum.length === 0) problems.push(`${at}: enum must be a non-empty array`);
      else if (s.enum.length > STRICT_LIMITS.maxEnumValues) problems.push(`${at}: enum has more than 1000 values`);
    }
    if (types.includes("object")) {
      if (!isPlainObject(s.properties))
        problems.push(`${at}: an object needs "properties" (free-form objects are not allowed)`);
      if (s.additionalProperties !== false) problems.push(`${at}: additionalProperties must be false`);
      const props = isPlainObject(s.properties) ? (s.properties as Record<string, unknown>) : {};
      const required = Array.isArray(s.required) ? s.required : [];
      for (const name of Object.keys(props)) {
        propertyCount++;
        if (!required.includes(name)) problems.push(`${at}: property "${name}" must be listed in required`);
      }
      for (const name of required) {
        if (!(name in props)) problems.push(`${at}: required lists "${name}", which is not a property`);
      }
      for (const [name, child] of Object.entries(props)) {
        check(child, `${at}/properties/${encodePointerToken(name)}`, depth + 1, false);
      }
    } else if (s.properties !== undefined) {
      problems.push(`${at}: "properties" on a node whose type does not include "object"`);
    }
    if (types.includes("array")) {
      if (s.items === undefined) problems.push(`${at}: an array needs "items"`);
      else if (Array.isArray(s.items)) problems.push(`${at}: tuple "items" are not allowed`);
      else check(s.items, `${at}/items`, depth + 1, false);
    }
  };
  check(schema, "#", 0, true);
  if (propertyCount > STRICT_LIMITS.maxProperties) {
    problems.push(`#: more than ${STRICT_LIMITS.maxProperties} properties in total`);
  }
  return problems;
}

/** True when `schema` satisfies OpenAI strict mode (no problems from {@link strictSchemaProblems}). */
export function isStrictCompatible(schema: JsonSchema): boolean {
  return strictSchemaProblems(schema).length === 0;
}

/**
 * {@link inlineLocalRefs} where it can: a schema whose `$ref`s cannot be inlined (recursive, dangling, non-local)
 * is returned as a plain copy instead, for dialects that accept `$ref` with its `$defs`.
 */
export function inlineWherePossible(schema: JsonSchema): JsonSchema {
  try {
    return inlineLocalRefs(schema);
  } catch (error) {
    if (error instanceof SchemaMappingError) return cloneJson(schema);
    throw error;
  }
}
