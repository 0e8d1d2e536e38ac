/**
 * How a data source's URL is shown and scrubbed: its password replaced by `***` in an admin's listing and removed
 * from any message, wherever the URL carries it — in its user part, or as a `password` query parameter (which the
 * PostgreSQL driver also reads).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { locationOf, redactedUrl, scrubSecret } from "../../src/tools/data/sources.js";
import { runCliInProcess } from "../helpers/cli.js";
import { tempDir } from "../helpers/server.js";

describe("data source URLs without their password", () => {
  it("redacts and scrubs a password in the user part", () => {
    const url = "postgres://reader:pa%40ss@db.internal:5432/shop";
    expect(redactedUrl(url)).toBe("postgres://reader:***@db.internal:5432/shop");
    expect(scrubSecret("auth failed for pa@ss (pa%40ss)", url)).toBe("auth failed for *** (***)");
  });

  it("redacts and scrubs a password given as a query parameter", () => {
    const url = "postgres://reader@db.internal:5432/shop?sslmode=require&password=Qp-s3cret%21&sslpassword=Key-s3cret";
    const redacted = redactedUrl(url);
    expect(redacted).not.toContain("Qp-s3cret");
    expect(redacted).not.toContain("Key-s3cret");
    expect(redacted).toContain("sslmode=require");
    expect(new URL(redacted).searchParams.get("password")).toBe("***");
    expect(scrubSecret("bad password Qp-s3cret! for key Key-s3cret", url)).toBe("bad password *** for key ***");
    expect(locationOf(url)).toBe("db.internal:5432/shop");
  });

  it("testing an unreachable source scrubs the driver's text once, not Toolhost's own words around it", async () => {
    // A short password ("p") also occurs in the source's name and in the message Toolhost writes around the
    // driver's error; scrubbing that whole message again made the name "***g" and the command it suggests wrong.
    const env = { TOOLHOST_DATA_DIR: join(tempDir(), "data") };
    const added = await runCliInProcess(["data-sources", "add", "pg", "postgres://u:p@127.0.0.1:9/db"], env);
    expect(added.code).toBe(1);
    expect(added.stdout).toContain('Data source "pg" is unreachable');
    expect(added.stdout).toContain("(toolhost data-sources test pg)");
    expect(added.stdout).not.toContain("***g");
    expect(added.stdout).toContain("It is stored all the same");
    expect(added.stdout).toContain("toolhost data-sources remove pg");
  });
});
