/**
 * If-Match per RFC 9110 §13.1.1: a list of entity-tags; a strong tag names a version when it is of this server's
 * form; a weak tag or a strong tag never issued cannot match (412, not 400); only a header that is no entity-tag list
 * is a 400. Over HTTP: 412 for each of those, with a message saying that weak tags never match.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpError } from "../../src/server/http.js";
import { parseIfMatch } from "../../src/server/routes/settings.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

describe("parseIfMatch", () => {
  it.each([
    [undefined, undefined],
    ["*", undefined],
    ['"3"', { versions: [3], weak: false }],
    [' "3" ', { versions: [3], weak: false }],
    ['W/"3"', { versions: [], weak: true }],
    ['W/"3", "4"', { versions: [4], weak: true }],
    ['W/"1", W/"2"', { versions: [], weak: true }],
    ['"3", "4"', { versions: [3, 4], weak: false }],
    ['"3",,"4",', { versions: [3, 4], weak: false }],
    ['"x"', { versions: [], weak: false }],
    ['"a,b", "7"', { versions: [7], weak: false }],
    ['""', { versions: [], weak: false }],
  ])("%s → %j", (header, condition) => {
    expect(parseIfMatch(header)).toEqual(condition);
  });

  it.each(["3", "W/3", '"3"junk', '"3" "4"', "", ",", '"a"b"', 'w/"3"'])("%s is a 400", (header) => {
    expect(() => parseIfMatch(header)).toThrow(HttpError);
  });
});

describe("PUT /api/settings/tools/:tool with If-Match", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  const put = (ifMatch: string, maxResults: number) =>
    server.api("/api/settings/tools/glob", {
      method: "PUT",
      headers: { "if-match": ifMatch },
      json: { parameters: { maxResults } },
    });

  it("412 for a strong tag never issued, a list without the current version and weak tags; a list with it applies", async () => {
    const first = await put('"0"', 50);
    expect(first.status).toBe(200);
    expect(first.headers.get("etag")).toBe('"1"');
    for (const header of ['"x"', '"0", "7"', 'W/"1"']) {
      const refused = await put(header, 60);
      expect(refused.status, header).toBe(412);
      expect(refused.headers.get("etag")).toBe('"1"');
      const { error } = (await refused.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("precondition_failed");
      if (header.startsWith("W/")) expect(error.message).toMatch(/weak entity-tags.*never match/);
    }
    const listed = await put('"0", W/"1", "1"', 70);
    expect(listed.status).toBe(200);
    expect(listed.headers.get("etag")).toBe('"2"');
    // A PUT that changes nothing keeps the ETag.
    const same = await put('"2"', 70);
    expect(same.status).toBe(200);
    expect(same.headers.get("etag")).toBe('"2"');
    expect((await put("2", 70)).status).toBe(400);
  });
});
