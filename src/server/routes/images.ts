/**
 * Stored images over HTTP: generate_image's images are served to their owner only. `GET /:id` (mounted at /api/images)
 * returns the bytes of an image generate_image stored, to the user who made it only.
 *
 * Rules: the id must be a lower-case UUID (anything else is 400 before storage is touched, so no path can be
 * smuggled in); an id that does not exist and an id owned by someone else both answer the same 404; the bytes come
 * from the `images` row (so every instance on the database serves every image), or, for an image stored as a file
 * before migration 0009, from the file the row names, which must resolve (symlinks followed) inside
 * `<dataDir>/images`; the
 * Content-Type is the recorded raster type (never SVG or HTML), with `nosniff` and a sandboxing CSP.
 */
import { readFile, realpath } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Hono } from "hono";
import type { Kysely } from "kysely";
import type { DatabaseSchema } from "../../storage/database.js";
import { IMAGE_ID_PATTERN, IMAGE_MIME_EXTENSIONS, isInside } from "../../tools/image/file-image-store.js";

/** Dependencies of imageRoutes. */
export interface ImageRoutesDeps {
  db: Kysely<DatabaseSchema>;
  /** The data directory images are stored beneath (the same one the tool runtime uses). */
  dataDir: string;
}

function notFound(id: string) {
  return {
    error: {
      code: "not_found",
      message: `No image "${id}" for this user. Use a URL that generate_image returned to you.`,
    },
  };
}

/**
 * Hono sub-app serving `GET /:id`. Expects an auth middleware in front that sets `c.get("userId")`; without it
 * every request is 401. Responses: 200 with the image bytes, 400 for a malformed id, 404 for an image that does
 * not exist, belongs to another user, or whose file is gone or lies outside the images directory.
 */
export function imageRoutes(deps: ImageRoutesDeps): Hono<{ Variables: { userId: string } }> {
  const app = new Hono<{ Variables: { userId: string } }>();
  const imagesRoot = join(resolve(deps.dataDir), "images");

  app.get("/:id", async (c) => {
    const userId = c.get("userId");
    if (!userId) {
      return c.json(
        { error: { code: "unauthorized", message: "Authenticate with a bearer token to fetch images." } },
        401,
      );
    }
    const id = c.req.param("id");
    if (!IMAGE_ID_PATTERN.test(id)) {
      return c.json(
        {
          error: {
            code: "bad_request",
            message: "Image ids are lower-case UUIDs, as in the URLs generate_image returns.",
          },
        },
        400,
      );
    }
    const row = await deps.db
      .selectFrom("images")
      .select(["path", "mime_type", "data"])
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .executeTakeFirst();
    if (!row || !Object.hasOwn(IMAGE_MIME_EXTENSIONS, row.mime_type)) return c.json(notFound(id), 404);

    let bytes: Buffer;
    if (row.data) bytes = Buffer.from(row.data);
    else
      try {
        const file = resolve(deps.dataDir, row.path);
        if (!row.path || !isInside(imagesRoot, file)) return c.json(notFound(id), 404);
        const real = await realpath(file);
        if (!isInside(await realpath(imagesRoot), real)) return c.json(notFound(id), 404);
        bytes = await readFile(real);
      } catch {
        return c.json(notFound(id), 404);
      }
    return c.body(new Uint8Array(bytes), 200, {
      "Content-Type": row.mime_type,
      "Content-Length": String(bytes.length),
      "Cache-Control": "private, max-age=3600",
      "X-Content-Type-Options": "nosniff",
      "Content-Security-Policy": "default-src 'none'; sandbox",
      "Content-Disposition": `inline; filename="${id}.${IMAGE_MIME_EXTENSIONS[row.mime_type]}"`,
    });
  });
  return app;
}
