/**
 * toStrictSchema / isStrictCompatible / inlineLocalRefs (the tool mapper's strict-mode rules; optional arguments stay
 * optional in the source): the strict dialect rule by rule, `$ref` inlining, and recursive references as a typed error
 * rather than a stack overflow or a hang.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { JsonSchema } from "../../src/core/types.js";
import {
  inlineLocalRefs,
  isStrictCompatible,
  SchemaMappingError,
  strictSchemaProblems,
  toStrictSchema,
} from "../../src/providers/strict-schema.js";
import { deriveStrictParameters } from "../../src/providers/tool-mapper.js";

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

describe("toStrictSchema", () => {
  it("derives the seed's example: an optional integer becomes a nullable union and is required", () => {
    const source = deepFreeze<JsonSchema>({
      type: "object",
      properties: { path: { type: "string" }, startLine: { type: "integer", minimum: 1 } },
      required: ["path"],
    });
    expect(toStrictSchema(source)).toEqual({
      type: "object",
      properties: { path: { type: "string" }, startLine: { type: ["integer", "null"], minimum: 1 } },
      required: ["path", "startLine"],
      additionalProperties: false,
    });
  });

  it("keeps numeric bounds, enum, pattern, item counts and supported formats; drops length bounds and others", () => {
    const source = deepFreeze<JsonSchema>({
      type: "object",
      properties: {
        n: { type: "number", minimum: 0, maximum: 1, exclusiveMaximum: 2, multipleOf: 0.5 },
        s: { type: "string", pattern: "^[a-z]+$", minLength: 1, maxLength: 9, format: "email" },
        u: { type: "string", format: "uri" },
        r: { type: "string", format: "uri-reference" },
        d: { type: "string", format: "date-time" },
        e: { type: "string", enum: ["x", "y"] },
        a: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3, uniqueItems: true },
      },
      required: ["n", "s", "u", "r", "d", "e", "a"],
    });
    const props = toStrictSchema(source).properties!;
    expect(props.n).toEqual({ type: "number", minimum: 0, maximum: 1, exclusiveMaximum: 2, multipleOf: 0.5 });
    expect(props.s).toEqual({ type: "string", pattern: "^[a-z]+$", format: "email" });
    expect(props.u).toEqual({ type: "string" });
    expect(props.r).toEqual({ type: "string" });
    expect(props.d).toEqual({ type: "string", format: "date-time" });
    expect(props.e).toEqual({ type: "string", enum: ["x", "y"] });
    expect(props.a).toEqual({ type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 });
  });

  it("adds null to the enum of an optional key, turns const into an enum, and notes a dropped default", () => {
    const source = deepFreeze<JsonSchema>({
      type: "object",
      properties: {
        mode: { type: "string", enum: ["a", "b"] },
        bare: { enum: [1, 2] },
        fixed: { const: "v" },
        limit: { type: "integer", default: 100, description: "Max entries." },
        already: { type: ["string", "null"] },
        said: { type: "integer", default: 5, description: "Retries (default 5)." },
      },
    });
    const props = toStrictSchema(source).properties!;
    expect(props.mode).toEqual({ type: ["string", "null"], enum: ["a", "b", null] });
    expect(props.bare).toEqual({ enum: [1, 2, null] });
    expect(props.fixed).toEqual({ enum: ["v", null] });
    expect(props.limit).toEqual({ type: ["integer", "null"], description: "Max entries. Default: 100." });
    expect(props.already).toEqual({ type: ["string", "null"] });
    expect(props.said).toEqual({ type: ["integer", "null"], description: "Retries (default 5)." });
    expect(isStrictCompatible(toStrictSchema(source))).toBe(true);
  });

  it("requires and closes objects at every depth, including objects inside arrays", () => {
    const source = deepFreeze<JsonSchema>({
      type: "object",
      properties: {
        edits: {
          type: "array",
          items: {
            type: "object",
            properties: { old: { type: "string" }, new: { type: "string" }, all: { type: "boolean" } },
            required: ["old", "new"],
          },
        },
      },
      required: ["edits"],
    });
    const items = toStrictSchema(source).properties!.edits!.items as JsonSchema;
    expect(items).toEqual({
      type: "object",
      properties: { old: { type: "string" }, new: { type: "string" }, all: { type: ["boolean", "null"] } },
      required: ["old", "new", "all"],
      additionalProperties: false,
    });
  });

  it("closes a parameterless root and gives it type object", () => {
    expect(toStrictSchema({ type: "object" })).toEqual({
      type: "object",
      properties: {},
      required: [],
      additionalProperties: false,
    });
    expect(toStrictSchema({ properties: {} })).toEqual({
      type: "object",
      properties: {},
      required: [],
      additionalProperties: false,
    });
    expect(isStrictCompatible(toStrictSchema({ type: "object" }))).toBe(true);
  });

  it("inlines local $refs first", () => {
    const source = deepFreeze<JsonSchema>({
      type: "object",
      $defs: {
        range: {
          type: "object",
          properties: { from: { type: "integer" }, to: { type: "integer" } },
          required: ["from"],
        },
      },
      properties: { a: { $ref: "#/$defs/range" }, b: { $ref: "#/$defs/range", description: "Second." } },
      required: ["a"],
    });
    const strict = toStrictSchema(source);
    expect(JSON.stringify(strict)).not.toMatch(/\$ref|\$defs/);
    expect(strict.properties!.a).toEqual({
      type: "object",
      properties: { from: { type: "integer" }, to: { type: ["integer", "null"] } },
      required: ["from", "to"],
      additionalProperties: false,
    });
    expect(strict.properties!.b!.type).toEqual(["object", "null"]);
    expect(strict.properties!.b!.description).toBe("Second.");
    expect(isStrictCompatible(strict)).toBe(true);
  });

  it("never mutates its input (deep-frozen), for any generated schema", () => {
    const leaf = fc.oneof(
      fc.record(
        { type: fc.constantFrom("string", "integer", "boolean", "number"), description: fc.string() },
        { requiredKeys: ["type"] },
      ),
      fc.record({
        type: fc.constant("string"),
        minLength: fc.nat(5),
        maxLength: fc.nat(50),
        format: fc.constantFrom("uri", "email", "date"),
      }),
      fc.record({ enum: fc.array(fc.oneof(fc.string(), fc.integer()), { minLength: 1, maxLength: 4 }) }),
    );
    const schema = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: "small", withCrossShrink: true }, leaf, tie("object"), tie("array")),
      array: fc.record({ type: fc.constant("array"), items: tie("node"), minItems: fc.nat(3) }),
      object: fc
        .dictionary(fc.constantFrom("a", "b", "c", "d"), tie("node"), { maxKeys: 4 })
        .chain((properties) =>
          fc.subarray(Object.keys(properties)).map((required) => ({ type: "object", properties, required })),
        ),
    }));
    fc.assert(
      fc.property(schema.object, (generated) => {
        const source = deepFreeze(generated as JsonSchema);
        const before = JSON.stringify(source);
        const strict = toStrictSchema(source);
        expect(JSON.stringify(source)).toBe(before);
        expect(strictSchemaProblems(strict)).toEqual([]);
      }),
      { numRuns: 150 },
    );
  });
});

describe("recursive and broken $refs", () => {
  const recursive: [string, JsonSchema][] = [
    ["root self-reference", { type: "object", properties: { child: { $ref: "#" } } }],
    [
      "$defs self-reference",
      {
        type: "object",
        properties: { tree: { $ref: "#/$defs/node" } },
        $defs: { node: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/node" } } } } },
      },
    ],
    [
      "mutual recursion through definitions",
      {
        type: "object",
        properties: { a: { $ref: "#/definitions/A" } },
        definitions: {
          A: { type: "object", properties: { b: { $ref: "#/definitions/B" } } },
          B: { type: "object", properties: { a: { $ref: "#/definitions/A" } } },
        },
      },
    ],
  ];
  it.each(recursive)("%s is a SchemaMappingError naming the $ref", (_label, schema) => {
    deepFreeze(schema);
    let caught: unknown;
    try {
      toStrictSchema(schema);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(SchemaMappingError);
    expect((caught as SchemaMappingError).code).toBe("schema_mapping_failed");
    expect((caught as SchemaMappingError).message).toMatch(/recursive \$ref/);
    expect((caught as SchemaMappingError).ref).toMatch(/^#/);
    const derived = deriveStrictParameters(schema);
    expect(derived.strict).toBe(false);
    expect(derived.parameters).toEqual(schema);
    expect(derived.problems.join(" ")).toMatch(/recursive/);
  });

  it("a dangling $ref and a non-local $ref are typed errors too", () => {
    expect(() => inlineLocalRefs({ type: "object", properties: { a: { $ref: "#/$defs/missing" } } })).toThrowError(
      expect.objectContaining({ name: "SchemaMappingError", message: expect.stringMatching(/points nowhere/) }),
    );
    expect(() =>
      inlineLocalRefs({ type: "object", properties: { a: { $ref: "https://example.com/s.json" } } }),
    ).toThrowError(
      expect.objectContaining({ name: "SchemaMappingError", message: expect.stringMatching(/non-local/) }),
    );
  });

  it("an exponentially expanding (non-recursive) schema stops with a typed error instead of hanging", () => {
    const $defs: Record<string, JsonSchema> = { d0: { type: "string" } };
    for (let i = 1; i <= 40; i++) {
      $defs[`d${i}`] = {
        type: "object",
        properties: { l: { $ref: `#/$defs/d${i - 1}` }, r: { $ref: `#/$defs/d${i - 1}` } },
      };
    }
    expect(() => toStrictSchema({ type: "object", properties: { x: { $ref: "#/$defs/d40" } }, $defs })).toThrowError(
      expect.objectContaining({ name: "SchemaMappingError", message: expect.stringMatching(/expands beyond/) }),
    );
  });

  it("property names that look like keywords are names: their schemas are inlined too", () => {
    const schema = deepFreeze<JsonSchema>({
      type: "object",
      $defs: { s: { type: "string" } },
      properties: { enum: { $ref: "#/$defs/s" }, default: { $ref: "#/$defs/s" }, $ref: { $ref: "#/$defs/s" } },
      required: ["enum", "default", "$ref"],
    });
    const strict = toStrictSchema(schema);
    expect(strict.properties).toEqual({
      enum: { type: "string" },
      default: { type: "string" },
      $ref: { type: "string" },
    });
    expect(isStrictCompatible(strict)).toBe(true);
  });

  it("JSON-pointer escapes and sibling keywords of a $ref are honoured", () => {
    const schema: JsonSchema = {
      type: "object",
      $defs: { "a/b~c": { type: "string", description: "Target." } },
      properties: { x: { $ref: "#/$defs/a~1b~0c", description: "Sibling wins." } },
    };
    expect(inlineLocalRefs(schema)).toEqual({
      type: "object",
      properties: { x: { type: "string", description: "Sibling wins." } },
    });
  });
});

describe("isStrictCompatible / strictSchemaProblems", () => {
  const ok: JsonSchema = {
    type: "object",
    properties: { a: { type: ["string", "null"] }, b: { type: "array", items: { type: "integer" } } },
    required: ["a", "b"],
    additionalProperties: false,
  };

  it("accepts a strict schema", () => {
    expect(strictSchemaProblems(ok)).toEqual([]);
  });

  const bad: [string, JsonSchema, RegExp][] = [
    ["top level not an object", { type: "string" }, /top level must be type "object"/],
    ["nullable top level", { ...ok, type: ["object", "null"] }, /top level must be type "object"/],
    [
      "missing additionalProperties: false",
      { ...ok, additionalProperties: undefined },
      /additionalProperties must be false/,
    ],
    ["a property not required", { ...ok, required: ["a"] }, /property "b" must be listed in required/],
    ["required names a non-property", { ...ok, required: ["a", "b", "c"] }, /required lists "c"/],
    [
      "anyOf",
      { ...ok, properties: { ...ok.properties, a: { anyOf: [{ type: "string" }, { type: "null" }] } } },
      /keyword "anyOf"/,
    ],
    ["oneOf", { ...ok, oneOf: [] }, /keyword "oneOf"/],
    ["allOf", { ...ok, allOf: [] }, /keyword "allOf"/],
    ["not", { ...ok, not: { type: "string" } }, /keyword "not"/],
    ["$ref", { ...ok, properties: { ...ok.properties, a: { $ref: "#/$defs/x" } } }, /keyword "\$ref"/],
    [
      "minLength",
      { ...ok, properties: { ...ok.properties, a: { type: "string", minLength: 1 } } },
      /keyword "minLength"/,
    ],
    [
      "maxLength",
      { ...ok, properties: { ...ok.properties, a: { type: "string", maxLength: 1 } } },
      /keyword "maxLength"/,
    ],
    [
      "unsupported format",
      { ...ok, properties: { ...ok.properties, a: { type: "string", format: "uri" } } },
      /format "uri"/,
    ],
    ["untyped node", { ...ok, properties: { ...ok.properties, a: { description: "any" } } }, /needs a "type"/],
    ["free-form object", { ...ok, properties: { ...ok.properties, a: { type: "object" } } }, /needs "properties"/],
    ["array without items", { ...ok, properties: { ...ok.properties, b: { type: "array" } } }, /needs "items"/],
    ["default", { ...ok, properties: { ...ok.properties, a: { type: "string", default: "x" } } }, /keyword "default"/],
  ];
  it.each(bad)("rejects: %s", (_label, schema, reason) => {
    expect(isStrictCompatible(schema)).toBe(false);
    expect(strictSchemaProblems(schema).join("\n")).toMatch(reason);
  });

  it("rejects nesting deeper than OpenAI's limit", () => {
    let node: JsonSchema = { type: "string" };
    for (let i = 0; i < 12; i++)
      node = { type: "object", properties: { n: node }, required: ["n"], additionalProperties: false };
    expect(strictSchemaProblems(node).join("\n")).toMatch(/nested deeper than 10 levels/);
  });
});
