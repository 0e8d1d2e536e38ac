/**
 * The data tools' JSON column values (common.ts jsonColumnValue): JSON data when parsing keeps it exact and shallow,
 * its text otherwise — a value nested thousands of levels deep would overflow the recursive code a result passes
 * through, and JSON.parse rounds an integer past 2^53 or turns 1e400 into null.
 */
import { describe, expect, it } from "vitest";
import { jsonColumnValue, VALUE_MAX_JSON_DEPTH } from "../../src/tools/data/common.js";

describe("jsonColumnValue", () => {
  it("parses ordinary JSON", () => {
    expect(jsonColumnValue('{"a": [1, 2.5, -3, 0.1, 1e3, 1.50, 0], "b": "x[{\\"9007199254740993"}')).toEqual({
      a: [1, 2.5, -3, 0.1, 1000, 1.5, 0],
      b: 'x[{"9007199254740993',
    });
    expect(jsonColumnValue("12345678901234")).toBe(12345678901234);
    expect(jsonColumnValue("1000000000000000000000")).toBe(1e21);
    expect(jsonColumnValue('"text"')).toBe("text");
    const shallow = `${"[".repeat(VALUE_MAX_JSON_DEPTH)}1${"]".repeat(VALUE_MAX_JSON_DEPTH)}`;
    expect(JSON.stringify(jsonColumnValue(shallow))).toBe(shallow);
  });

  it("keeps the text of a value nested too deep, or with a number a double does not hold exactly", () => {
    for (const text of [
      `${"[".repeat(VALUE_MAX_JSON_DEPTH + 1)}${"]".repeat(VALUE_MAX_JSON_DEPTH + 1)}`,
      `${'{"a":'.repeat(10_000)}1${"}".repeat(10_000)}`,
      '{"id": 9007199254740993}',
      "[-12345678901234567890]",
      '{"x": 1e400}',
      "[1e-400]",
      "3.14159265358979323846",
      "not json [",
    ]) {
      expect(jsonColumnValue(text)).toBe(text);
    }
  });
});
