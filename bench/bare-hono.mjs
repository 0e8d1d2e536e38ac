#!/usr/bin/env node
/**
 * The reference server of the settings-API benchmark: bare Hono on @hono/node-server answering every GET with a
 * fixed JSON body (the same bytes Toolhost's settings list returned), no auth, no database, no validation.
 * Prints `listening <port>` once ready.
 *
 * Usage: node bench/bare-hono.mjs <file with the JSON body>
 */
import { readFileSync } from "node:fs";
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const body = readFileSync(process.argv[2], "utf8");
const app = new Hono();
app.get("*", (c) => c.body(body, 200, { "content-type": "application/json" }));
serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => console.log(`listening ${info.port}`));
