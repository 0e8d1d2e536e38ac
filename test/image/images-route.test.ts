import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqlImageStore } from "../../src/app/sql-image-store.js";
import { imageRoutes } from "../../src/server/routes/images.js";
import { openDatabase, type ToolhostDatabase } from "../../src/storage/database.js";
import { FileImageStore, sniffImageMimeType, userDirectoryName } from "../../src/tools/image/file-image-store.js";
import { PNG_1x1 } from "./fakes.js";
import { tempDataDir } from "./helpers.js";

let data: ReturnType<typeof tempDataDir>;
let database: ToolhostDatabase;

beforeEach(async () => {
  data = tempDataDir();
  database = await openDatabase({ dataDir: data.dir, url: join(data.dir, "toolhost.db") });
});
afterEach(async () => {
  await database.close();
  data.cleanup();
});

/** The images sub-app behind a stand-in auth middleware that takes the user from a header. */
function app() {
  const root = new Hono<{ Variables: { userId: string } }>();
  root.use("/api/*", async (c, next) => {
    const user = c.req.header("x-test-user");
    if (user) c.set("userId", user);
    await next();
  });
  root.route("/api/images", imageRoutes({ db: database.db, dataDir: data.dir }));
  return root;
}

async function saveFor(userId: string, bytes: Buffer = PNG_1x1) {
  const store = new SqlImageStore(database.db);
  return store.save({ userId, chatId: null, bytes, prompt: "a cat", model: "gpt-image-1" });
}

