/**
 * The first API token of an empty database: instances starting together (here: two databases handles per store, as
 * two processes would hold, each asked at once) create exactly one between them, on SQLite and on PostgreSQL; a
 * database that has a token gets none.
 */
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { TokenRepository } from "../../src/storage/token-repository.js";
import { freshPostgresDatabase } from "../helpers/postgres.js";
import { tempDir } from "../helpers/server.js";
import { HAVE_POSTGRES } from "../helpers/stores.js";

const opened: ToolhostDatabase[] = [];
afterAll(async () => {
  await Promise.all(opened.map((d) => d.close()));
});

const cases = [
  {
    name: "SQLite",
    skip: false,
    open: async () => {
      const dataDir = tempDir();
      return [await openDatabase({ dataDir }), await openDatabase({ dataDir })];
    },
  },
  {
    name: "PostgreSQL",
    skip: !HAVE_POSTGRES,
    open: async () => {
      const url = await freshPostgresDatabase();
      return [await openDatabase({ url }), await openDatabase({ url })];
    },
  },
];

describe.each(cases)("the first token on $name", ({ skip, open }) => {
  it.skipIf(skip)("is created once by instances starting together, and never once a token exists", async () => {
    const databases = await open();
    opened.push(...databases);
    const repositories = databases.map((d) => new TokenRepository(d.db));
    const made = await Promise.all(
      Array.from({ length: 12 }, (_, i) => repositories[i % 2]!.createFirst("local", "created on first start")),
    );
    expect(made.filter(Boolean)).toHaveLength(1);
    expect(await repositories[0]!.count()).toBe(1);
    const token = made.find(Boolean)!.token;
    expect(await repositories[1]!.authenticate(token)).toBe("local");
    expect(await repositories[1]!.createFirst("local", "again")).toBeUndefined();
  });
});
