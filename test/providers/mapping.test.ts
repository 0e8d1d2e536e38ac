/**
 * Tool mapper (provider wire formats; optional arguments are optional):
 * wire shapes per provider, the three schema cases, name sanitizing, and source schemas never mutated.
 */
import { describe, expect, it } from "vitest";
import { parseToolArguments } from "../../src/core/arg-parsing.js";
import type { JsonSchema, ToolDefinition } from "../../src/core/types.js";
import { ToolNameMap } from "../../src/providers/provider-schemas.js";
import { isStrictCompatible, strictSchemaProblems } from "../../src/providers/strict-schema.js";
import {
  createToolNameMap,
  toolDefsToAnthropic,
  toolDefsToChatCompletions,
  toolDefsToGeminiFunctionDeclarations,
  toolDefsToGeminiInteractions,
  toolDefsToResponsesAPI,
} from "../../src/providers/tool-mapper.js";
import { recordingLogger } from "../helpers/runtime.js";

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** Every node of a JSON value (objects and arrays), depth first. */
function* nodes(value: unknown): Generator<Record<string, unknown>> {
  if (Array.isArray(value)) for (const v of value) yield* nodes(v);
  else if (value && typeof value === "object") {
    yield value as Record<string, unknown>;
    for (const v of Object.values(value)) yield* nodes(v);
  }
}

/** The schema: required path, optional `format: uri` string, optional integer, optional nested object. */
const optionalsSchema: JsonSchema = {
  type: "object",
  properties: {
    path: { type: "string", description: "File path.", minLength: 1, maxLength: 4096 },
    url: { type: "string", format: "uri", minLength: 8, description: "Source URL." },
    limit: { type: "integer", minimum: 1, maximum: 1000, description: "Maximum entries." },
    opts: {
      type: "object",
      description: "Options.",
      properties: {
        recursive: { type: "boolean" },
        mode: { type: "string", enum: ["fast", "full"] },
        tags: { type: "array", items: { type: "string", maxLength: 20 }, minItems: 1, maxItems: 5 },
      },
      required: ["recursive"],
    },
  },
  required: ["path"],
};

const optionalsTool: ToolDefinition = deepFreeze({
  name: "fetch_into",
  description: "Fetches a URL into a file.",
  parameters: optionalsSchema,
});

describe("OpenAI Responses: the optional uri / integer / nested-object schema", () => {
  const snapshot = JSON.stringify(optionalsTool);
  const logger = recordingLogger();
  const [tool] = toolDefsToResponsesAPI([optionalsTool], { logger });
  const params = tool!.parameters as JsonSchema;
  const props = params.properties!;

  it("has the Responses wire shape with strict: true", () => {
    expect(Object.keys(tool!).sort()).toEqual(["description", "name", "parameters", "strict", "type"]);
    expect(tool).toMatchObject({
      type: "function",
      name: "fetch_into",
      description: optionalsTool.description,
      strict: true,
    });
    expect(logger.lines).toEqual([]);
  });

  it("requires every property at every depth and closes every object", () => {
    expect(params.required).toEqual(["path", "url", "limit", "opts"]);
    expect(params.additionalProperties).toBe(false);
    expect(props.opts!.required).toEqual(["recursive", "mode", "tags"]);
    expect(props.opts!.additionalProperties).toBe(false);
  });

  it("makes previously optional keys nullable with a type union, never anyOf", () => {
    expect(props.path!.type).toBe("string");
    expect(props.url!.type).toEqual(["string", "null"]);
    expect(props.limit!.type).toEqual(["integer", "null"]);
    expect(props.opts!.type).toEqual(["object", "null"]);
    expect(props.opts!.properties!.recursive!.type).toBe("boolean");
    expect(props.opts!.properties!.mode).toMatchObject({ type: ["string", "null"], enum: ["fast", "full", null] });
    for (const node of nodes(params)) {
      expect(node).not.toHaveProperty("anyOf");
      expect(node).not.toHaveProperty("oneOf");
    }
  });

  it("drops minLength/maxLength and the uri format, keeps numeric bounds, enum and item counts", () => {
    for (const node of nodes(params)) {
      expect(node).not.toHaveProperty("minLength");
      expect(node).not.toHaveProperty("maxLength");
      expect(node).not.toHaveProperty("format");
    }
    expect(props.limit).toMatchObject({ minimum: 1, maximum: 1000 });
    expect(props.opts!.properties!.tags).toMatchObject({ minItems: 1, maxItems: 5 });
    expect(props.path!.description).toBe("File path.");
  });

  it("passes isStrictCompatible", () => {
    expect(strictSchemaProblems(params)).toEqual([]);
    expect(isStrictCompatible(params)).toBe(true);
  });

  it("leaves the (deep-frozen) source untouched", () => {
    expect(JSON.stringify(optionalsTool)).toBe(snapshot);
    expect(optionalsSchema.required).toEqual(["path"]);
    expect(optionalsSchema.properties!.url!.format).toBe("uri");
  });

  it("the nulls a strict model sends reach the tool as absent keys", () => {
    const args = parseToolArguments(optionalsSchema, '{"path":"a","url":null,"limit":null,"opts":null}');
    expect(args).toEqual({ path: "a" });
    const nested = parseToolArguments(
      optionalsSchema,
      '{"path":"a","url":null,"limit":3,"opts":{"recursive":true,"mode":null,"tags":null}}',
    );
    expect(nested).toEqual({ path: "a", limit: 3, opts: { recursive: true } });
  });

  it("the executor still enforces the bounds strict mode dropped", () => {
    expect(() => parseToolArguments(optionalsSchema, '{"path":""}')).toThrowError(/path/);
    expect(() => parseToolArguments(optionalsSchema, '{"path":"a","url":"not a url"}')).toThrowError(/url/);
  });
});

