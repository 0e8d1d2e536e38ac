/**
 * Parsing of model-supplied tool arguments ("Optional arguments are optional" and
 * "Malformed arguments are rejected, not substituted").
 *
 * - `null` means absent: a strict-mode model (OpenAI Responses) sends `null` for every optional key it skips, so
 *   a null value is removed before validation unless the schema itself admits null. A required key sent as null
 *   is therefore a missing required argument.
 * - Schema defaults are applied to absent keys.
 * - A present value of the wrong type, out of range or not among the allowed values is a ToolArgumentError
 *   (code validation_failed) naming the key; it is never replaced by a default.
 * - Keys the schema does not declare are rejected too (a misspelt flag silently ignored reads as a wrong answer),
 *   unless the schema sets `additionalProperties` to something other than false.
 */
import { createRequire } from "node:module";
import type { Ajv, Options as AjvOptions, ErrorObject, ValidateFunction } from "ajv";
import { argumentRefusal, clip, ToolArgumentError, ToolRefusal } from "./errors.js";
import { PRECOMPILED_ARGUMENT_VALIDATORS } from "./generated/argument-validators.js";
import { checkValueLimits, scanJsonText, TOOL_ARGUMENT_LIMITS, unstorableText } from "./json-limits.js";
import {
  COMBINATOR_KEYWORDS,
  hasCombinator,
  isPlainObject as isRecord,
  NAME_MAP_KEYWORDS,
  SUBSCHEMA_KEYWORDS,
  setOwn,
} from "./json-schema.js";
import type { JsonSchema } from "./types.js";

/**
 * The Ajv options argument schemas are compiled with (at run time, and at build time for the built-in tools'
 * precompiled validators, which must behave the same).
 *
 * validateSchema off: checking each tool schema against the JSON Schema meta-schema compiles the meta-schema first
 * (~30 ms, paid by every short-lived CLI process); a malformed schema still fails to compile, naming the keyword.
 * meta off: nothing validates against the meta-schema, so it is not even added (a few ms per process).
 */
export const ARGUMENT_AJV_OPTIONS: AjvOptions = {
  meta: false,
  allErrors: false,
  useDefaults: true,
  coerceTypes: false,
  strict: false,
  allowUnionTypes: true,
  validateSchema: false,
};

let ajv: Ajv | undefined;

/**
 * The Ajv instance for schemas without a precompiled validator (tools with a settings-dependent definition, tools
 * imported from MCP servers, a library's own tools). Ajv (with ajv-formats) loads on first use, synchronously:
 * a CLI call of a built-in tool never loads it.
 */
function argumentAjv(): Ajv {
  if (!ajv) {
    // createRequire: bundlers leave it alone, so Ajv stays out of the CLI's startup chunks.
    const require = createRequire(import.meta.url);
    const { Ajv: AjvClass } = require("ajv") as { Ajv: new (options: AjvOptions) => Ajv };
    const formats = require("ajv-formats") as { default?: (ajv: Ajv) => Ajv } & ((ajv: Ajv) => Ajv);
    ajv = new AjvClass(ARGUMENT_AJV_OPTIONS);
    (formats.default ?? formats)(ajv);
  }
  return ajv;
}

/** Precompiled validators of the built-in tools' schemas, by the schema's JSON text. */
const precompiled = new Map<string, ValidateFunction>(Object.entries(PRECOMPILED_ARGUMENT_VALIDATORS));

const compiled = new WeakMap<JsonSchema, ValidateFunction>();

function validatorFor(schema: JsonSchema): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = precompiled.get(JSON.stringify(schema)) ?? argumentAjv().compile(closeArgumentSchema(schema));
    compiled.set(schema, validate);
  }
  return validate;
}

/**
 * Copies the schema, closing object schemas that declare properties but say nothing of additionalProperties.
 * Walks subschemas only (a property named "default" or "properties" is a name, not a keyword). Objects that take
 * part in a combination are left open, since closing them would reject the properties their partners declare: a
 * node with allOf/anyOf/oneOf next to its own properties, and the direct branches of allOf/anyOf/oneOf. The root's
 * `$schema` and `$id` are dropped: Ajv (draft-07 class) cannot load a 2020-12 meta-schema reference, and two tools
 * sharing an `$id` would collide in its cache.
 */
export function closeArgumentSchema(schema: JsonSchema): JsonSchema {
  const walk = (node: unknown, inCombination: boolean): unknown => {
    if (!isRecord(node)) return node;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) {
      if (NAME_MAP_KEYWORDS.has(key) && isRecord(value)) {
        out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, walk(sub, false)]));
      } else if ((COMBINATOR_KEYWORDS as readonly string[]).includes(key) && Array.isArray(value)) {
        out[key] = value.map((sub) => walk(sub, true));
      } else if (key === "prefixItems" && Array.isArray(value)) {
        out[key] = value.map((sub) => walk(sub, false));
      } else if (SUBSCHEMA_KEYWORDS.has(key)) {
        out[key] = Array.isArray(value) ? value.map((sub) => walk(sub, false)) : walk(value, false);
      } else {
        out[key] = value;
      }
    }
    const combined = hasCombinator(out);
    if (isRecord(out.properties) && out.additionalProperties === undefined && !inCombination && !combined) {
      out.additionalProperties = false;
    }
    return out;
  };
  const { $schema: _schema, $id: _id, ...rest } = schema;
  return walk(rest, false) as JsonSchema;
}

