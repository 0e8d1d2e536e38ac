/** Every filesystem tool's schema is plain JSON Schema that the strict-mode derivation accepts. */
import { describe, expect, it } from "vitest";
import { getTool } from "../../src/core/registry.js";
import { isStrictCompatible, toStrictSchema } from "../../src/providers/strict-schema.js";
import { registerBuiltinTools } from "../../src/tools/index.js";
import { FILE_TOOLS } from "./fuzz/tree.js";

registerBuiltinTools();

describe("filesystem tool schemas", () => {
  it.each(FILE_TOOLS)("%s: type object, simple property types, no oneOf/anyOf/$ref, strict-derivable", (name) => {
    const tool = getTool(name);
    expect(tool).toBeDefined();
    const schema = tool!.definition.parameters;
    expect(schema.type).toBe("object");
    expect(JSON.stringify(schema)).not.toMatch(/"(oneOf|anyOf|allOf|\$ref|not)"/);
    for (const prop of Object.values(schema.properties ?? {})) {
      expect(["string", "integer", "number", "boolean"]).toContain(prop.type);
    }
    expect(isStrictCompatible(toStrictSchema(schema))).toBe(true);
  });
  it("the function-id file tools are off by default; the other built-ins are on", () => {
    for (const n of ["file_read", "file_write", "file_list"]) expect(getTool(n)!.settings.enabledByDefault).toBe(false);
    for (const n of FILE_TOOLS.slice(0, 6)) expect(getTool(n)!.settings.enabledByDefault).toBe(true);
  });
});