describe("OpenAI Responses: schemas strict mode cannot express are sent non-strict with a warning", () => {
  const cases: [string, JsonSchema][] = [
    [
      "top-level anyOf",
      {
        type: "object",
        anyOf: [{ required: ["a"] }, { required: ["b"] }],
        properties: { a: { type: "string" }, b: { type: "string" } },
      },
    ],
    ["nested oneOf", { type: "object", properties: { v: { oneOf: [{ type: "string" }, { type: "integer" }] } } }],
    ["free-form object", { type: "object", properties: { headers: { type: "object" } } }],
    [
      "open additionalProperties",
      { type: "object", properties: { a: { type: "string" } }, additionalProperties: true },
    ],
    [
      "recursive $ref",
      {
        type: "object",
        properties: { tree: { $ref: "#/$defs/node" } },
        $defs: { node: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/node" } } } } },
      },
    ],
  ];
  it.each(cases)("%s", (_label, schema) => {
    deepFreeze(schema);
    const snapshot = JSON.stringify(schema);
    const logger = recordingLogger();
    const [tool] = toolDefsToResponsesAPI([{ name: "t", description: "d", parameters: schema }], { logger });
    expect(tool!.strict).toBe(false);
    expect(tool!.parameters).toEqual(schema);
    expect(tool!.parameters).not.toBe(schema);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]!.level).toBe("warn");
    expect(logger.lines[0]!.obj).toMatchObject({ tool: "t" });
    expect(logger.lines[0]!.msg).toMatch(/Tool "t" is sent to OpenAI Responses without strict mode/);
    expect(JSON.stringify(schema)).toBe(snapshot);
  });

  it("warns once per schema and logger when the loop maps the same tools every turn", () => {
    const logger = recordingLogger();
    const def: ToolDefinition = {
      name: "t",
      description: "d",
      parameters: { type: "object", properties: { h: { type: "object" } } },
    };
    toolDefsToResponsesAPI([def], { logger });
    toolDefsToResponsesAPI([def], { logger });
    expect(logger.lines).toHaveLength(1);
    const other = recordingLogger();
    toolDefsToResponsesAPI([def], { logger: other });
    expect(other.lines).toHaveLength(1);
  });

  it("works without a logger", () => {
    const [tool] = toolDefsToResponsesAPI([{ name: "t", description: "d", parameters: cases[0]![1] }]);
    expect(tool!.strict).toBe(false);
  });
});

