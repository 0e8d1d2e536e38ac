/**
 * Admin routes for the SQL tools' data sources (admins only; 403 otherwise), mounted at /api/admin/data-sources:
 * GET / (every declared source, URL redacted), POST / `{name, url, description?}` (stored; 201), DELETE /:name (a
 * stored source; 204), POST /:name/test (connects and answers with the server version, or why it is unreachable).
 * A source's password never appears in an answer.
 */

import { Hono } from "hono";
import Type from "typebox";
import type { AdminRule } from "../../app/admin.js";
import type { DataSourcesService } from "../../app/data-sources.js";
import { adminOnly } from "../auth.js";
import { type AuthEnv, readJsonBody } from "../http.js";
import { ErrorBody } from "../schemas.js";

/** Body of POST /api/admin/data-sources. */
export const AddDataSourceBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64 }),
    url: Type.String({ minLength: 1, maxLength: 4096 }),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  { additionalProperties: false },
);

/** The routes over a DataSourcesService. */
export function dataSourceRoutes(service: DataSourcesService, admins: AdminRule): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.use("*", adminOnly(admins));
  app.get("/", async (c) => c.json(await service.list()));
  app.post("/", async (c) => {
    const { name, ...config } = await readJsonBody<{ name: string; url: string; description?: string }>(
      c,
      AddDataSourceBody,
    );
    return c.json(await service.add(name, config), 201);
  });
  app.delete("/:name", async (c) => {
    await service.remove(c.req.param("name"));
    return c.body(null, 204);
  });
  app.post("/:name/test", async (c) => {
    const [result] = await service.test(c.req.param("name"));
    return c.json(result);
  });
  return app;
}

const json = (schema: unknown) => ({ "application/json": { schema } });
const error = (description: string) => ({ description, content: json(ErrorBody) });
const secured = { security: [{ bearerAuth: [] }] };
const sourceName = { name: "name", in: "path", required: true, schema: { type: "string" } };

/** A data source as the admin API shows it (the URL's password replaced by ***). */
const DataSourceSchema = {
  type: "object",
  required: ["name", "dialect", "url", "location", "origin"],
  properties: {
    name: { type: "string" },
    dialect: { type: "string", enum: ["postgres", "mysql", "sqlite"] },
    url: {
      type: "string",
      description: "The URL with its password replaced by ***",
      examples: ["postgres://reader:***@db.example.com:5432/shop"],
    },
    location: { type: "string", description: "host:port/database, or the SQLite file" },
    description: { type: "string" },
    origin: { type: "string", enum: ["config-file", "database"] },
  },
};

const DataSourceTestSchema = {
  type: "object",
  required: ["name", "dialect", "location", "reachable"],
  properties: {
    name: { type: "string" },
    dialect: { type: "string", enum: ["postgres", "mysql", "sqlite"] },
    location: { type: "string" },
    reachable: { type: "boolean" },
    version: { type: "string" },
    error: { type: "string" },
  },
};

/** OpenAPI path items of the data-source routes. */
export const dataSourceOpenApiPaths: Record<string, unknown> = {
  "/api/admin/data-sources": {
    get: {
      ...secured,
      summary: "The SQL tools' data sources (config file and stored), URLs without passwords (admins only).",
      responses: {
        200: {
          description: "Sources, and why others were skipped",
          content: json({
            type: "object",
            required: ["sources", "errors"],
            properties: {
              sources: { type: "array", items: DataSourceSchema },
              errors: {
                type: "array",
                items: {
                  type: "object",
                  required: ["name", "message"],
                  properties: { name: { type: "string" }, message: { type: "string" } },
                },
              },
            },
          }),
        },
      },
    },
    post: {
      ...secured,
      summary: "Store a data source: postgres://, mysql:// or sqlite:/absolute/path (admins only).",
      requestBody: {
        required: true,
        content: {
          "application/json": {
            schema: AddDataSourceBody,
            example: {
              name: "shop",
              url: "postgres://reader:PASSWORD@db.example.com:5432/shop",
              description: "Orders",
            },
          },
        },
      },
      responses: {
        201: { description: "The stored source", content: json(DataSourceSchema) },
        400: error("Malformed body, invalid URL, or the name is taken"),
      },
    },
  },
  "/api/admin/data-sources/{name}": {
    delete: {
      ...secured,
      parameters: [sourceName],
      summary: "Remove a stored data source and close its connections (admins only).",
      responses: {
        204: { description: "Removed" },
        403: error("The source is defined in the config file"),
        404: error("No such stored source"),
      },
    },
  },
  "/api/admin/data-sources/{name}/test": {
    post: {
      ...secured,
      parameters: [sourceName],
      summary: "Connect to a data source and read its server version (admins only).",
      responses: {
        200: { description: "Reachable or not, with the version or the reason", content: json(DataSourceTestSchema) },
        404: error("No such source"),
      },
    },
  },
};
