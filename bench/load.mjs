#!/usr/bin/env node
/**
 * A small HTTP load generator for the benchmarks (runs in its own process so it does not share the server's
 * event loop): keeps CONNECTIONS keep-alive connections busy with GET requests (POST with BODY when given) for
 * DURATION_MS and prints one JSON line: {requests, errors, seconds, rps, bytes}.
 *
 * Usage: node bench/load.mjs <url> [connections=16] [durationMs=5000] [authorization header value] [JSON body]
 */
import { Pool } from "undici";

const [url, connArg = "16", durArg = "5000", auth, requestBody] = process.argv.slice(2);
const target = new URL(url);
const connections = Number(connArg);
const durationMs = Number(durArg);
const pool = new Pool(target.origin, { connections, pipelining: 1 });
const headers = {
  ...(auth ? { authorization: auth } : {}),
  ...(requestBody ? { "content-type": "application/json" } : {}),
};
const method = requestBody ? "POST" : "GET";
let requests = 0;
let errors = 0;
let bytes = 0;
const deadline = performance.now() + durationMs;
const start = performance.now();

async function worker() {
  while (performance.now() < deadline) {
    try {
      const res = await pool.request({ path: target.pathname + target.search, method, headers, body: requestBody });
      const answer = await res.body.arrayBuffer();
      bytes += answer.byteLength;
      if (res.statusCode === 200) requests++;
      else errors++;
    } catch {
      errors++;
    }
  }
}

await Promise.all(Array.from({ length: connections }, worker));
const seconds = (performance.now() - start) / 1000;
await pool.close();
console.log(JSON.stringify({ requests, errors, seconds, rps: requests / seconds, bytes }));