describe("Chat Completions", () => {
  it("sends the plain schema without a strict field by default (OpenAI-compatible servers)", () => {
    const [tool] = toolDefsToChatCompletions([optionalsTool]);
    expect(tool).toEqual({
      type: "function",
      function: { name: "fetch_into", description: optionalsTool.description, parameters: optionalsSchema },
    });
    expect(tool!.function.parameters).not.toBe(optionalsSchema);
    expect(tool!.function).not.toHaveProperty("strict");
  });

  it("derives the strict dialect when asked (api.openai.com)", () => {
    const [tool] = toolDefsToChatCompletions([optionalsTool], { strict: true });
    const [responses] = toolDefsToResponsesAPI([optionalsTool]);
    expect(tool!.function.strict).toBe(true);
    expect(tool!.function.parameters).toEqual(responses!.parameters);
  });

  it("falls back to non-strict with a warning when asked for strict on an incompatible schema", () => {
    const logger = recordingLogger();
    const schema: JsonSchema = {
      type: "object",
      properties: { v: { anyOf: [{ type: "string" }, { type: "integer" }] } },
    };
    const [tool] = toolDefsToChatCompletions([{ name: "t", description: "d", parameters: schema }], {
      strict: true,
      logger,
    });
    expect(tool!.function).toMatchObject({ strict: false, parameters: schema });
    expect(logger.lines.map((l) => l.level)).toEqual(["warn"]);
  });
});

/** The Gemini schema: `$schema`, a type array, a `const` and an integer enum (plus other rejected keywords). */
const geminiSchema: JsonSchema = deepFreeze({
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    name: { type: ["string", "null"], description: "Display name.", minLength: 1 },
    kind: { const: "file", description: "Always file." },
    level: { type: "integer", enum: [1, 2, 3], description: "Compression level." },
    count: { type: "integer", exclusiveMinimum: 0, exclusiveMaximum: 10 },
    ratio: { type: "number", exclusiveMinimum: 0 },
    tags: { type: "object", additionalProperties: { type: "string" }, propertyNames: { pattern: "^[a-z]+$" } },
    when: { type: "string", format: "date-time" },
    site: { type: "string", format: "uri" },
    items: { type: "array", items: { type: "string", enum: ["a", "b", null] }, maxItems: 3 },
  },
  required: ["kind", "level"],
  additionalProperties: false,
});

/** Keywords of the Gemini OpenAPI-subset `Schema` (@google/genai `Schema`). */
const GEMINI_SCHEMA_KEYS = new Set([
  "anyOf",
  "default",
  "description",
  "enum",
  "example",
  "format",
  "items",
  "maxItems",
  "maxLength",
  "maxProperties",
  "maximum",
  "minItems",
  "minLength",
  "minProperties",
  "minimum",
  "nullable",
  "pattern",
  "properties",
  "propertyOrdering",
  "required",
  "title",
  "type",
]);

function* schemaNodes(schema: unknown): Generator<Record<string, unknown>> {
  if (!schema || typeof schema !== "object") return;
  const node = schema as Record<string, unknown>;
  yield node;
  for (const child of Object.values((node.properties as Record<string, unknown>) ?? {})) yield* schemaNodes(child);
  if (node.items) yield* schemaNodes(node.items);
  for (const child of (node.anyOf as unknown[]) ?? []) yield* schemaNodes(child);
}