describe("images route: hostile requests first", () => {
  it("serves nothing to another user: the same 404 as an image that does not exist", async () => {
    const image = await saveFor("alice");
    const asBob = await app().request(image.url, { headers: { "x-test-user": "bob" } });
    expect(asBob.status).toBe(404);
    const missing = await app().request("/api/images/00000000-0000-4000-8000-000000000000", {
      headers: { "x-test-user": "bob" },
    });
    expect(missing.status).toBe(404);
    expect(await asBob.json()).toEqual({
      error: { ...((await missing.json()) as { error: object }).error, message: expect.stringContaining(image.id) },
    });
  });

  it("refuses unauthenticated requests", async () => {
    const image = await saveFor("alice");
    expect((await app().request(image.url)).status).toBe(401);
  });

  it.each([
    "..%2Ftoolhost.db",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "toolhost.db",
    "00000000-0000-4000-8000-00000000000A",
    "00000000-0000-4000-8000-000000000000.png",
    "00000000-0000-4000-8000-000000000000%00",
    "%2Fetc%2Fpasswd",
  ])("refuses malformed id %s (400, or 404 where the URL normalises away from the route)", async (id) => {
    await saveFor("alice");
    mkdirSync(join(data.dir, "images", "alice"), { recursive: true });
    writeFileSync(join(data.dir, "images", "alice", "toolhost.db"), PNG_1x1);
    const res = await app().request(`/api/images/${id}`, { headers: { "x-test-user": "alice" } });
    expect([400, 404]).toContain(res.status);
    expect(res.headers.get("content-type")).not.toMatch(/^image\//);
  });

  it("answers 400 for a malformed id that reaches the route, even when a row with that id exists", async () => {
    const image = await saveFor("alice");
    await database.db.updateTable("images").set({ id: "toolhost.db" }).where("id", "=", image.id).execute();
    for (const id of ["toolhost.db", image.id.toUpperCase(), `${image.id}.png`, "..%2F..%2Ftoolhost.db"]) {
      const res = await app().request(`/api/images/${id}`, { headers: { "x-test-user": "alice" } });
      expect(res.status).toBe(400);
    }
  });

  it("does not follow a tampered row out of the images directory", async () => {
    const image = await saveFor("alice");
    writeFileSync(join(data.dir, "secret.png"), PNG_1x1);
    await database.db
      .updateTable("images")
      .set({ path: "secret.png", data: null })
      .where("id", "=", image.id)
      .execute();
    expect((await app().request(image.url, { headers: { "x-test-user": "alice" } })).status).toBe(404);
    await database.db
      .updateTable("images")
      .set({ path: "images/alice/../../secret.png", data: null })
      .where("id", "=", image.id)
      .execute();
    expect((await app().request(image.url, { headers: { "x-test-user": "alice" } })).status).toBe(404);
  });

  it("does not follow a symlink planted in the images directory", async () => {
    const image = await saveFor("alice");
    writeFileSync(join(data.dir, "outside.png"), PNG_1x1);
    const link = join(data.dir, "images", "alice", "link.png");
    mkdirSync(join(data.dir, "images", "alice"), { recursive: true });
    symlinkSync(join(data.dir, "outside.png"), link);
    await database.db
      .updateTable("images")
      .set({ path: "images/alice/link.png", data: null })
      .where("id", "=", image.id)
      .execute();
    expect((await app().request(image.url, { headers: { "x-test-user": "alice" } })).status).toBe(404);
  });

  it("never serves a recorded type outside the raster allowlist", async () => {
    const image = await saveFor("alice");
    for (const mime of ["image/svg+xml", "text/html", "toString"]) {
      await database.db.updateTable("images").set({ mime_type: mime }).where("id", "=", image.id).execute();
      expect((await app().request(image.url, { headers: { "x-test-user": "alice" } })).status).toBe(404);
    }
  });

  it("keeps a hostile user id from steering the storage path", async () => {
    expect(userDirectoryName("../../etc")).toMatch(/^u-[0-9a-f]{32}$/);
    expect(userDirectoryName("alice")).toBe("alice");
    const file = await new FileImageStore(data.dir).save({
      userId: "../../evil",
      chatId: null,
      bytes: PNG_1x1,
      prompt: "p",
      model: null,
    });
    expect(file.path?.startsWith(join(data.dir, "images", "u-"))).toBe(true);
    const image = await saveFor("../../evil");
    expect(image.path).toBeUndefined();
    const ok = await app().request(image.url, { headers: { "x-test-user": "../../evil" } });
    expect(ok.status).toBe(200);
  });
});

describe("images route and stores", () => {
  it("serves the owner the bytes with the right Content-Type and safe headers", async () => {
    const image = await saveFor("alice");
    const res = await app().request(image.url, { headers: { "x-test-user": "alice" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("cache-control")).toMatch(/private/);
    expect(Buffer.from(await res.arrayBuffer()).equals(PNG_1x1)).toBe(true);
    // The bytes are in the row (every instance on the database serves them); no file was written.
    expect(existsSync(join(data.dir, "images"))).toBe(false);
    const row = await database.db.selectFrom("images").selectAll().where("id", "=", image.id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.data ?? []).equals(PNG_1x1)).toBe(true);
    expect(row).toMatchObject({
      user_id: "alice",
      path: "",
      mime_type: "image/png",
      prompt: "a cat",
      model: "gpt-image-1",
    });
  });

  it("serves an image stored as a file before migration 0009, and answers 404 when its file is gone", async () => {
    const file = await new FileImageStore(data.dir).save({
      userId: "alice",
      chatId: null,
      bytes: PNG_1x1,
      prompt: "p",
      model: null,
    });
    await database.db
      .insertInto("images")
      .values({
        id: file.id,
        user_id: "alice",
        chat_id: null,
        path: file.relativePath ?? "",
        mime_type: file.mimeType,
        prompt: "p",
        model: null,
        created_at: new Date().toISOString(),
      })
      .execute();
    const ok = await app().request(file.url, { headers: { "x-test-user": "alice" } });
    expect(ok.status).toBe(200);
    expect(Buffer.from(await ok.arrayBuffer()).equals(PNG_1x1)).toBe(true);
    const { rmSync } = await import("node:fs");
    rmSync(file.path as string);
    expect((await app().request(file.url, { headers: { "x-test-user": "alice" } })).status).toBe(404);
  });

  it("stores atomically: no temporary files left, and a non-image is refused with nothing written", async () => {
    const store = new FileImageStore(data.dir);
    const a = await store.save({ userId: "alice", chatId: "c1", bytes: PNG_1x1, prompt: "p", model: null });
    const { readdirSync } = await import("node:fs");
    expect(readdirSync(join(data.dir, "images", "alice"))).toEqual([`${a.id}.png`]);
    await expect(
      new SqlImageStore(database.db).save({
        userId: "bob",
        chatId: null,
        bytes: Buffer.from("<html>"),
        prompt: "p",
        model: null,
      }),
    ).rejects.toThrow(/not a PNG/);
    expect(await database.db.selectFrom("images").selectAll().where("user_id", "=", "bob").execute()).toEqual([]);
  });

  it("fails with the database error when the insert fails, leaving no file behind", async () => {
    const store = new SqlImageStore(database.db);
    await database.close();
    await expect(
      store.save({ userId: "carol", chatId: null, bytes: PNG_1x1, prompt: "p", model: null }),
    ).rejects.toThrow();
    expect(existsSync(join(data.dir, "images"))).toBe(false);
    database = await openDatabase({ url: join(data.dir, "toolhost.db") });
  });

  it("sniffs image types from bytes", () => {
    expect(sniffImageMimeType(PNG_1x1)).toBe("image/png");
    expect(sniffImageMimeType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe("image/jpeg");
    expect(sniffImageMimeType(Buffer.from("RIFF\0\0\0\0WEBPVP8 "))).toBe("image/webp");
    expect(sniffImageMimeType(Buffer.from("GIF89a"))).toBe("image/gif");
    expect(sniffImageMimeType(Buffer.from("<svg/>"))).toBeUndefined();
  });
});
