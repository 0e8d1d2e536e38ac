/**
 * parseToolArguments: optional arguments are optional, and malformed arguments are rejected, not substituted. `null` is
 * absent; a present value of the wrong type is validation_failed naming the key, never replaced by a default.
 */

import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { ARGUMENT_AJV_OPTIONS, closeArgumentSchema, parseToolArguments } from "../../src/core/arg-parsing.js";
import { ToolArgumentError } from "../../src/core/errors.js";
import { PRECOMPILED_ARGUMENT_VALIDATORS } from "../../src/core/generated/argument-validators.js";
import { defaultRegistry } from "../../src/core/registry.js";
import type { JsonSchema } from "../../src/core/types.js";
import { toStrictSchema } from "../../src/providers/strict-schema.js";

/** The schema: required path, optional integer limit (default 100), optional boolean recursive. */
const listSchema: JsonSchema = Object.freeze({
  type: "object",
  properties: Object.freeze({
    path: Object.freeze({ type: "string" }),
    limit: Object.freeze({ type: "integer", minimum: 1, default: 100 }),
    recursive: Object.freeze({ type: "boolean" }),
  }),
  required: Object.freeze(["path"]) as unknown as string[],
}) as JsonSchema;

function failure(schema: JsonSchema, raw: unknown): ToolArgumentError {
  try {
    parseToolArguments(schema, raw);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolArgumentError);
    return error as ToolArgumentError;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be rejected`);
}

describe("model argument cases: null means absent, a wrong type is refused", () => {
  it('{"path":"a","limit":null} runs with limit 100', () => {
    expect(parseToolArguments(listSchema, '{"path":"a","limit":null}')).toEqual({ path: "a", limit: 100 });
  });

  it.each([
    ['{"path":"a","limit":"10"}', "limit"],
    ['{"path":"a","limit":"abc"}', "limit"],
    ['{"path":"a","recursive":"false"}', "recursive"],
  ])("%s is validation_failed naming %s", (raw, key) => {
    const error = failure(listSchema, raw);
    expect(error.code).toBe("validation_failed");
    expect(error.message).toContain(`"${key}"`);
    expect(error.details).toMatchObject({ argument: key, rule: "type" });
  });

  it('{"path":null} is a missing required path', () => {
    const error = failure(listSchema, '{"path":null}');
    expect(error.code).toBe("validation_failed");
    expect(error.message).toBe('Missing required argument "path".');
    expect(error.details).toMatchObject({ argument: "path", rule: "required" });
  });

  it("the strict dialect's all-null call equals the call that omits the keys", () => {
    const strictCall = parseToolArguments(listSchema, '{"path":"a","limit":null,"recursive":null}');
    const plainCall = parseToolArguments(listSchema, '{"path":"a"}');
    expect(strictCall).toEqual(plainCall);
    expect(strictCall).toEqual({ path: "a", limit: 100 });
    expect(toStrictSchema(listSchema).required).toEqual(["path", "limit", "recursive"]);
  });
});

describe("null vs absent vs wrong type, table-driven", () => {
  type Row = [label: string, raw: string, expected: Record<string, unknown> | { error: string; rule: string }];
  const rows: Row[] = [
    ["limit absent → default", '{"path":"a"}', { path: "a", limit: 100 }],
    ["limit null → default", '{"path":"a","limit":null}', { path: "a", limit: 100 }],
    ["limit given", '{"path":"a","limit":7}', { path: "a", limit: 7 }],
    ["limit string of digits", '{"path":"a","limit":"7"}', { error: "limit", rule: "type" }],
    ["limit fractional", '{"path":"a","limit":7.5}', { error: "limit", rule: "type" }],
    ["limit below minimum", '{"path":"a","limit":0}', { error: "limit", rule: "minimum" }],
    ["limit boolean", '{"path":"a","limit":true}', { error: "limit", rule: "type" }],
    ["recursive absent", '{"path":"a"}', { path: "a", limit: 100 }],
    ["recursive null", '{"path":"a","recursive":null}', { path: "a", limit: 100 }],
    ["recursive false", '{"path":"a","recursive":false}', { path: "a", limit: 100, recursive: false }],
    ["recursive 0", '{"path":"a","recursive":0}', { error: "recursive", rule: "type" }],
    ['recursive "true"', '{"path":"a","recursive":"true"}', { error: "recursive", rule: "type" }],
    ["path absent", "{}", { error: "path", rule: "required" }],
    ["path null", '{"path":null}', { error: "path", rule: "required" }],
    ["path number", '{"path":42}', { error: "path", rule: "type" }],
    ["path array", '{"path":["a"]}', { error: "path", rule: "type" }],
    ["unknown key", '{"path":"a","depth":2}', { error: "depth", rule: "unknown argument" }],
    ["unknown key sent as null is absent", '{"path":"a","depth":null}', { path: "a", limit: 100 }],
  ];
  it.each(rows)("%s", (_label, raw, expected) => {
    if ("error" in expected && typeof expected.error === "string" && "rule" in expected) {
      const error = failure(listSchema, raw);
      expect(error.code).toBe("validation_failed");
      expect(error.details).toMatchObject({ argument: expected.error, rule: expected.rule });
      expect(error.message).toContain(`"${expected.error}"`);
    } else {
      expect(parseToolArguments(listSchema, raw)).toEqual(expected);
    }
  });

  it("lists a union of types with spaces between them", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: { values: { type: "array", items: { type: ["string", "number", "boolean", "null"] } } },
    };
    expect(failure(schema, '{"values":["a",{"b":1}]}').message).toBe(
      'Invalid argument "values[1]": must be string, number, boolean, null, got object {"b":1}.',
    );
    const one: JsonSchema = { type: "object", properties: { id: { type: ["string", "integer"] } } };
    expect(failure(one, '{"id":true}').message).toBe(
      'Invalid argument "id": must be string, integer, got boolean true.',
    );
  });

  it("accepts a decoded object as well as JSON text, and empty text or null as no arguments", () => {
    expect(parseToolArguments(listSchema, { path: "a", limit: null })).toEqual({ path: "a", limit: 100 });
    expect(failure(listSchema, "").details).toMatchObject({ argument: "path", rule: "required" });
    expect(failure(listSchema, null).details).toMatchObject({ argument: "path", rule: "required" });
  });

  it("rejects text that is not JSON and non-objects, saying what to send", () => {
    expect(failure(listSchema, '{"path": "a"').message).toMatch(/not valid JSON.*send a JSON object/);
    expect(failure(listSchema, "[1,2]").message).toMatch(/must be a JSON object, got array/);
    expect(failure(listSchema, '"a"').message).toMatch(/must be a JSON object, got string/);
  });

  it("keeps null where the schema admits it, and inside arrays", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: { note: { type: ["string", "null"] }, tags: { type: "array", items: { type: "string" } } },
    };
    expect(parseToolArguments(schema, '{"note":null}')).toEqual({ note: null });
    expect(failure(schema, '{"tags":["a",null]}').details).toMatchObject({ argument: "tags[1]", rule: "type" });
  });

  it("reads nested nulls as absent and applies nested defaults", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: {
        opts: { type: "object", properties: { deep: { type: "boolean", default: false }, name: { type: "string" } } },
      },
    };
    expect(parseToolArguments(schema, '{"opts":{"deep":null,"name":null}}')).toEqual({ opts: { deep: false } });
    expect(failure(schema, '{"opts":{"deep":"yes"}}').details).toMatchObject({ argument: "opts.deep" });
    expect(failure(schema, '{"opts":{"other":1}}').details).toMatchObject({
      argument: "opts.other",
      rule: "unknown argument",
    });
  });

  it("does not share default objects between calls", () => {
    const schema: JsonSchema = { type: "object", properties: { opts: { type: "object", default: { a: 1 } } } };
    const first = parseToolArguments(schema, "{}");
    (first.opts as Record<string, unknown>).a = 2;
    expect(parseToolArguments(schema, "{}")).toEqual({ opts: { a: 1 } });
  });
});

describe("schemas as authors write them", () => {
  it("accepts a 2020-12 $schema and a shared $id (fixed: both used to throw a raw Ajv error)", () => {
    const schema: JsonSchema = {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      $id: "urn:toolhost:test",
      type: "object",
      properties: { a: { type: "string" } },
    };
    expect(parseToolArguments(schema, '{"a":"x"}')).toEqual({ a: "x" });
    expect(parseToolArguments({ ...schema }, '{"a":"y"}')).toEqual({ a: "y" });
    expect(failure(schema, '{"a":1}').details).toMatchObject({ argument: "a" });
  });

  it("treats property names that look like keywords as names (fixed: 'default' used to stay open)", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: { default: { type: "object", properties: { x: { type: "string" } } }, enum: { type: "string" } },
    };
    expect(parseToolArguments(schema, '{"default":{"x":"1"},"enum":"e"}')).toEqual({ default: { x: "1" }, enum: "e" });
    expect(failure(schema, '{"default":{"x":"1","y":2}}').details).toMatchObject({
      argument: "default.y",
      rule: "unknown argument",
    });
  });

  it("accepts the combined properties of allOf branches (fixed: each branch used to be closed on its own)", () => {
    const schema: JsonSchema = {
      type: "object",
      allOf: [
        { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
        { type: "object", properties: { b: { type: "integer" } } },
      ],
    };
    expect(parseToolArguments(schema, '{"a":"x","b":2}')).toEqual({ a: "x", b: 2 });
    expect(failure(schema, '{"a":"x","b":"2"}').details).toMatchObject({ argument: "b" });
  });

  it("accepts a property declared next to a oneOf together with a branch's own", () => {
    const schema: JsonSchema = {
      type: "object",
      properties: { verbose: { type: "boolean" } },
      oneOf: [
        { properties: { id: { type: "integer" } }, required: ["id"] },
        { properties: { name: { type: "string" } }, required: ["name"] },
      ],
    };
    expect(parseToolArguments(schema, '{"verbose":true,"name":"n"}')).toEqual({ verbose: true, name: "n" });
    expect(failure(schema, '{"verbose":true}').code).toBe("validation_failed");
  });

  it("resolves local $refs", () => {
    const schema: JsonSchema = {
      type: "object",
      $defs: { pos: { type: "integer", minimum: 0 } },
      properties: { start: { $ref: "#/$defs/pos" } },
    };
    expect(parseToolArguments(schema, '{"start":3}')).toEqual({ start: 3 });
    expect(failure(schema, '{"start":-1}').details).toMatchObject({ argument: "start", rule: "minimum" });
  });
});

describe("precompiled argument validators", () => {
  it("cover every built-in schema that does not depend on settings (run `npm run gen:validators` after changing one)", async () => {
    await import("../../src/tools/index.js");
    const missing = defaultRegistry
      .list()
      .filter((tool) => !tool.buildDefinition)
      .filter((tool) => !(JSON.stringify(tool.definition.parameters) in PRECOMPILED_ARGUMENT_VALIDATORS))
      .map((tool) => tool.definition.name);
    expect(missing).toEqual([]);
  });

  it("accept, default and reject exactly as Ajv compiling the schema at run time does", async () => {
    await import("../../src/tools/index.js");
    const tool = defaultRegistry.get("read_file");
    if (!tool) throw new Error("read_file is not registered");
    const schema = tool.definition.parameters;
    const precompiled = PRECOMPILED_ARGUMENT_VALIDATORS[JSON.stringify(schema)];
    const fresh = new Ajv(ARGUMENT_AJV_OPTIONS).compile(closeArgumentSchema(schema));
    for (const args of [{ path: "a" }, { path: 1 }, {}, { path: "a", extra: true }, { path: "a", startLine: 0 }]) {
      const a = structuredClone(args);
      const b = structuredClone(args);
      expect(precompiled?.(a)).toBe(fresh(b));
      expect(a).toEqual(b);
      expect(precompiled?.errors ?? null).toEqual(fresh.errors ?? null);
    }
  });
});
