/**
 * /api/health stays responsive (p99 under 100 ms) while maximal hostile bodies arrive: the latency half of bounded
 * input (the limits themselves are tested in bounded-input.test.ts). It measures latency under load it creates
 * itself, so it runs alone after the rest of the suite (vitest.config.ts `SOLO`): the other workers' CPU would
 * decide it otherwise.
 */
import { loadavg } from "node:os";
import { Worker } from "node:worker_threads";
import { Agent, fetch } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { SETTINGS_BODY_LIMITS, TOOL_ARGUMENT_LIMITS } from "../../src/core/json-limits.js";
import { freshStore, startChildServer } from "../helpers/stores.js";
import { tempDir } from "../helpers/temp.js";
import { until } from "../helpers/until.js";

const dispatcher = new Agent({ connections: 16 });
afterAll(() => dispatcher.close());

/**
 * The attacker (a worker thread's source): one loop sending, as fast as answers come, the largest bodies the
 * limits allow — a settings body of 255 keys filling 64 KiB; tool arguments of 2 MiB as 10,000 strings, as one
 * 2 MiB file content (a real write), and as 1,000 keys of 18-item arrays (20,000 values) — plus a 12 MB body of a
 * million keys (refused by its size). Bodies are encoded once; each is sent once before the measurement starts, so
 * that what the server loads on a route's first request is not counted.
 */
const ATTACKERS = `
const { parentPort, workerData } = require("node:worker_threads");
const { work, limits } = workerData;
const keys = (n, v) => "{" + Array.from({ length: n }, (_, i) => '"k' + i + '":' + v).join(",") + "}";
// The largest make(n) of at most max characters, for a make whose length grows linearly with n.
const fit = (max, make) => { const a = make(0).length; const b = make(1).length - a; return make(Math.floor((max - a) / b)); };
const bodies = [
  ["/api/settings/tools/grep", "PUT", fit(limits.settings.maxBytes, (n) => '{"parameters":' + keys(limits.settings.maxKeys - 1, '"' + "v".repeat(n) + '"') + "}")],
  ["/api/tools/grep/execute", "POST", JSON.stringify({ arguments: { pattern: "a", path: ".", paths: Array.from({ length: limits.args.maxItems - 1 }, () => "y".repeat(200)) }, workingDirectory: work })],
  ["/api/tools/write_file/execute", "POST", fit(limits.args.maxBytes, (n) => JSON.stringify({ arguments: { path: "big.txt", content: "a line of text\\n".repeat(n) }, workingDirectory: work }))],
  ["/api/tools/read_file/execute", "POST", JSON.stringify({ arguments: Object.fromEntries(Array.from({ length: limits.args.maxKeys - 1 }, (_, i) => ["k" + i, Array.from({ length: 18 }, () => "z".repeat(95))])), workingDirectory: work })],
  ["/api/settings/tools/grep", "PUT", '{"parameters":' + keys(1000000, 1) + "}"],
].map(([path, method, body]) => [path, method, Buffer.from(body)]);
// The server's URL and a token come in a first message (the bodies are encoded while the server starts); the second
// message stops the attack.
let url;
let headers;
let stop = false;
const statuses = new Map();
const target = new Promise((resolve) => parentPort.once("message", resolve));
const attack = async (offset) => {
  for (let n = offset; !stop; n++) {
    const [path, method, body] = bodies[n % bodies.length];
    const key = method + " " + path;
    try {
      const res = await fetch(url + path, { method, headers, body, signal: AbortSignal.timeout(20000) });
      await res.arrayBuffer();
      statuses.set(key + " " + res.status, (statuses.get(key + " " + res.status) || 0) + 1);
    } catch (error) {
      // Why it failed, in the key: the assertion's message then says (a reset, a timeout, a parse error).
      const why = key + " failed (" + ((error.cause && (error.cause.code || error.cause.message)) || error.name + ": " + error.message) + ")";
      statuses.set(why, (statuses.get(why) || 0) + 1);
    }
  }
};
// A warm-up round first (the server loads what a route needs on its first request), then the attack proper.
(async () => {
  const { url: base, token } = await target;
  url = base;
  headers = { authorization: "Bearer " + token, "content-type": "application/json" };
  parentPort.on("message", () => { stop = true; });
  for (const [path, method, body] of bodies) await (await fetch(url + path, { method, headers, body })).arrayBuffer();
  parentPort.postMessage({ ready: true });
  await attack(0);
  parentPort.postMessage({ statuses: [...statuses] });
})();
`;

/** A bare HTTP server (a worker thread's source) that answers at once: the control of the latency measurement. */
const CONTROL_SERVER = `
const { parentPort } = require("node:worker_threads");
const server = require("node:http").createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  res.end('{"ok":true}');
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));
`;

