/** If-Match parsing: strong ETags as issued, weak ones never match (412, not 400), malformed ones are 400. */
import { describe, expect, it } from "vitest";
import { HttpError } from "../../src/server/http.js";
import { parseIfMatch } from "../../src/server/routes/settings.js";

describe("parseIfMatch", () => {
  it.each([
    [undefined, undefined],
    ["*", undefined],
    ['"3"', 3],
    [' "3" ', 3],
    ['W/"3"', -1],
    ['W/"3", "4"', 4],
    ['W/"1", W/"2"', -1],
  ])("%s → %s", (header, version) => {
    expect(parseIfMatch(header)).toBe(version);
  });

  it.each(["3", '"x"', '"3", "4"', "W/3", '"3"junk'])("%s is a 400", (header) => {
    expect(() => parseIfMatch(header)).toThrow(HttpError);
  });
});
