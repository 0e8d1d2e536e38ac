/**
 * What a client that gets a request slightly wrong is told: an unknown property is named as such (not the
 * validator's "schema is false"), an empty id is refused instead of read as absent, and a number too large to store
 * is refused as typed instead of being stored as null.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCliInProcess } from "../helpers/cli.js";
import { startTestServer, type TestServer, tempDir } from "../helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

describe("request messages", () => {
  it("names an unknown property, at the top and nested", async () => {
    const top = await server.api("/api/tools/get_current_datetime/execute", {
      method: "POST",
      json: { arguments: {}, argumnets: {} },
    });
    expect(top.status).toBe(400);
    const body = (await top.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("bad_request");
    expect(body.error.message).toContain("/argumnets");
    expect(body.error.message).toContain("is not a property this request accepts");
    expect(body.error.message).not.toContain("schema is false");
  });

  it("refuses an empty approvalId or chatId instead of reading it as absent (no new approval is made)", async () => {
    for (const json of [
      { arguments: {}, approvalId: "" },
      { arguments: {}, chatId: "" },
    ]) {
      const res = await server.api("/api/tools/get_current_datetime/execute", { method: "POST", json });
      expect(res.status, JSON.stringify(json)).toBe(400);
    }
  });

  it("the CLI refuses a setting value that overflows a number, naming what was typed", async () => {
    const run = await runCliInProcess(["settings", "set", "read_file", "maxResultLines=1e400"], {
      TOOLHOST_DATA_DIR: tempDir(),
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("1e400");
    expect(run.stderr).toContain("too large");
  });
});
