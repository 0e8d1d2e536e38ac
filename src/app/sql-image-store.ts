/**
 * Database-backed image storage: the file goes under the data directory (see file-image-store.ts) and a row goes
 * into the `images` table, which is what the HTTP API (src/server/routes/images.ts) serves from. It lives in the
 * application layer because it joins storage to the ImageStore interface that generate_image receives through
 * `context.services.imageStore`: the tool itself never imports storage.
 */
import { rm } from "node:fs/promises";
import type { Kysely } from "kysely";
import type { DatabaseSchema } from "../storage/database.js";
import { writeImageFile } from "../tools/image/file-image-store.js";
import type { ImageStore, ImageToStore, StoredImage } from "../tools/image/types.js";

/** ImageStore over a Kysely database (SQLite or PostgreSQL) and a data directory. */
export class SqlImageStore implements ImageStore {
  constructor(
    readonly db: Kysely<DatabaseSchema>,
    readonly dataDir: string,
  ) {}

  /**
   * Writes the file atomically, then inserts its `images` row; when the insert fails the file is removed and the
   * database error is rethrown. Throws ToolExecutionError for bytes that are not a recognised raster image.
   */
  async save(image: ImageToStore): Promise<StoredImage> {
    const stored = await writeImageFile(this.dataDir, image);
    try {
      await this.db
        .insertInto("images")
        .values({
          id: stored.id,
          user_id: image.userId,
          chat_id: image.chatId,
          path: stored.relativePath,
          mime_type: stored.mimeType,
          prompt: image.prompt,
          model: image.model,
          created_at: new Date().toISOString(),
        })
        .execute();
    } catch (error) {
      await rm(stored.path, { force: true });
      throw error;
    }
    return stored;
  }
}