/** Polls until `check` holds (every 10 ms, at most 10 s). */
describe("HTTP bodies under load", () => {
  it("keeps /api/health p99 under 100 ms while maximal hostile bodies arrive", async (context) => {
    // The server in a process of its own, the attackers in a worker thread: the measuring client's event loop only
    // measures (its latency is not inflated by encoding and sending megabytes).
    const store = await freshStore("sqlite");
    // The control (see below) and the attackers' worker (encoding its bodies) start while the server does.
    const control = new Worker(CONTROL_SERVER, { eval: true });
    const controlPort = new Promise<number>((resolve, reject) => {
      control.once("message", resolve);
      control.once("error", reject);
    });
    const attackers = new Worker(ATTACKERS, {
      eval: true,
      workerData: {
        work: tempDir("toolhost-hostile-"),
        limits: { settings: SETTINGS_BODY_LIMITS, args: TOOL_ARGUMENT_LIMITS },
      },
    });
    const statuses = new Map<string, number>();
    let reported: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      reported = resolve;
    });
    const ready = new Promise<void>((resolve, reject) => {
      attackers.on("message", (m: { ready?: boolean; statuses?: [string, number][] }) => {
        for (const [k, v] of m.statuses ?? []) statuses.set(k, v);
        if (m.ready) resolve();
        if (m.statuses) reported();
      });
      attackers.once("error", reject);
    });
    const child = await startChildServer(store).catch(async (error) => {
      await Promise.all([control.terminate(), attackers.terminate()]);
      throw error;
    });
    try {
      await until(() => /th_[A-Za-z0-9_-]+/.test(child.output()), "the server's first token");
      const token = /th_[A-Za-z0-9_-]+/.exec(child.output())![0];
      attackers.postMessage({ url: child.url, token });
      await ready;
      // Rounds of 100 health checks, one at a time on a keep-alive connection, while the attack goes on, each
      // followed by the same request to a control: a bare HTTP server in a thread of this process. A round counts
      // when the control's p99 is under 50 ms; when the machine cannot give even the control that (a shared 2-core
      // runner under a full suite), the round says nothing about Toolhost and is measured again, at most four rounds.
      const controlUrl = `http://127.0.0.1:${await controlPort}`;
      const timed = async (target: string) => {
        const t0 = performance.now();
        const res = await fetch(target, { dispatcher, signal: AbortSignal.timeout(10_000) });
        await res.text();
        return performance.now() - t0;
      };
      const quantiles = (values: number[]) => {
        const sorted = [...values].sort((a, b) => a - b);
        return { p50: sorted[49]!, p99: sorted[98]!, max: sorted[99]! };
      };
      const rounds: { health: ReturnType<typeof quantiles>; control: ReturnType<typeof quantiles> }[] = [];
      const counts = (r: (typeof rounds)[number]) => r.control.p99 < 50;
      while (rounds.length < 4 && !rounds.some((r) => counts(r) && r.health.p99 < 100)) {
        const health: number[] = [];
        const bare: number[] = [];
        for (let i = 0; i < 100; i++) {
          health.push(await timed(`${child.url}/api/health`));
          bare.push(await timed(`${controlUrl}/`));
          // Spread the checks over the attack (a round spans dozens of bodies), not into one burst between two.
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        rounds.push({ health: quantiles(health), control: quantiles(bare) });
      }
      attackers.postMessage("stop");
      await done;
      await attackers.terminate();
      const ms = (q: { p50: number; p99: number; max: number }) =>
        `p50 ${q.p50.toFixed(1)} / p99 ${q.p99.toFixed(1)} / max ${q.max.toFixed(1)} ms`;
      const summary = `rounds: ${rounds.map((r) => `health ${ms(r.health)}, control ${ms(r.control)}`).join("; ")}; load ${loadavg()[0]!.toFixed(1)}; answers ${JSON.stringify(Object.fromEntries(statuses))}`;
      // Every kind of hostile body was answered (with its refusal or result), none with a server error.
      expect(
        [...statuses.keys()].some((k) => k.endsWith(" 413")),
        summary,
      ).toBe(true);
      expect(
        [...statuses.keys()].filter((k) => / (5\d\d|failed\b.*)$/.test(k)),
        summary,
      ).toEqual([]);
      expect(statuses.size, summary).toBeGreaterThanOrEqual(4);
      const counted = rounds.filter(counts);
      if (counted.length === 0) {
        context.skip(
          `the machine is too busy to measure latency (the control's p99 reached 50 ms in every round): ${summary}`,
        );
      }
      expect(Math.min(...counted.map((r) => r.health.p99)), summary).toBeLessThan(100);
    } finally {
      await Promise.all([child.stop(), control.terminate(), attackers.terminate()]);
    }
  }, 120_000);
});
