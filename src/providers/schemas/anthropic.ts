/**
 * The Anthropic dialect of tool schemas (Messages API `input_schema`): Anthropic wants `type: "object"` at the top
 * and rejects `oneOf`/`anyOf`/`allOf` there, so those are flattened into one object schema whose description lists
 * the alternatives. Everything below the top passes through. Source schemas are never mutated.
 */
import { appendNote, cloneJson, isPlainObject, mergeAllOf, typeList } from "../../core/json-schema.js";
import type { JsonSchema } from "../../core/types.js";
import { inlineWherePossible } from "../strict-schema.js";

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
  let out: Record<string, unknown> = cloneJson(schema) as Record<string, unknown>;
  delete out.$schema;
  if (["oneOf", "anyOf", "allOf"].some((k) => Array.isArray(schema[k]))) out = flattenTopCombinators(schema, out);
  out.type = "object";
  return out as JsonSchema & { type: "object" };
}

/** The top level of `schema` with its `$ref`s resolved where possible and its combinators merged or flattened. */
function flattenTopCombinators(schema: JsonSchema, copy: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> = { ...(inlineWherePossible(schema) as Record<string, unknown>) };
  delete out.$schema;
  if (copy.$defs !== undefined) out.$defs = copy.$defs;
  if (copy.definitions !== undefined) out.definitions = copy.definitions;
  if (Array.isArray(out.allOf)) out = mergeAllOf(out);
  const alternatives = [
    ...(Array.isArray(out.anyOf) ? out.anyOf : []),
    ...(Array.isArray(out.oneOf) ? out.oneOf : []),
  ].filter(isPlainObject) as Record<string, unknown>[];
  const exclusive = Array.isArray(out.oneOf);
  delete out.anyOf;
  delete out.oneOf;
  if (alternatives.length === 0) return out;
  const branches = alternatives
    .map((b) => mergeAllOf(b))
    .filter((b) => b.type === undefined || typeList(b as JsonSchema).includes("object"));
  const properties: Record<string, unknown> = isPlainObject(out.properties) ? { ...out.properties } : {};
  for (const branch of branches) {
    if (!isPlainObject(branch.properties)) continue;
    for (const [name, prop] of Object.entries(branch.properties)) if (!(name in properties)) properties[name] = prop;
  }
  const required = [...new Set([...requiredOf(out), ...requiredByEvery(branches)])].filter((k) => k in properties);
  out.properties = properties;
  if (required.length > 0) out.required = required;
  else delete out.required;
  if (branches.length > 0) {
    const listing = branches.map((b, i) => `(${i + 1}) ${describeBranch(b)}`).join("; ");
    out.description = appendNote(
      out.description,
      `Accepts ${exclusive ? "exactly one" : "one or more"} of: ${listing}.`,
    );
  }
  return out;
}

function requiredOf(node: Record<string, unknown>): string[] {
  return Array.isArray(node.required) ? (node.required as string[]) : [];
}

/** The keys every branch requires (none when there are no branches). */
function requiredByEvery(branches: Record<string, unknown>[]): string[] {
  if (branches.length === 0) return [];
  return branches.map(requiredOf).reduce((acc, list) => acc.filter((k) => list.includes(k)));
}
