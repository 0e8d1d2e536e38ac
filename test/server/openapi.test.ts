/**
 * The OpenAPI document: valid by a maintained validator (@readme/openapi-parser), shared components instead of
 * repeated `$id`s, 401/403 documented, a response schema for every JSON answer, and every route of the app listed.
 */
import { readFileSync } from "node:fs";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServerApp } from "../../src/server/app.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

type Operation = {
  security?: unknown[];
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
};

describe("GET /api/openapi.json", () => {
  let server: TestServer;
  let doc: {
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, unknown> };
  };
  beforeAll(async () => {
    server = await startTestServer();
    doc = (await (await server.api("/api/openapi.json", { token: null })).json()) as typeof doc;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const result = await validate(structuredClone(doc) as never);
    if (!result.valid) throw new Error(compileErrors(result));
    expect(result.valid).toBe(true);
    // The validator does catch a broken document (a $ref to nowhere).
    const broken = structuredClone(doc) as typeof doc;
    broken.paths["/api/me"]!.get!.responses["401"] = { $ref: "#/components/responses/Nope" } as never;
    expect((await validate(broken as never)).valid).toBe(false);
  });

  it("holds no $id: shared schemas are components, and all of them load into one validator", () => {
    expect(JSON.stringify(doc)).not.toContain('"$id"');
    for (const name of ["ErrorBody", "ToolSettingsDescriptor", "ToolDefinition", "Chat"])
      expect(doc.components.schemas[name]).toBeTruthy();
    const ajv = new Ajv2020({ strict: false });
    for (const [name, schema] of Object.entries(doc.components.schemas))
      ajv.addSchema(schema as object, `#/components/schemas/${name}`);
    expect(Object.keys(doc.components.schemas).length).toBeGreaterThan(4);
  });

  it("documents 401 on every secured operation and 403 on admin ones; JSON answers have schemas", () => {
    const missing: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (!op.responses) continue;
        if (op.security?.length && !op.responses["401"]) missing.push(`${method} ${path}: 401`);
        if (path.startsWith("/api/admin/") && !op.responses["403"]) missing.push(`${method} ${path}: 403`);
        for (const [status, response] of Object.entries(op.responses)) {
          const content = (response as { content?: Record<string, { schema?: unknown }> }).content;
          if (content?.["application/json"] && !content["application/json"].schema)
            missing.push(`${method} ${path} ${status}: schema`);
        }
      }
    }
    expect(missing).toEqual([]);
    const tools = doc.paths["/api/tools"]?.get?.responses["200"]?.content?.["application/json"]?.schema;
    expect(tools).toMatchObject({ properties: { tools: { type: "array" } } });
  });

  it("lists every /api route the server answers", () => {
    const app = createServerApp(server.ctx);
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`)),
    );
    const undocumented = app.routes
      .filter((r) => r.method !== "ALL" && r.path.startsWith("/api/") && !r.path.includes("*"))
      .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z]+)(\{[^}]*\})?/g, "{$1}")}`)
      .filter((route) => !documented.has(route));
    expect([...new Set(undocumented)]).toEqual([]);
  });

  it("the README's route table lists exactly the document's routes", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8").split("\n");
    const start = readme.findIndex((line) => /^\| route \| what it does \|/.test(line));
    expect(start, "the README has a table headed | route | what it does |").toBeGreaterThan(0);
    const listed = new Set<string>();
    for (const row of readme.slice(start + 2)) {
      if (!row.startsWith("|")) break;
      const first = (row.split(/(?<!\\)\|/)[1] ?? "").replaceAll("`", "");
      for (const m of first.matchAll(
        /((?:(?:GET|POST|PUT|PATCH|DELETE)\/)*(?:GET|POST|PUT|PATCH|DELETE)) (\/[^\s?,]*)/g,
      )) {
        const path = (m[2] as string).replace(/:([A-Za-z]+)/g, "{$1}");
        for (const method of (m[1] as string).split("/")) listed.add(`${method} ${path}`);
      }
    }
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, item]) =>
        Object.keys(item)
          .filter((k) => ["get", "put", "post", "patch", "delete"].includes(k))
          .map((method) => `${method.toUpperCase()} ${path}`),
      ),
    );
    const missing = [...documented].filter((r) => !listed.has(r)).sort();
    const extra = [...listed].filter((r) => !documented.has(r)).sort();
    expect(
      { "in the OpenAPI document, missing from the README route table": missing, "in the README only": extra },
      "README.md's route table (| route | what it does |) must list the OpenAPI document's routes",
    ).toEqual({ "in the OpenAPI document, missing from the README route table": [], "in the README only": [] });
  });

  it("describes every chat stream event with a schema of its own, the same events docs/chats.md lists", () => {
    const union = doc.components.schemas.ChatStreamEvent as { anyOf?: { $ref: string }[]; oneOf?: { $ref: string }[] };
    const refs = (union.anyOf ?? union.oneOf ?? []).map((r) => r.$ref.replace("#/components/schemas/", ""));
    const types = refs.map((name) => {
      const schema = doc.components.schemas[name] as { properties: { type: { const?: string; enum?: string[] } } };
      return schema.properties.type.const ?? schema.properties.type.enum?.[0];
    });
    expect(new Set(types).size).toBe(types.length);
    const docs = readFileSync(new URL("../../docs/chats.md", import.meta.url), "utf8").split("\n");
    const start = docs.findIndex((line) => line.startsWith("| event | data |"));
    const listed: string[] = [];
    for (const row of docs.slice(start + 2)) {
      const m = /^\| `([a-z_]+)` \|/.exec(row);
      if (!m) break;
      listed.push(m[1] as string);
    }
    expect([...types].sort()).toEqual([...listed].sort());
    const stream = doc.paths["/api/chats/{id}/messages"]?.post?.responses["200"]?.content?.["text/event-stream"];
    expect(stream?.schema).toEqual({ $ref: "#/components/schemas/ChatStreamEvent" });
  });
});
