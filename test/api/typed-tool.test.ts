/**
 * The typed `tool()` helper: arguments typed from a JSON Schema literal, from `jsonSchema<T>()`, or from a zod
 * schema (Standard Schema with Standard JSON Schema), run through a real runtime so argument parsing, settings
 * and errors apply as in production. The expectTypeOf lines are checked by `npm run typecheck`.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import * as z from "zod";
import { registerTool, ToolRegistryStore } from "../../src/core/registry.js";
import { ToolRuntime } from "../../src/core/runtime.js";
import { type InferToolArgs, jsonSchema, type StandardToolSchema, tool } from "../../src/core/typed-tool.js";
import type { ToolContext } from "../../src/core/types.js";

function runtimeWith(...tools: Parameters<ToolRegistryStore["register"]>[0][]) {
  const registry = new ToolRegistryStore();
  for (const t of tools) registry.register(t);
  return new ToolRuntime({ registry });
}

describe("tool() with a JSON Schema literal", () => {
  const echo = tool({
    name: "echo",
    description: "Echoes its arguments.",
    inputSchema: {
      type: "object",
      properties: {
        text: { type: "string" },
        times: { type: "integer", minimum: 1, default: 1 },
        mode: { enum: ["plain", "loud"] },
        tags: { type: "array", items: { type: "string" } },
        note: { type: ["string", "null"] },
        nested: { type: "object", properties: { on: { type: "boolean" } }, required: ["on"] },
      },
      required: ["text"],
    },
    execute: (args, context) => {
      expectTypeOf(args).toEqualTypeOf<{
        text: string;
        times?: number;
        mode?: "plain" | "loud";
        tags?: string[];
        note?: string | null;
        nested?: { on: boolean };
      }>();
      expectTypeOf(context).toEqualTypeOf<ToolContext>();
      return { said: args.text.repeat(args.times ?? 1), mode: args.mode ?? "plain", user: context.userId };
    },
  });

  it("needs no settings object: metadata defaults, registers, and runs with parsing and defaults applied", async () => {
    expect(echo.settings).toMatchObject({
      title: "echo",
      description: "Echoes its arguments.",
      category: "interaction",
      enabledByDefault: true,
      canDisable: true,
    });
    const runtime = runtimeWith(echo);
    expect(await runtime.executeTool("echo", '{"text":"ab","times":2,"mode":null}', { userId: "u1" })).toMatchObject({
      ok: true,
      result: { said: "abab", mode: "plain", user: "u1" },
    });
    expect(await runtime.executeTool("echo", '{"text":"ab","times":0}', { userId: "u1" })).toMatchObject({
      ok: false,
      error: { code: "validation_failed", details: { argument: "times" } },
    });
  });

  it("jsonSchema<T>() states the type of a schema built at run time", async () => {
    const schema = { type: "object", properties: { id: { type: "string" } }, required: ["id"] };
    const lookup = tool({
      name: "lookup",
      description: "Looks an id up.",
      inputSchema: jsonSchema<{ id: string }>(schema),
      settings: { title: "Lookup", category: "system" },
      execute: ({ id }) => {
        expectTypeOf(id).toEqualTypeOf<string>();
        return { id };
      },
    });
    expect(lookup.settings.title).toBe("Lookup");
    expect(lookup.definition.parameters).toEqual(schema);
    expect(lookup.definition.parameters).not.toBe(schema);
    expect(await runtimeWith(lookup).executeTool("lookup", { id: "x" }, { userId: "u" })).toMatchObject({
      ok: true,
      result: { id: "x" },
    });
  });

  it("type-level: inference from literals", () => {
    expectTypeOf<InferToolArgs<{ type: "object"; properties: { a: { const: 3 } }; required: ["a"] }>>().toEqualTypeOf<{
      a: 3;
    }>();
    expectTypeOf<InferToolArgs<{ type: "object" }>>().toEqualTypeOf<Record<string, unknown>>();
    expectTypeOf<
      InferToolArgs<{ type: "object"; properties: { x: { anyOf: [{ type: "string" }, { type: "number" }] } } }>
    >().toEqualTypeOf<{ x?: string | number }>();
    expectTypeOf<InferToolArgs<StandardToolSchema<{ a: string }, { a: number }>>>().toEqualTypeOf<{ a: number }>();
  });
});

describe("tool() with a zod schema", () => {
  const book = tool({
    name: "book_room",
    description: "Books a meeting room.",
    inputSchema: z
      .object({
        room: z.string().min(1).describe("Room name"),
        hours: z.number().int().min(1).max(8).default(1),
        from: z.string().transform((s) => s.toUpperCase()),
        until: z.string(),
      })
      .refine((v) => v.from.toLowerCase() < v.until, { message: "until must come after from", path: ["until"] }),
    execute: (args) => {
      expectTypeOf(args).toEqualTypeOf<{ room: string; hours: number; from: string; until: string }>();
      return args;
    },
  });

  it("the model sees the schema's JSON Schema (no $schema), with descriptions and bounds", () => {
    const parameters = book.definition.parameters;
    expect(parameters.$schema).toBeUndefined();
    expect(parameters).toMatchObject({
      type: "object",
      properties: {
        room: { type: "string", minLength: 1, description: "Room name" },
        hours: { type: "integer", minimum: 1, maximum: 8, default: 1 },
      },
    });
    expect(parameters.required).toEqual(["room", "from", "until"]);
  });

  it("zod validates and transforms before execute; its refinements are validation_failed with the path", async () => {
    const runtime = runtimeWith(book);
    expect(
      await runtime.executeTool("book_room", '{"room":"Ada","from":"09:00","until":"10:00"}', { userId: "u" }),
    ).toMatchObject({ ok: true, result: { room: "Ada", hours: 1, from: "09:00", until: "10:00" } });
    expect(
      await runtime.executeTool("book_room", '{"room":"Ada","from":"b","until":"a"}', { userId: "u" }),
    ).toMatchObject({
      ok: false,
      error: {
        code: "validation_failed",
        message: 'Invalid argument "until": until must come after from.',
        details: { argument: "until", rule: "schema" },
      },
    });
    const outcome = await runtime.executeTool("book_room", '{"room":"Ada","from":"x","until":"y"}', { userId: "u" });
    expect(outcome).toMatchObject({ ok: true, result: { from: "X" } });
  });

  it("the approval gate's inspection refuses what zod refuses, before any ask", async () => {
    const runtime = runtimeWith(book);
    const inspected = await runtime.inspectCall("book_room", '{"room":"Ada","from":"b","until":"a"}', { userId: "u" });
    expect(inspected).toMatchObject({ ok: false, error: { code: "validation_failed" } });
  });

  it("an asynchronous refinement is checked when the call runs", async () => {
    const taken = new Set(["Ada"]);
    const reserve = tool({
      name: "reserve",
      description: "Reserves a name.",
      inputSchema: z.object({ name: z.string() }).refine(async (v) => !taken.has(v.name), { message: "taken" }),
      execute: ({ name }) => ({ name }),
    });
    const runtime = runtimeWith(reserve);
    expect(await runtime.executeTool("reserve", { name: "Bob" }, { userId: "u" })).toMatchObject({ ok: true });
    expect(await runtime.executeTool("reserve", { name: "Ada" }, { userId: "u" })).toMatchObject({
      ok: false,
      error: { code: "validation_failed", message: 'Invalid argument "(arguments)": taken.' },
    });
  });

  it("refuses at definition time a schema that cannot produce JSON Schema, or one that is not an object", () => {
    const validateOnly = {
      "~standard": { version: 1, vendor: "acme", validate: (value: unknown) => ({ value }) },
    } as unknown as StandardToolSchema<{ a: string }>;
    expect(() => tool({ name: "t", description: "d", inputSchema: validateOnly, execute: () => 1 })).toThrow(
      /acme schema cannot produce a JSON Schema/,
    );
    expect(() =>
      tool({ name: "t2", description: "d", inputSchema: z.object({ when: z.date() }), execute: () => 1 }),
    ).toThrow(/cannot be expressed as JSON Schema/);
    expect(() => tool({ name: "t3", description: "d", inputSchema: z.string(), execute: () => 1 })).toThrow(
      /input schema must describe an object \(type "object" at the top, got "string"\)/,
    );
  });

  it("registerTool accepts it like any RegisteredTool (a duplicate name is refused)", () => {
    const name = `typed_${Date.now()}`;
    const t = tool({ name, description: "d", inputSchema: z.object({}), execute: () => "ok" });
    expect(registerTool(t).definition.name).toBe(name);
    expect(() => registerTool(t)).toThrow(/already registered/);
  });
});