function admitsNull(schema: JsonSchema | undefined): boolean {
  if (!schema) return false;
  const t = schema.type;
  if (t === "null" || (Array.isArray(t) && t.includes("null"))) return true;
  if (Array.isArray(schema.enum) && schema.enum.includes(null)) return true;
  return [schema.anyOf, schema.oneOf].some((list) => list?.some((s) => admitsNull(s)));
}

/** Removes `null` values the schema does not admit, recursively through objects and arrays (returns a copy). */
export function stripNulls(schema: JsonSchema | undefined, value: unknown, depth = 0): unknown {
  if (depth > MAX_ARGUMENT_DEPTH) {
    throw new ToolArgumentError(`Arguments nest deeper than ${MAX_ARGUMENT_DEPTH} levels; send a flatter value.`, {
      rule: "depth",
    });
  }
  if (Array.isArray(value)) {
    const itemSchema = schema && !Array.isArray(schema.items) ? schema.items : undefined;
    return value.map((v) => stripNulls(itemSchema, v, depth + 1));
  }
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  const properties = schema?.properties;
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    const v = (value as Record<string, unknown>)[key];
    // Own properties only: "constructor" or "__proto__" must not find Object.prototype's members as a schema.
    const propSchema = properties && Object.hasOwn(properties, key) ? properties[key] : undefined;
    if (v === null && !admitsNull(propSchema)) continue;
    const stripped = stripNulls(propSchema, v, depth + 1);
    // A "__proto__" key stays an ordinary (and then rejected) argument instead of a prototype.
    setOwn(out, key, stripped);
  }
  return out;
}

/** Deepest nesting of arrays and objects accepted in model arguments. */
export const MAX_ARGUMENT_DEPTH = 64;

function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (typeof value === "bigint") return "BigInt";
  if (typeof value === "function" || typeof value === "symbol") return typeof value;
  let json: string;
  try {
    // A long string is shown by its start only: quoting all of it (up to megabytes) first would be wasted work.
    json = JSON.stringify(typeof value === "string" && value.length > 64 ? value.slice(0, 64) : value) ?? String(value);
  } catch {
    json = Object.prototype.toString.call(value);
  }
  const shown = json.length > 60 ? `${json.slice(0, 57)}...` : json;
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  return `${kind} ${shown}`;
}

function keyName(instancePath: string, extra?: string): string {
  // A key of the arguments object itself (most errors): no path to split.
  if (instancePath === "") return extra === undefined ? "" : clip(/^\d+$/.test(extra) ? `[${extra}]` : extra);
  const parts = instancePath
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (extra !== undefined) parts.push(extra);
  // A key is the caller's text too: quoted in part when long.
  return clip(parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), ""));
}

function valueAt(root: unknown, instancePath: string): unknown {
  let node = root;
  for (const part of instancePath.split("/").slice(1)) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return node;
}

/**
 * What one Ajv error says a value must be, readable: an enum's values and a union's types separated by ", " (Ajv
 * joins a union with bare commas: `must be string,number`); otherwise Ajv's own message (else the keyword).
 */
export function ajvErrorRule(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  if (error.keyword === "enum" && Array.isArray(params.allowedValues))
    return `must be one of ${params.allowedValues.map((v) => JSON.stringify(v)).join(", ")}`;
  if (error.keyword === "type" && params.type !== undefined) {
    const types = Array.isArray(params.type) ? params.type.map(String) : String(params.type).split(",");
    return `must be ${types.join(", ")}`;
  }
  return error.message ?? error.keyword;
}

function toArgumentError(error: ErrorObject, args: unknown, schema: JsonSchema): ToolRefusal {
  const params = error.params as Record<string, unknown>;
  if (error.keyword === "required") {
    const key = keyName(error.instancePath, String(params.missingProperty));
    return argumentRefusal(`Missing required argument "${key}".`, { argument: key, rule: "required" });
  }
  if (error.keyword === "additionalProperties") {
    const key = keyName(error.instancePath, String(params.additionalProperty));
    const known = Object.keys(
      (error.instancePath === "" ? schema.properties : (error.parentSchema as JsonSchema | undefined)?.properties) ??
        {},
    );
    return argumentRefusal(
      `Unknown argument "${key}"${known.length ? `; expected one of: ${known.join(", ")}` : ""}.`,
      { argument: key, rule: "unknown argument" },
    );
  }
  const key = keyName(error.instancePath) || "(arguments)";
  const value = valueAt(args, error.instancePath);
  const rule = ajvErrorRule(error);
  return argumentRefusal(`Invalid argument "${key}": ${rule}, got ${describeValue(value)}.`, {
    argument: key,
    rule: error.keyword,
  });
}

