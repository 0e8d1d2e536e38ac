#!/usr/bin/env node
/**
 * The reference server of the settings-API benchmark: bare Hono on @hono/node-server answering every GET with a
 * fixed JSON body (the same bytes Toolhost's settings list returned), no auth, no database, no validation.
 * With `--read <file>` it is the reference of the execute benchmark instead: every POST reads the file (as a tool
 * would, from disk, per request) and answers its text as JSON. Prints `listening <port>` once ready.
 *
 * Usage: node bench/bare-hono.mjs <file with the JSON body> | --read <file>
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const app = new Hono();
if (process.argv[2] === "--read") {
  const file = process.argv[3];
  app.post("*", async (c) => c.json({ ok: true, result: { content: await readFile(file, "utf8") } }));
} else {
  const body = readFileSync(process.argv[2], "utf8");
  app.get("*", (c) => c.body(body, 200, { "content-type": "application/json" }));
}
serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => console.log(`listening ${info.port}`));
