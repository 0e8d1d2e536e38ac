/**
 * `tool()`: a typed way to write a tool. The arguments `execute` receives are typed from the input schema, which
 * is either
 *
 * - a JSON Schema written inline (its type is read from the literal: `properties`, `required`, `type`, `enum`,
 *   `const`, `items`, `anyOf`/`oneOf`), or wrapped in {@link jsonSchema}`<Args>(…)` to state the type yourself; or
 * - a schema object of a validation library that implements Standard Schema with Standard JSON Schema (zod ≥ 4.2,
 *   among others): its JSON Schema is what the model sees, and the library validates (and transforms) the
 *   arguments before `execute` runs. Toolhost imports no schema library; it reads the schema's `~standard` member.
 *
 * The result is an ordinary RegisteredTool: `registerTool(tool({...}))`, `new ToolRegistry().register(…)` or
 * `registry.register(…)` add it, and it runs through executeTool like a built-in (argument parsing, settings, time
 * budget, approvals, result cap). Settings metadata is optional (see ToolSettingsDeclaration).
 */
import { ToolArgumentError } from "./errors.js";
import { defineTool, type ToolSettingsDeclaration } from "./settings-declaration.js";
import type { JsonSchema, RegisteredTool, ToolContext } from "./types.js";

/**
 * The part of the Standard Schema (v1) and Standard JSON Schema (v1) interfaces that `tool()` uses: the inferred
 * types, `validate`, and the JSON Schema converter. Written structurally, so no schema library is needed to use the
 * types.
 */
export interface StandardToolSchema<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
    readonly validate: (value: unknown) => StandardValidationResult<Output> | Promise<StandardValidationResult<Output>>;
    readonly jsonSchema: {
      readonly input: (options: { readonly target: string }) => Record<string, unknown>;
    };
  };
}

/** What a Standard Schema's `validate` returns: the (possibly transformed) value, or the issues found. */
export type StandardValidationResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | {
      readonly issues: ReadonlyArray<{
        readonly message: string;
        readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
      }>;
    };

declare const ARGS: unique symbol;

/** A JSON Schema carrying the TypeScript type of the arguments it describes (see {@link jsonSchema}). */
export type TypedJsonSchema<Args> = JsonSchema & { readonly [ARGS]?: Args };

/**
 * A JSON Schema (with `type: "object"` at the top) whose arguments type is the literal it is written as; readonly
 * arrays are accepted, so `tool()` can read the type from an inline literal.
 */
export type ObjectJsonSchemaLiteral = { readonly type: "object"; readonly [keyword: string]: unknown };

/** What `tool()` accepts as `inputSchema`. */
export type ToolInputSchema = StandardToolSchema<any, any> | TypedJsonSchema<any> | ObjectJsonSchemaLiteral;

/**
 * Declares the arguments type of a JSON Schema yourself, for schemas built at run time or too rich for the literal
 * reading of {@link FromJsonSchema}: `tool({ inputSchema: jsonSchema<{ city: string }>(schema), … })`. Returns the
 * schema unchanged.
 */
export function jsonSchema<Args = Record<string, unknown>>(schema: JsonSchema): TypedJsonSchema<Args> {
  return schema as TypedJsonSchema<Args>;
}

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type RequiredKeys<S> = S extends { readonly required: readonly (infer R)[] } ? R & string : never;

type ObjectOf<S> = S extends { readonly properties: infer P }
  ? Simplify<
      { -readonly [K in keyof P & RequiredKeys<S>]: FromJsonSchema<P[K]> } & {
        -readonly [K in Exclude<keyof P, RequiredKeys<S>>]?: FromJsonSchema<P[K]>;
      }
    >
  : Record<string, unknown>;

type FromType<S, T> = T extends "string"
  ? string
  : T extends "integer" | "number"
    ? number
    : T extends "boolean"
      ? boolean
      : T extends "null"
        ? null
        : T extends "array"
          ? S extends { readonly items: infer I }
            ? FromJsonSchema<I>[]
            : unknown[]
          : T extends "object"
            ? ObjectOf<S>
            : unknown;

/**
 * The TypeScript type of the values a JSON Schema literal describes, as far as the literal says: `type` (one or a
 * list), `properties` with `required` (other keys optional: Toolhost passes a model's `null` for an optional key
 * as absent), `items`, `enum`, `const`, `anyOf`/`oneOf`. Other keywords (formats, ranges, patterns, `$ref`) narrow
 * nothing; an object without `properties` is `Record<string, unknown>`.
 */
export type FromJsonSchema<S> = S extends { readonly const: infer C }
  ? C
  : S extends { readonly enum: readonly (infer E)[] }
    ? E
    : S extends { readonly anyOf: readonly (infer U)[] }
      ? FromJsonSchema<U>
      : S extends { readonly oneOf: readonly (infer U)[] }
        ? FromJsonSchema<U>
        : S extends { readonly type: infer T }
          ? T extends readonly (infer Each)[]
            ? FromType<S, Each>
            : FromType<S, T>
          : unknown;

/** The arguments type `execute` receives for an input schema. */
export type InferToolArgs<S> =
  S extends StandardToolSchema<any, infer Output>
    ? Output
    : S extends { readonly [ARGS]?: infer Args }
      ? unknown extends Args
        ? FromJsonSchema<S>
        : Args
      : FromJsonSchema<S>;

