/**
 * Files-only image storage under the data directory. Layout: `<dataDir>/images/<userDir>/<id>.<ext>`, where `<userDir>`
 * is the user id when it is a plain token and a hash of it otherwise, so no user id can steer a path. Files are written
 * atomically (a temporary file in the same directory, then rename) with mode 0600.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join, relative, resolve, sep } from "node:path";
import { ToolExecutionError } from "../../core/errors.js";
import type { ImageStore, ImageToStore, StoredImage } from "./types.js";

/** The URL prefix under which the HTTP API serves stored images to their owner. */
export const IMAGE_URL_PREFIX = "/api/images/";

/** Image ids are lower-case random UUIDs; the HTTP route refuses anything else before touching storage. */
export const IMAGE_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The raster formats Toolhost stores and serves, with their file extensions. SVG is deliberately absent. */
export const IMAGE_MIME_EXTENSIONS: Readonly<Record<string, string>> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/webp": "webp",
  "image/gif": "gif",
};

/**
 * The MIME type of image bytes, from their signature (PNG, JPEG, WebP, GIF), or undefined for anything else.
 * A provider's claimed type is never trusted for what is stored and served.
 */
export function sniffImageMimeType(bytes: Uint8Array): string | undefined {
  const starts = (sig: number[], at = 0) => bytes.length >= at + sig.length && sig.every((b, i) => bytes[at + i] === b);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (starts([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return "image/webp";
  if (starts([0x47, 0x49, 0x46, 0x38])) return "image/gif";
  return undefined;
}

/** The directory name for a user: the id itself when it is a plain token, else `u-` + 32 hex of its sha256. */
export function userDirectoryName(userId: string): string {
  if (/^[A-Za-z0-9_-]{1,64}$/.test(userId)) return userId;
  return `u-${createHash("sha256").update(userId).digest("hex").slice(0, 32)}`;
}

/** Whether `child` is `parent` or lies beneath it (both absolute). */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !rel.startsWith(sep) && !/^[a-zA-Z]:/.test(rel));
}

/**
 * The MIME type of image bytes a store may keep (see {@link sniffImageMimeType}). Throws ToolExecutionError (rule
 * `image_format`) for anything that is not PNG, JPEG, WebP or GIF.
 */
export function storableImageMimeType(bytes: Uint8Array): string {
  const mimeType = sniffImageMimeType(bytes);
  if (!mimeType) {
    throw new ToolExecutionError(
      "The provider returned data that is not a PNG, JPEG, WebP or GIF image; nothing was stored. Try again or use another model.",
      { rule: "image_format" },
    );
  }
  return mimeType;
}

/**
 * Writes the image file for `image` under `dataDir` and returns its description (not yet recorded anywhere).
 * Throws ToolExecutionError when the bytes are not PNG/JPEG/WebP/GIF; file-system errors propagate.
 */
export async function writeImageFile(dataDir: string, image: ImageToStore, id = randomUUID()): Promise<StoredImage> {
  const mimeType = storableImageMimeType(image.bytes);
  const root = resolve(dataDir);
  const dir = join(root, "images", userDirectoryName(image.userId));
  const file = join(dir, `${id}.${IMAGE_MIME_EXTENSIONS[mimeType]}`);
  if (!isInside(join(root, "images"), file))
    throw new ToolExecutionError("Refusing to write an image outside the data directory.");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const temp = join(dir, `.${id}.${process.pid}.tmp`);
  try {
    await writeFile(temp, image.bytes, { mode: 0o600, flag: "wx" });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  return {
    id,
    userId: image.userId,
    mimeType,
    path: file,
    relativePath: relative(root, file).split(sep).join("/"),
    url: `${IMAGE_URL_PREFIX}${id}`,
    size: image.bytes.length,
  };
}

/**
 * ImageStore that only writes files (no database record, so the HTTP API does not serve these images).
 * Used when the host provides no `services.imageStore`, e.g. in the CLI without a database.
 */
export class FileImageStore implements ImageStore {
  constructor(readonly dataDir: string) {}

  /** See ImageStore.save. */
  save(image: ImageToStore): Promise<StoredImage> {
    return writeImageFile(this.dataDir, image);
  }
}
