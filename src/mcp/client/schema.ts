/**
 * Input schemas of imported tools. External servers publish JSON Schema in any dialect and style; what Toolhost
 * offers a model must be self-contained and plain (the provider mappers derive strict dialects from it):
 *
 * - local `$ref`s (`#`, `#/$defs/…`, `#/definitions/…`, any JSON pointer into the document) are inlined, with a
 *   cycle guard: a reference back into its own expansion becomes an unconstrained schema `{}` with a description
 *   saying so (the original schema still validates the arguments in full);
 * - `$schema`, `$id`, `$anchor`, `$comment`, `$defs` and `definitions` are dropped once inlined;
 * - a missing `type` is inferred from the keywords present (`properties` → object, `items` → array, `enum` or
 *   `const` → the type of their values), and the root is always `type: "object"`.
 *
 * Arguments are validated against the server's ORIGINAL schema with Ajv, in the dialect it declares (draft-07 and
 * earlier through Ajv's default class, 2020-12 — the protocol's default — through Ajv2020).
 */
import { Ajv, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { BrandedError, errorBrand } from "../../core/errors.js";
import type { JsonSchema } from "../../core/types.js";

const addFormats = addFormatsModule as unknown as (ajv: Ajv | Ajv2020) => unknown;

/** A tool schema that cannot be offered (not an object at the root, an unresolvable reference, too large). */
export class ImportedSchemaError extends BrandedError {
  static override readonly brand: symbol = errorBrand("ImportedSchemaError");
  override readonly name = "ImportedSchemaError";
}

/** Most schema nodes an inlined schema may have (guards against reference fan-out blowing up). */
const MAX_NODES = 20_000;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const DROPPED = new Set(["$schema", "$id", "$anchor", "$comment", "$defs", "definitions", "$dynamicAnchor"]);

function resolvePointer(root: unknown, ref: string): unknown {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) {
    throw new ImportedSchemaError(`reference "${ref}" points outside the schema; only local references are supported`);
  }
  let node: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node)) node = node[Number(key)];
    else if (isRecord(node)) node = node[key];
    else node = undefined;
    if (node === undefined) throw new ImportedSchemaError(`reference "${ref}" does not resolve`);
  }
  return node;
}

function typeOfValue(value: unknown): string | undefined {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (Number.isInteger(value)) return "integer";
  const t = typeof value;
  return t === "string" || t === "number" || t === "boolean" || t === "object" ? t : undefined;
}

function inferType(node: Record<string, unknown>): string | string[] | undefined {
  if (node.type !== undefined) return node.type as string | string[];
  if (node.properties !== undefined || node.required !== undefined || node.additionalProperties !== undefined) {
    return "object";
  }
  if (node.items !== undefined || node.prefixItems !== undefined) return "array";
  const values = Array.isArray(node.enum) ? node.enum : "const" in node ? [node.const] : undefined;
  if (values && values.length > 0) {
    const types = [...new Set(values.map(typeOfValue))];
    if (types.every((t) => t !== undefined)) {
      // Integers among numbers are numbers.
      const merged = types.includes("number") ? types.filter((t) => t !== "integer") : types;
      return merged.length === 1 ? (merged[0] as string) : (merged as string[]);
    }
  }
  return undefined;
}

/**
 * The plain, self-contained form of an imported tool's input schema (see the module comment). Throws
 * ImportedSchemaError when the root is not an object schema, a reference does not resolve or points outside the
 * document, or the inlined schema grows past {@link MAX_NODES} nodes.
 */
export function normalizeImportedSchema(schema: unknown): JsonSchema {
  const root = schema === undefined ? {} : schema;
  if (!isRecord(root)) throw new ImportedSchemaError("the input schema is not a JSON object");
  let nodes = 0;
  const walk = (node: unknown, expanding: readonly string[]): unknown => {
    if (++nodes > MAX_NODES) throw new ImportedSchemaError(`the schema has more than ${MAX_NODES} nodes once inlined`);
    if (Array.isArray(node)) return node.map((item) => walk(item, expanding));
    if (!isRecord(node)) return node;
    if (typeof node.$ref === "string") {
      const ref = node.$ref;
      const { $ref: _ref, ...siblings } = node;
      if (expanding.includes(ref)) {
        const said = typeof siblings.description === "string" ? `${siblings.description} ` : "";
        return { description: `${said}(recursive: same shape as its enclosing value)` };
      }
      const target = walk(resolvePointer(root, ref), [...expanding, ref]);
      const rest = walk(siblings, expanding) as Record<string, unknown>;
      if (!isRecord(target)) return target;
      // Keywords next to $ref apply too (2019-09+): merge where they do not clash, else keep both via allOf.
      const clash = Object.keys(rest).some((k) => k in target && k !== "description" && k !== "title");
      return clash ? { allOf: [target, rest] } : { ...target, ...rest };
    }
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) {
      if (DROPPED.has(key)) continue;
      if (key === "properties" || key === "patternProperties" || key === "dependentSchemas") {
        out[key] = isRecord(value)
          ? Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, walk(sub, expanding)]))
          : value;
      } else if (key === "enum" || key === "const" || key === "default" || key === "examples" || key === "required") {
        out[key] = value;
      } else {
        out[key] = walk(value, expanding);
      }
    }
    const type = inferType(out);
    if (type !== undefined && out.type === undefined) out.type = type;
    return out;
  };
  const normalized = walk(root, []) as Record<string, unknown>;
  if (normalized.type === undefined) normalized.type = "object";
  if (normalized.type !== "object") {
    throw new ImportedSchemaError(
      `the input schema's root must be an object schema, not ${JSON.stringify(normalized.type)}`,
    );
  }
  if (!isRecord(normalized.properties)) normalized.properties = {};
  return normalized as JsonSchema;
}

const draft07 = new Ajv({ strict: false, allErrors: true, allowUnionTypes: true, validateSchema: false });
const draft2020 = new Ajv2020({ strict: false, allErrors: true, allowUnionTypes: true, validateSchema: false });
addFormats(draft07);
addFormats(draft2020);

/**
 * Compiles a validator for a tool's original input schema in the dialect its `$schema` names (draft-04/06/07 →
 * draft-07 rules; 2019-09, 2020-12 or none → 2020-12, the protocol's default). `$id`s are removed so two tools
 * sharing one cannot collide. Throws ImportedSchemaError when Ajv cannot compile it.
 */
export function compileOriginalSchema(schema: unknown): ValidateFunction {
  const source = isRecord(schema) ? schema : {};
  const dialect = typeof source.$schema === "string" ? source.$schema : "";
  const ajv = /draft-0[4-7]/.test(dialect) ? draft07 : draft2020;
  const { $schema: _s, $id: _i, ...rest } = source;
  try {
    return ajv.compile(rest);
  } catch (error) {
    throw new ImportedSchemaError(`the input schema does not compile: ${(error as Error).message}`);
  }
}
