/**
 * Bounded input: per-route limits checked before parsing, list-setting caps, non-JSON values from library callers,
 * and /api/health staying responsive while maximal hostile bodies arrive.
 */
import { Agent, fetch } from "undici";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  checkValueLimits,
  SETTINGS_BODY_LIMITS,
  scanJsonText,
  TOOL_ARGUMENT_LIMITS,
} from "../../src/core/json-limits.js";
import { memoryRuntime } from "../helpers/runtime.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { freshStore, startChildServer } from "../helpers/stores.js";

let server: TestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});
const dispatcher = new Agent({ connections: 16 });
afterAll(() => dispatcher.close());

/** An object with `n` keys as JSON text, built without holding the object. */
const manyKeys = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(",")}}`;

describe("JSON limits", () => {
  it("the scan finds each limit without parsing; within limits it accepts", () => {
    expect(scanJsonText(manyKeys(SETTINGS_BODY_LIMITS.maxKeys), SETTINGS_BODY_LIMITS)).toBeUndefined();
    expect(scanJsonText(manyKeys(SETTINGS_BODY_LIMITS.maxKeys + 1), SETTINGS_BODY_LIMITS)?.limit).toBe("maxKeys");
    expect(scanJsonText(`[${"1,".repeat(1000)}1]`, SETTINGS_BODY_LIMITS)?.limit).toBe("maxItems");
    expect(scanJsonText(`${"[".repeat(9)}${"]".repeat(9)}`, SETTINGS_BODY_LIMITS)?.limit).toBe("maxDepth");
    expect(scanJsonText(`{"a":"${"x".repeat(17_000)}"}`, SETTINGS_BODY_LIMITS)?.limit).toBe("maxStringLength");
    // Brackets and commas inside strings are text, not structure.
    expect(scanJsonText(`{"a":"${"[,".repeat(100)}\\""}`, SETTINGS_BODY_LIMITS)).toBeUndefined();
    expect(scanJsonText("x".repeat(SETTINGS_BODY_LIMITS.maxBytes + 1), SETTINGS_BODY_LIMITS)?.limit).toBe("maxBytes");
  });

  it("values from library callers: limits, and what JSON cannot carry", () => {
    expect(checkValueLimits({ a: [1, "x", { b: null }] }, TOOL_ARGUMENT_LIMITS)).toBeUndefined();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const [value, pattern] of [
      [{ f: () => 1 }, /arguments\.f is a function/],
      [{ s: Symbol("x") }, /arguments\.s is a symbol/],
      [{ n: 10n }, /arguments\.n is a BigInt/],
      [{ n: Number.NaN }, /NaN/],
      [{ list: [undefined] }, /arguments\.list\[0\] is undefined/],
      [cyclic, /cycle/],
    ] as const) {
      expect(checkValueLimits(value, TOOL_ARGUMENT_LIMITS)).toMatch(pattern);
    }
  });

  it("a library caller's non-JSON arguments end as validation_failed, never a crash", async () => {
    const { runtime } = memoryRuntime();
    for (const args of [{ path: () => 1 }, { path: Symbol("p") }, { path: 1n }, () => 1, Symbol("x"), 5n]) {
      const outcome = await runtime.executeTool("read_file", args, { userId: "u", workingDirectory: "/tmp" });
      expect(outcome).toMatchObject({ ok: false, error: { code: "validation_failed" } });
    }
  });
});