/**
 * What {@link parseToolArguments} learnt of the raw arguments on the way, for the audit line of the call: `decoded`
 * is set (to the decoded value, or the raw text when it is not JSON, or a `{ notRecorded }` note when it breaks the
 * argument limits) once it is known — the same value the audit would get by decoding the raw arguments itself.
 */
export interface ArgumentDecoding {
  decoded?: unknown;
}

/**
 * Parses raw model arguments (a JSON string or an already-decoded value) against a tool's JSON Schema.
 * Returns a fresh object with nulls removed and defaults applied. Throws ToolArgumentError (validation_failed)
 * for text that is not JSON, for a non-object, and for the first schema violation, naming the key. `decoding`, when
 * given, receives the decoded raw arguments (see {@link ArgumentDecoding}).
 */
export function parseToolArguments(
  schema: JsonSchema,
  raw: unknown,
  decoding?: ArgumentDecoding,
): Record<string, unknown> {
  const parsed = checkToolArguments(schema, raw, decoding);
  if (parsed instanceof ToolRefusal) throw parsed.toError();
  return parsed;
}

/**
 * {@link parseToolArguments} without the throw: returns the parsed arguments, or the refusal it would throw (as data,
 * a ToolRefusal). The runtime refuses bad arguments through this form (an Error, let alone a throw, costs more than
 * the checks themselves).
 */
export function checkToolArguments(
  schema: JsonSchema,
  raw: unknown,
  decoding?: ArgumentDecoding,
): Record<string, unknown> | ToolRefusal {
  let value = raw;
  let sourceText: string | undefined;
  if (typeof raw === "string") {
    const text = raw.trim();
    sourceText = text;
    // What the audit would decode from the raw text is known here only when trimming changed nothing.
    const untrimmed = decoding !== undefined && text.length === raw.length;
    const violation = scanJsonText(text, TOOL_ARGUMENT_LIMITS);
    if (violation) {
      const message = `Arguments: ${violation.message}`;
      if (untrimmed) decoding.decoded = { notRecorded: message };
      return argumentRefusal(message, { rule: violation.limit });
    }
    if (text === "") value = {};
    else {
      try {
        value = JSON.parse(text);
      } catch (error) {
        if (untrimmed) decoding.decoded = raw;
        return argumentRefusal(
          `Arguments are not valid JSON (${(error as Error).message}); send a JSON object matching the tool's schema.`,
          { rule: "json" },
        );
      }
      if (untrimmed) decoding.decoded = value;
    }
  }
  if (value === undefined || value === null) value = {};
  if (typeof value !== "object" || Array.isArray(value)) {
    return argumentRefusal(`Arguments must be a JSON object, got ${describeValue(value)}.`, { rule: "type" });
  }
  if (typeof raw !== "string") {
    // A library caller's value: check the limits and that it is JSON data (no functions, symbols, BigInt, cycles).
    const problem = checkValueLimits(value, TOOL_ARGUMENT_LIMITS);
    if (problem) {
      if (decoding) decoding.decoded = { notRecorded: problem };
      return argumentRefusal(problem, { rule: "json" });
    }
    if (decoding) decoding.decoded = raw;
  }
  // Half a character reaches a file, a process or a database as U+FFFD: refused, never replaced without a word.
  const lone = unstorableText(value, "", sourceText)?.path;
  if (lone !== undefined) {
    const argument = lone.replace(/^\./, "") || "(arguments)";
    return argumentRefusal(
      `Invalid argument "${argument}": it contains a lone UTF-16 surrogate (half of a character), which UTF-8 cannot carry; send valid Unicode text.`,
      { argument, rule: "invalid_unicode" },
    );
  }
  let args: Record<string, unknown>;
  try {
    args = stripNulls(schema, value) as Record<string, unknown>;
  } catch (error) {
    // Only past MAX_ARGUMENT_DEPTH, which the limits above already refuse.
    if (error instanceof ToolArgumentError) return argumentRefusal(error.message, error.details);
    throw error;
  }
  const validate = validatorFor(schema);
  if (!validate(args)) {
    const first = validate.errors?.[0];
    return first ? toArgumentError(first, args, schema) : argumentRefusal("Arguments do not match the tool's schema.");
  }
  return args;
}

/**
 * A RegisteredTool.validateArguments for text arguments the tool stores or looks up in the database (a sub-agent's
 * message, an agent id): each one present — a string, or each string of an array — must not hold a NUL character,
 * which PostgreSQL's text columns refuse. Returns the refusal (not thrown), or undefined.
 */
export function storedTextCheck(...names: string[]): (args: Record<string, unknown>) => ToolRefusal | undefined {
  return (args) => {
    for (const name of names) {
      const value = args[name];
      const values = Array.isArray(value)
        ? value.map((v, i) => [`${name}[${i}]`, v] as const)
        : [[name, value] as const];
      for (const [argument, text] of values) {
        if (typeof text === "string" && text.includes("\0")) {
          return argumentRefusal(
            `Invalid argument "${argument}": it contains a NUL character (\\u0000), which cannot be stored or looked up; send the text without it.`,
            { argument, rule: "nul_byte" },
          );
        }
      }
    }
    return undefined;
  };
}
