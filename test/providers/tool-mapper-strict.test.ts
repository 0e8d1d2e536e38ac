/**
 * The tool-mapper strict test: every built-in tool must pass the strict transform, checked per tool id. For EVERY
 * registered built-in, by tool name: toolDefsToResponsesAPI sends it with strict: true, and its derived schema passes
 * isStrictCompatible — for the static definition and for buildDefinition under the tool's default settings. A new
 * built-in whose schema strict mode cannot express fails here: fix its schema, do not exempt it.
 */

import { describe, expect, it } from "vitest";
import { listTools } from "../../src/core/registry.js";
import { getDefaultToolSettings } from "../../src/core/settings-policy.js";
import type { ToolDefinition } from "../../src/core/types.js";
import { isStrictCompatible, strictSchemaProblems, toStrictSchema } from "../../src/providers/strict-schema.js";
import { toolDefsToResponsesAPI } from "../../src/providers/tool-mapper.js";
import { registerBuiltinTools } from "../../src/tools/index.js";
import { recordingLogger } from "../helpers/runtime.js";

registerBuiltinTools();

const tools = listTools();
const names = tools.map((t) => t.definition.name);

function assertStrict(definition: ToolDefinition): void {
  const derived = toStrictSchema(definition.parameters);
  expect(strictSchemaProblems(derived), `strict-mode problems of ${definition.name}`).toEqual([]);
  expect(isStrictCompatible(derived)).toBe(true);
  const logger = recordingLogger();
  const [wire] = toolDefsToResponsesAPI([definition], { logger });
  expect(wire).toMatchObject({ type: "function", name: definition.name, strict: true });
  expect(wire!.parameters).toEqual(derived);
  expect(logger.lines).toEqual([]);
}

describe("every registered built-in is strict in the OpenAI Responses mapping", () => {
  it("the registry holds the built-ins", () => {
    expect(names).toContain("list_directory");
    expect(names).toContain("get_current_datetime");
  });

  it.each(names)("%s: static definition", (name) => {
    const tool = tools.find((t) => t.definition.name === name)!;
    assertStrict(tool.definition);
  });

  it.each(names)("%s: buildDefinition with default settings", (name) => {
    const tool = tools.find((t) => t.definition.name === name)!;
    const definition = tool.buildDefinition ? tool.buildDefinition(getDefaultToolSettings(tool)) : tool.definition;
    expect(definition.name).toBe(name);
    assertStrict(definition);
  });

  it("maps all built-ins at once with strict: true each", () => {
    const wire = toolDefsToResponsesAPI(tools.map((t) => t.definition));
    expect(Object.fromEntries(wire.map((w) => [w.name, w.strict]))).toEqual(
      Object.fromEntries(names.map((n) => [n, true])),
    );
  });
});