describe("HTTP bodies", () => {
  it("refuses oversized and overstructured settings bodies with 413 naming the limit, before parsing", async () => {
    server = await startTestServer();
    const put = (body: string) =>
      server!.api("/api/settings/tools/grep", { method: "PUT", body, headers: { "content-type": "application/json" } });
    const million = await put(`{"parameters":${manyKeys(1_000_000)}}`);
    expect(million.status).toBe(413);
    expect(((await million.json()) as { error: { details: unknown } }).error.details).toMatchObject({
      limit: "maxBytes",
    });
    const wide = await put(`{"parameters":${manyKeys(SETTINGS_BODY_LIMITS.maxKeys + 1)}}`);
    expect(wide.status).toBe(413);
    expect(((await wide.json()) as { error: { message: string } }).error.message).toMatch(/maxKeys/);
  });

  it("caps list settings: entries and entry length, 422 naming the cap", async () => {
    server = await startTestServer();
    const eve = await server.ctx.tokens.create("eve");
    const put = (deniedPaths: string[]) =>
      server!.api("/api/settings/tools/grep", {
        method: "PUT",
        token: eve.token,
        json: { parameters: { deniedPaths } },
      });
    const many = await put(Array.from({ length: 101 }, (_, i) => `/d${i}`));
    expect(many.status).toBe(422);
    expect(((await many.json()) as { error: { message: string } }).error.message).toMatch(
      /list length must be at most 100/,
    );
    const long = await put([`/${"x".repeat(1100)}`]);
    expect(long.status).toBe(422);
    expect(((await long.json()) as { error: { message: string } }).error.message).toMatch(
      /at most 1024 characters \(maxLength\)/,
    );
    expect((await put(["/a", "/b"])).status).toBe(200);
    const descriptor = (await server.ctx.settings.get("eve", "grep")).parameterDescriptors.find(
      (d) => d.name === "deniedPaths",
    );
    expect(descriptor).toMatchObject({ max: 100, maxLength: 1024 });
  });

  // Opt-in (TOOLHOST_LOAD_TESTS=1): on a machine shared by many test runs its latency says more about the machine.
  it.runIf(process.env.TOOLHOST_LOAD_TESTS === "1")(
    "keeps /api/health p99 under 100 ms while maximal hostile bodies arrive",
    async () => {
      // The server in a process of its own, so that only its event loop is measured (not this test's clients).
      const store = await freshStore("sqlite");
      const child = await startChildServer(store);
      const token = /th_[A-Za-z0-9_-]+/.exec(child.output())?.[0] ?? "";
      const url = child.url;
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      // Just within the settings limits: as many keys and values as allowed, each to be checked by the policy.
      const hostileSettings = `{"parameters":${manyKeys(SETTINGS_BODY_LIMITS.maxKeys - 1)}}`;
      expect(scanJsonText(hostileSettings, SETTINGS_BODY_LIMITS)).toBeUndefined();
      // Just within the argument limits: the most values allowed, in one array of short strings.
      const items = TOOL_ARGUMENT_LIMITS.maxItems - 1;
      const hostileArgs = `{"arguments":{"pattern":"a","paths":[${Array.from({ length: items }, () => '"x"').join(",")}]}}`;
      expect(scanJsonText(hostileArgs, TOOL_ARGUMENT_LIMITS)).toBeUndefined();
      const oversized = `{"parameters":${manyKeys(1_000_000)}}`;
      let stop = false;
      const statuses = new Map<number, number>();
      const attacker = async () => {
        const bodies = [
          ["/api/settings/tools/grep", "PUT", hostileSettings],
          ["/api/tools/grep/execute", "POST", hostileArgs],
          ["/api/settings/tools/grep", "PUT", oversized],
        ] as const;
        for (let n = 0; !stop; n++) {
          const [path, method, body] = bodies[n % bodies.length]!;
          const res = await fetch(`${url}${path}`, {
            method,
            headers,
            body,
            signal: AbortSignal.timeout(10_000),
          }).catch(() => undefined);
          if (res) {
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
            await res.body?.cancel();
          }
        }
      };
      const attackers = [attacker(), attacker(), attacker()];
      const latencies: number[] = [];
      for (let i = 0; i < 200; i++) {
        const t0 = performance.now();
        const res = await fetch(`${url}/api/health`, { dispatcher, signal: AbortSignal.timeout(10_000) });
        await res.text();
        latencies.push(performance.now() - t0);
      }
      stop = true;
      await Promise.all(attackers);
      await child.stop();
      latencies.sort((a, b) => a - b);
      const p99 = latencies[Math.ceil(latencies.length * 0.99) - 1]!;
      expect([...statuses.keys()].every((s) => s < 500)).toBe(true);
      expect(statuses.size).toBeGreaterThan(0);
      expect(p99).toBeLessThan(100);
    },
    60_000,
  );
});
