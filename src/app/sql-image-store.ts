/**
 * Database-backed image storage: the image's bytes and its description go into one `images` row, which is what the
 * HTTP API (src/server/routes/images.ts) serves from, so every instance on the database serves every image. It
 * lives in the application layer because it joins storage to the ImageStore interface that generate_image receives
 * through `context.services.imageStore`: the tool itself never imports storage.
 */
import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { DatabaseSchema } from "../storage/database.js";
import { IMAGE_URL_PREFIX, storableImageMimeType } from "../tools/image/file-image-store.js";
import type { ImageStore, ImageToStore, StoredImage } from "../tools/image/types.js";

/** ImageStore over a Kysely database (SQLite or PostgreSQL). */
export class SqlImageStore implements ImageStore {
  constructor(readonly db: Kysely<DatabaseSchema>) {}

  /**
   * Inserts the image's row with its bytes. Throws ToolExecutionError for bytes that are not a recognised raster
   * image, and the database error otherwise. The result names no file (there is none).
   */
  async save(image: ImageToStore): Promise<StoredImage> {
    const mimeType = storableImageMimeType(image.bytes);
    const id = randomUUID();
    await this.db
      .insertInto("images")
      .values({
        id,
        user_id: image.userId,
        chat_id: image.chatId,
        path: "",
        mime_type: mimeType,
        prompt: image.prompt,
        model: image.model,
        created_at: new Date().toISOString(),
        data: Buffer.from(image.bytes.buffer, image.bytes.byteOffset, image.bytes.byteLength),
      })
      .execute();
    return { id, userId: image.userId, mimeType, url: `${IMAGE_URL_PREFIX}${id}`, size: image.bytes.length };
  }
}