/** The options of {@link tool}. */
export interface TypedToolOptions<S extends ToolInputSchema>
  extends Partial<
    Pick<
      RegisteredTool,
      | "outputSchema"
      | "outputCapStyle"
      | "resultPaging"
      | "spillReader"
      | "managesOwnTimeout"
      | "approval"
      | "unavailableReason"
      | "buildDefinition"
    >
  > {
  /** The tool's name: letters, digits, `_` and `-`, starting with a letter, at most 64 characters. */
  name: string;
  /** What it does, what it returns, when to use it: the model reads this. */
  description: string;
  /** The arguments' schema (see the module comment); becomes `definition.parameters`. */
  inputSchema: S;
  /** Settings metadata; optional (title defaults to the name, category "interaction", enabled, no settings). */
  settings?: ToolSettingsDeclaration;
  /**
   * Runs one call. `args` are parsed against the JSON Schema (a model's `null` for an optional key removed,
   * defaults applied) and, for a Standard Schema, validated by it: they are its output. Returns any
   * JSON-serializable value; throw a ToolError subclass (core/errors.ts) for a classified failure.
   */
  execute: (args: InferToolArgs<S>, context: ToolContext) => unknown;
}

const JSON_SCHEMA_TARGET = "draft-2020-12";

function isStandardSchema(schema: unknown): schema is StandardToolSchema {
  const standard = (schema as { "~standard"?: unknown } | null)?.["~standard"];
  return (
    typeof standard === "object" &&
    standard !== null &&
    typeof (standard as { validate?: unknown }).validate === "function"
  );
}

function issuePath(path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined): string {
  return (path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment)).join(".");
}

function issuesError(
  issues: ReadonlyArray<{
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
  }>,
): ToolArgumentError {
  const first = issues[0];
  const argument = issuePath(first?.path) || "(arguments)";
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? "s" : ""})` : "";
  return new ToolArgumentError(`Invalid argument "${argument}": ${first?.message ?? "invalid value"}${more}.`, {
    argument,
    rule: "schema",
  });
}

/** Returns the schema when it describes an object (arguments are always a JSON object); throws Error otherwise. */
function objectSchema(name: string, schema: JsonSchema): JsonSchema {
  if (schema.type !== "object") {
    throw new Error(
      `Tool "${name}": the input schema must describe an object (type "object" at the top, got ${JSON.stringify(schema.type ?? null)}); put the value under a named property.`,
    );
  }
  return schema;
}

/**
 * Builds a RegisteredTool with typed arguments (see the module comment). Does not register it.
 *
 * Throws Error at definition time when a Standard Schema cannot produce a JSON Schema, when the schema is not an
 * object schema (`type: "object"` at the top), or when the settings declaration is inconsistent (see
 * normalizeToolSettings). At call time a Standard Schema's issues become a ToolArgumentError (validation_failed)
 * naming the first offending argument by its path.
 */
export function tool<const S extends ToolInputSchema>(options: TypedToolOptions<S>): RegisteredTool {
  const { name, description, inputSchema, settings, execute, ...hooks } = options;
  const run = execute as (args: unknown, context: ToolContext) => unknown;
  if (!isStandardSchema(inputSchema)) {
    return defineTool({
      ...hooks,
      definition: { name, description, parameters: objectSchema(name, structuredClone(inputSchema) as JsonSchema) },
      ...(settings ? { settings } : {}),
      execute: async (args, context) => run(args, context),
    });
  }
  const standard = inputSchema["~standard"];
  if (typeof standard.jsonSchema?.input !== "function") {
    throw new Error(
      `Tool "${name}": its ${standard.vendor} schema cannot produce a JSON Schema (it implements Standard Schema but not Standard JSON Schema); pass a JSON Schema, or a library version that converts (zod 4.2 or later).`,
    );
  }
  let parameters: JsonSchema;
  try {
    const { $schema: _dialect, ...rest } = standard.jsonSchema.input({ target: JSON_SCHEMA_TARGET });
    parameters = rest as JsonSchema;
  } catch (error) {
    throw new Error(
      `Tool "${name}": its ${standard.vendor} schema cannot be expressed as JSON Schema: ${(error as Error).message}`,
    );
  }
  objectSchema(name, parameters);
  // The approval gate and the call both check arguments; the second check reuses the first one's output.
  const validated = new WeakMap<object, unknown>();
  const validate = async (args: Record<string, unknown>): Promise<unknown> => {
    if (validated.has(args)) return validated.get(args);
    const result = await standard.validate(args);
    if (result.issues) throw issuesError(result.issues);
    return result.value;
  };
  return defineTool({
    ...hooks,
    definition: { name, description, parameters },
    ...(settings ? { settings } : {}),
    validateArguments: (args) => {
      const result = standard.validate(args);
      if (typeof (result as { then?: unknown }).then === "function") {
        (result as Promise<unknown>).catch(() => {}); // an asynchronous schema is checked when the call runs
        return;
      }
      const done = result as StandardValidationResult<unknown>;
      if (done.issues) throw issuesError(done.issues);
      validated.set(args, done.value);
    },
    execute: async (args, context) => run(await validate(args as Record<string, unknown>), context),
  });
}
