/**
 * An own key named "__proto__", "constructor" or "prototype" is data like any other key: an argument object holding
 * one is refused as an unknown argument (schemas closed with additionalProperties false), whether it arrives as JSON
 * text or decoded (JSON.parse keeps "__proto__" an own key), and no copy of arguments, schemas or settings turns
 * such a key into an object's prototype.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stripNulls } from "../../src/core/arg-parsing.js";
import { cloneJson } from "../../src/core/json-schema.js";
import { cloneSettingValue } from "../../src/core/settings-policy.js";
import { jsonSafe } from "../../src/tools/data/common.js";
import { fsRuntime, tempDir } from "../fs/helpers.js";

const { dir, cleanup } = tempDir("toolhost-proto-keys-");
afterAll(cleanup);
writeFileSync(join(dir, "a.txt"), "hello\n");
const { call } = fsRuntime(dir);

describe("prototype-named argument keys through executeTool", () => {
  it.each(["__proto__", "constructor", "prototype"])(
    "read_file refuses an own %s key, as JSON text and as a decoded object, like any unknown key",
    async (key) => {
      const text = `{"path":"a.txt",${JSON.stringify(key)}:{"x":1}}`;
      const decoded = JSON.parse(text) as Record<string, unknown>;
      expect(Object.hasOwn(decoded, key)).toBe(true);
      for (const raw of [text, decoded]) {
        expect(await call("read_file", raw)).toMatchObject({
          ok: false,
          error: {
            code: "validation_failed",
            message: expect.stringContaining(`Unknown argument "${key}"`),
            details: { argument: key, rule: "unknown argument" },
          },
        });
      }
      // Nothing leaked into Object.prototype, and the call without the key runs.
      expect(({} as Record<string, unknown>).x).toBeUndefined();
      expect(await call("read_file", { path: "a.txt" })).toMatchObject({ ok: true });
    },
  );
});

describe("copies keep a __proto__ key an own property", () => {
  const withKey = () => JSON.parse('{"a":1,"__proto__":{"polluted":true},"nested":{"__proto__":{"b":2}}}');
  const check = (copy: unknown) => {
    const value = copy as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(["a", "__proto__", "nested"]);
    expect(value.polluted).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")?.value).toEqual({ polluted: true });
    const nested = value.nested as Record<string, unknown>;
    expect(Object.getPrototypeOf(nested)).toBe(Object.prototype);
    expect(Object.keys(nested)).toEqual(["__proto__"]);
  };
  it("argument parsing (stripNulls), schemas (cloneJson), settings values (cloneSettingValue), SQL rows (jsonSafe)", () => {
    check(stripNulls(undefined, withKey()));
    check(cloneJson(withKey()));
    check(cloneSettingValue(withKey()));
    check(jsonSafe(withKey()));
  });
});