describe("Gemini generateContent, older OpenAPI-subset `parameters`", () => {
  const snapshot = JSON.stringify(geminiSchema);
  const [decl] = toolDefsToGeminiFunctionDeclarations(
    [{ name: "pack", description: "Packs.", parameters: geminiSchema }],
    {
      dialect: "openapi",
    },
  );
  const params = decl!.parameters as Record<string, any>;

  it("uses `parameters`, not `parametersJsonSchema`", () => {
    expect(Object.keys(decl!).sort()).toEqual(["description", "name", "parameters"]);
    expect(params.type).toBe("OBJECT");
    expect(params.required).toEqual(["kind", "level"]);
  });

  it("keeps only keywords of the subset, at every depth", () => {
    for (const node of schemaNodes(params)) {
      for (const key of Object.keys(node)) expect(GEMINI_SCHEMA_KEYS, `keyword ${key}`).toContain(key);
      expect(typeof node.type === "string" || node.type === undefined).toBe(true);
    }
    expect(JSON.stringify(params)).not.toMatch(/\$schema|additionalProperties|propertyNames|exclusiveM|"const"/);
  });

  it("rewrites a type array to a single type with nullable: true", () => {
    expect(params.properties.name).toEqual({
      type: "STRING",
      nullable: true,
      description: "Display name.",
      minLength: "1",
    });
  });

  it("turns a string const into an enum of one string", () => {
    expect(params.properties.kind).toEqual({ type: "STRING", enum: ["file"], description: "Always file." });
  });

  it("drops an integer enum and lists its values in the description, keeping the integer type", () => {
    expect(params.properties.level).toEqual({
      type: "INTEGER",
      description: "Compression level. Allowed values: 1, 2, 3.",
    });
  });

  it("rewrites exclusive bounds (integer → inclusive bound, number → description)", () => {
    expect(params.properties.count).toEqual({ type: "INTEGER", minimum: 1, maximum: 9 });
    expect(params.properties.ratio).toEqual({ type: "NUMBER", description: "Must be greater than 0." });
  });

  it("keeps date-time, drops uri, drops a free-form object's additionalProperties and null enum entries", () => {
    expect(params.properties.when).toEqual({ type: "STRING", format: "date-time" });
    expect(params.properties.site).toEqual({ type: "STRING" });
    expect(params.properties.tags).toEqual({ type: "OBJECT" });
    expect(params.properties.items).toEqual({
      type: "ARRAY",
      maxItems: "3",
      items: { type: "STRING", enum: ["a", "b"], nullable: true },
    });
  });

  it("leaves the source untouched", () => {
    expect(JSON.stringify(geminiSchema)).toBe(snapshot);
  });

  it("omits parameters for a tool without any, and rejects a recursive $ref with a typed error naming the tool", () => {
    const [none] = toolDefsToGeminiFunctionDeclarations(
      [{ name: "now", description: "d", parameters: { type: "object" } }],
      {
        dialect: "openapi",
      },
    );
    expect(none).toEqual({ name: "now", description: "d" });
    const recursive: JsonSchema = { type: "object", properties: { self: { $ref: "#" } } };
    expect(() =>
      toolDefsToGeminiFunctionDeclarations([{ name: "rec", description: "d", parameters: recursive }], {
        dialect: "openapi",
      }),
    ).toThrowError(
      expect.objectContaining({ name: "SchemaMappingError", message: expect.stringMatching(/Tool "rec".*recursive/) }),
    );
  });

  it("flattens a top-level anyOf into one OBJECT instead of losing the parameters", () => {
    const schema: JsonSchema = {
      anyOf: [
        { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
        {
          type: "object",
          properties: { tag: { type: ["string", "null"] }, level: { type: "integer", enum: [1, 2] } },
          required: ["tag"],
        },
      ],
    };
    const [d] = toolDefsToGeminiFunctionDeclarations([{ name: "search", description: "d", parameters: schema }], {
      dialect: "openapi",
    });
    expect(d!.parameters).toEqual({
      type: "OBJECT",
      description: "Accepts one or more of: (1) requires query; (2) requires tag; may set level.",
      properties: {
        query: { type: "STRING" },
        tag: { type: "STRING", nullable: true },
        level: { type: "INTEGER", description: "Allowed values: 1, 2." },
      },
    });
  });

  it("inlines local $refs, merges allOf and reads oneOf as anyOf", () => {
    const schema: JsonSchema = {
      type: "object",
      $defs: { pos: { type: "integer", minimum: 0 } },
      properties: {
        start: { $ref: "#/$defs/pos" },
        both: {
          allOf: [
            { type: "object", properties: { a: { type: "string" } } },
            { properties: { b: { type: "string" } }, required: ["b"] },
          ],
        },
        either: { oneOf: [{ type: "string" }, { type: "integer" }, { type: "null" }] },
      },
    };
    const [d] = toolDefsToGeminiFunctionDeclarations([{ name: "t", description: "d", parameters: schema }], {
      dialect: "openapi",
    });
    const p = d!.parameters as Record<string, any>;
    expect(p.properties.start).toEqual({ type: "INTEGER", minimum: 0 });
    expect(p.properties.both).toEqual({
      type: "OBJECT",
      properties: { a: { type: "STRING" }, b: { type: "STRING" } },
      required: ["b"],
    });
    expect(p.properties.either).toEqual({ nullable: true, anyOf: [{ type: "STRING" }, { type: "INTEGER" }] });
    expect(JSON.stringify(p)).not.toMatch(/\$ref|\$defs/);
  });
});

describe("Gemini generateContent, `parametersJsonSchema` (preferred, the default)", () => {
  it("sends the raw JSON Schema minus $schema", () => {
    const [decl] = toolDefsToGeminiFunctionDeclarations([
      { name: "pack", description: "Packs.", parameters: geminiSchema },
    ]);
    expect(Object.keys(decl!).sort()).toEqual(["description", "name", "parametersJsonSchema"]);
    const { $schema: _dropped, ...rest } = geminiSchema;
    expect(decl!.parametersJsonSchema).toEqual(rest);
  });

  it("keeps a property named $id or $schema while removing the keywords", () => {
    const schema: JsonSchema = { $id: "urn:x", type: "object", properties: { $id: { type: "string", $comment: "c" } } };
    const [d] = toolDefsToGeminiFunctionDeclarations([{ name: "t", description: "d", parameters: schema }]);
    expect(d!.parametersJsonSchema).toEqual({ type: "object", properties: { $id: { type: "string" } } });
  });

  it("inlines local $refs and keeps a recursive one with its $defs", () => {
    const flat: JsonSchema = {
      type: "object",
      properties: { a: { $ref: "#/definitions/s" } },
      definitions: { s: { type: "string" } },
    };
    const [d1] = toolDefsToGeminiFunctionDeclarations([{ name: "t", description: "d", parameters: flat }]);
    expect(d1!.parametersJsonSchema).toEqual({ type: "object", properties: { a: { type: "string" } } });
    const recursive: JsonSchema = {
      type: "object",
      properties: { tree: { $ref: "#/$defs/node" } },
      $defs: { node: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/node" } } } } },
    };
    const [d2] = toolDefsToGeminiFunctionDeclarations([{ name: "t", description: "d", parameters: recursive }]);
    expect(d2!.parametersJsonSchema).toEqual(recursive);
  });
});

describe("Gemini Interactions", () => {
  it("maps to { type: 'function', name, description, parameters } with JSON Schema parameters", () => {
    const tools = toolDefsToGeminiInteractions([
      optionalsTool,
      { name: "pack", description: "Packs.", parameters: geminiSchema },
    ]);
    expect(tools[0]).toEqual({
      type: "function",
      name: "fetch_into",
      description: optionalsTool.description,
      parameters: optionalsSchema,
    });
    expect(tools[0]!.parameters).not.toBe(optionalsSchema);
    expect(tools[1]!.parameters).not.toHaveProperty("$schema");
    expect(tools[1]!.parameters.properties.level).toEqual(geminiSchema.properties!.level);
  });
});

describe("Anthropic", () => {
  it("maps to { name, description, input_schema } keeping the plain schema (length bounds included)", () => {
    const [tool] = toolDefsToAnthropic([optionalsTool]);
    expect(tool).toEqual({ name: "fetch_into", description: optionalsTool.description, input_schema: optionalsSchema });
    expect(tool!.input_schema).not.toBe(optionalsSchema);
  });

  it("flattens a top-level anyOf into one object schema with type object and a description", () => {
    const schema: JsonSchema = deepFreeze<JsonSchema>({
      description: "Read by path or by URL.",
      anyOf: [
        {
          type: "object",
          properties: { path: { type: "string" }, encoding: { type: "string" } },
          required: ["path", "encoding"],
        },
        {
          type: "object",
          properties: { url: { type: "string", format: "uri" }, encoding: { type: "string" } },
          required: ["url", "encoding"],
        },
      ],
    });
    const snapshot = JSON.stringify(schema);
    const [tool] = toolDefsToAnthropic([{ name: "read", description: "Reads.", parameters: schema }]);
    const input = tool!.input_schema as JsonSchema;
    expect(input.type).toBe("object");
    expect(input).not.toHaveProperty("anyOf");
    expect(input).not.toHaveProperty("oneOf");
    expect(input).not.toHaveProperty("allOf");
    expect(input.properties).toEqual({
      path: { type: "string" },
      encoding: { type: "string" },
      url: { type: "string", format: "uri" },
    });
    expect(input.required).toEqual(["encoding"]);
    expect(input.description).toBe(
      "Read by path or by URL. Accepts one or more of: (1) requires path, encoding; (2) requires url, encoding.",
    );
    expect(JSON.stringify(schema)).toBe(snapshot);
  });

  it("merges a top-level allOf and flattens oneOf with $ref branches", () => {
    const schema: JsonSchema = {
      type: "object",
      $defs: { byId: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] } },
      allOf: [{ properties: { verbose: { type: "boolean" } } }],
      oneOf: [
        { $ref: "#/$defs/byId" },
        { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
      ],
    };
    const [tool] = toolDefsToAnthropic([{ name: "get", description: "d", parameters: schema }]);
    const input = tool!.input_schema as JsonSchema;
    expect(input.properties).toEqual({
      verbose: { type: "boolean" },
      id: { type: "integer" },
      name: { type: "string" },
    });
    expect(input).not.toHaveProperty("allOf");
    expect(input).not.toHaveProperty("oneOf");
    expect(input.required).toBeUndefined();
    expect(input.description).toBe("Accepts exactly one of: (1) requires id; (2) requires name.");
  });

  it("adds type object when the top level has none", () => {
    const [tool] = toolDefsToAnthropic([
      { name: "t", description: "d", parameters: { properties: { a: { type: "string" } } } },
    ]);
    expect(tool!.input_schema.type).toBe("object");
  });
});

describe("tool names", () => {
  const defs: ToolDefinition[] = [
    { name: "list_directory", description: "d", parameters: { type: "object" } },
    { name: "mcp.server/read file", description: "d", parameters: { type: "object" } },
    { name: "mcp_server_read_file", description: "d", parameters: { type: "object" } },
    { name: "9lives", description: "d", parameters: { type: "object" } },
    { name: `x${"y".repeat(80)}`, description: "d", parameters: { type: "object" } },
    { name: "ns:tool.v2", description: "d", parameters: { type: "object" } },
  ];
  const openaiRule = /^[a-zA-Z0-9_-]{1,64}$/;
  const geminiRule = /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/;

  it.each([
    ["openai", toolDefsToResponsesAPI(defs).map((t) => t.name), openaiRule],
    ["openai-chat", toolDefsToChatCompletions(defs).map((t) => t.function.name), openaiRule],
    ["anthropic", toolDefsToAnthropic(defs).map((t) => t.name), openaiRule],
    ["gemini", toolDefsToGeminiInteractions(defs).map((t) => t.name!), geminiRule],
    ["gemini", toolDefsToGeminiFunctionDeclarations(defs).map((t) => t.name!), geminiRule],
  ] as const)("%s: every name matches the provider rule, distinct, and maps back", (provider, names, rule) => {
    for (const name of names) expect(name).toMatch(rule);
    expect(new Set(names).size).toBe(names.length);
    const map = createToolNameMap(defs, provider);
    expect(names.map((n) => map.fromWire(n))).toEqual(defs.map((d) => d.name));
    expect(map.fromWire("no_such_tool")).toBeUndefined();
  });

  it("keeps valid names, gives a colliding sanitized name a suffix, and keeps a real tool's own name", () => {
    const map = createToolNameMap(defs, "openai");
    expect(map.toWire("list_directory")).toBe("list_directory");
    expect(map.toWire("mcp_server_read_file")).toBe("mcp_server_read_file");
    expect(map.toWire("mcp.server/read file")).toBe("mcp_server_read_file_2");
    expect(map.toWire("9lives")).toBe("9lives");
    expect(map.toWire(defs[4]!.name)).toHaveLength(64);
    expect(map.renamed).toBe(true);
    const gemini = createToolNameMap(defs, "gemini");
    expect(gemini.toWire("9lives")).toBe("_9lives");
    expect(gemini.toWire("ns:tool.v2")).toBe("ns:tool.v2");
    expect(gemini.toWire("mcp.server/read file")).toBe("mcp.server_read_file");
  });

  it("uses the name map passed in, and refuses one built for another provider", () => {
    const map = ToolNameMap.build(["a.b"], "anthropic");
    expect(
      toolDefsToAnthropic([{ name: "a.b", description: "d", parameters: { type: "object" } }], { nameMap: map })[0]!
        .name,
    ).toBe("a_b");
    expect(() =>
      toolDefsToGeminiInteractions([{ name: "a.b", description: "d", parameters: { type: "object" } }], {
        nameMap: map,
      }),
    ).toThrowError(/built for anthropic, not gemini/);
    expect(ToolNameMap.build(["a"], "openai").renamed).toBe(false);
  });
});
