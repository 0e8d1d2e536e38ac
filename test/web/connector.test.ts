/**
 * The guarded undici connector on its own (layer 2 of the SSRF guard) and TLS through a pinned address:
 * certificates are verified against the URL's host name while the TCP connection goes to the checked address.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { guardedFetch } from "../../src/tools/web/fetch.js";
import { createGuardedAgent } from "../../src/tools/web/ssrf.js";
import { mapResolver, startCountingServer, type TestServer } from "./servers.js";

let counting: TestServer;
let tlsServer: Server;
let tlsPort = 0;
let cert = "";
let dir = "";

beforeAll(async () => {
  counting = await startCountingServer();
  dir = mkdtempSync(join(tmpdir(), "toolhost-web-tls-"));
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
      "-days",
      "2",
      "-subj",
      "/CN=secure.test",
      "-addext",
      "subjectAltName=DNS:secure.test",
    ],
    { stdio: "ignore" },
  );
  cert = readFileSync(join(dir, "cert.pem"), "utf8");
  tlsServer = createServer({ key: readFileSync(join(dir, "key.pem")), cert }, (req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`tls ok for ${req.headers.host}`);
  });
  await new Promise<void>((resolve) => tlsServer.listen(0, "127.0.0.1", resolve));
  tlsPort = (tlsServer.address() as AddressInfo).port;
});

afterAll(async () => {
  await counting.close();
  await new Promise<void>((resolve) => tlsServer.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

describe("guarded connector", () => {
  it("refuses IP literals and private names by itself, without any prior assertNoSsrf", async () => {
    const resolver = mapResolver({ "private.test": ["127.0.0.1"] });
    const agent = await createGuardedAgent({ resolver }, new Map());
    try {
      for (const url of [
        `http://127.0.0.1:${counting.port}/`,
        `http://[::ffff:127.0.0.1]:${counting.port}/`,
        `http://private.test:${counting.port}/`,
      ]) {
        const error = await fetch(url, { dispatcher: agent }).then(
          () => undefined,
          (e: unknown) => e as { cause?: { code?: string } },
        );
        expect(error?.cause?.code, url).toBe("access_denied");
      }
    } finally {
      await agent.destroy();
    }
    expect(counting.connections).toBe(0);
  });

  it("connects to the pinned address, never the name's later answers", async () => {
    const resolver = mapResolver({ "pinned.test": ["127.0.0.1"] });
    // The pin points at the counting server's address; the resolver is never consulted by the connector.
    const agent = await createGuardedAgent({ resolver }, new Map([["pinned.test", ["127.0.0.1"]]]));
    try {
      const response = await fetch(`http://pinned.test:${counting.port}/`, { dispatcher: agent });
      expect(await response.text()).toBe("SECRET internal data");
    } finally {
      await agent.destroy();
    }
    expect(resolver.calls).toEqual([]);
  });
});

describe("TLS through a pinned address", () => {
  it("verifies the certificate against the host name (SNI) while connecting to the checked address", async () => {
    const resolver = mapResolver({ "secure.test": ["127.0.0.1"], "other.test": ["127.0.0.1"] });
    const ok = await guardedFetch(`https://secure.test:${tlsPort}/`, {
      maxBytes: 1000,
      resolver,
      allowedHosts: ["secure.test"],
      ca: cert,
    });
    expect(ok.status).toBe(200);
    expect(Buffer.from(ok.body).toString()).toBe(`tls ok for secure.test:${tlsPort}`);

    // Same address, other name: the certificate does not match, so the fetch fails.
    await expect(
      guardedFetch(`https://other.test:${tlsPort}/`, {
        maxBytes: 1000,
        resolver,
        allowedHosts: ["other.test"],
        ca: cert,
      }),
    ).rejects.toMatchObject({
      code: "execution_failed",
      message: expect.stringMatching(/ERR_TLS_CERT_ALTNAME_INVALID/),
    });
    // Without the extra CA the self-signed certificate is refused too.
    await expect(
      guardedFetch(`https://secure.test:${tlsPort}/`, { maxBytes: 1000, resolver, allowedHosts: ["secure.test"] }),
    ).rejects.toMatchObject({ code: "execution_failed" });
  });
});
