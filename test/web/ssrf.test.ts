/**
 * Hostile tests of web_fetch's SSRF guard: every payload is refused with access_denied and nothing reaches the
 * loopback counting server (no request, not even a TCP connection).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertNoSsrf } from "../../src/tools/web/ssrf.js";
import {
  mapResolver,
  rebindingResolver,
  startCountingServer,
  startServer,
  type TestServer,
  webRuntime,
} from "./servers.js";

let counting: TestServer;
let redirector: TestServer;
const P = () => counting.port;

beforeAll(async () => {
  counting = await startCountingServer();
  // The "public-looking" host public.test is this server (allowed by name); /to?u=<url> redirects to <url>.
  redirector = await startServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x").searchParams.get("u");
    if (u) {
      res.writeHead(Number(new URL(req.url ?? "/", "http://x").searchParams.get("s") ?? 302), { location: u });
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("public page");
  });
});

afterAll(async () => {
  await counting.close();
  await redirector.close();
});

const resolver = mapResolver({
  "public.test": ["127.0.0.1"],
  "private.test": ["127.0.0.1"],
  "ten.test": ["10.0.0.7"],
  "mixed.test": ["8.8.8.8", "127.0.0.1"],
  "mixed6.test": ["2001:4860:4860::8888", "::1"],
  "v6loop.test": ["::1"],
  "mapped.test": ["::ffff:127.0.0.1"],
  "nat64.test": ["64:ff9b::7f00:1"],
  "metadata.test": ["169.254.169.254"],
  "cgnat.test": ["100.64.1.1"],
  "ula.test": ["fd12:3456::1"],
  "zero.test": ["0.0.0.0"],
  "localhost.": ["127.0.0.1"],
  localhost: ["127.0.0.1"],
});

/** The issue's required spellings of loopback on the counting server's port. */
const issueCases = () => [
  `http://2130706433:${P()}/`,
  `http://0x7f000001:${P()}/`,
  `http://0177.0.0.1:${P()}/`,
  `http://017700000001:${P()}/`,
  `http://127.1:${P()}/`,
  `http://0.0.0.0:${P()}/`,
  `http://[::]:${P()}/`,
  `http://localhost.:${P()}/`,
  `http://LOCALHOST:${P()}/`,
];

/** Direct payloads: address spellings, ranges, names, schemes. */
const directCorpus = () => [
  ...issueCases(),
  `http://127.0.0.1:${P()}/secret`,
  `http://127.0.0.2:${P()}/`,
  `http://127.255.255.254:${P()}/`,
  `http://0x7f.1:${P()}/`,
  `http://0177.1:${P()}/`,
  `http://[::1]:${P()}/`,
  `http://[0:0:0:0:0:0:0:1]:${P()}/`,
  `http://[::ffff:127.0.0.1]:${P()}/`,
  `http://[::ffff:7f00:1]:${P()}/`,
  `http://[0:0:0:0:0:ffff:127.0.0.1]:${P()}/`,
  `http://[::127.0.0.1]:${P()}/`,
  `http://[64:ff9b::7f00:1]:${P()}/`,
  `http://[64:ff9b::127.0.0.1]:${P()}/`,
  `http://[2002:7f00:1::]:${P()}/`,
  `http://[::ffff:169.254.169.254]:${P()}/`,
  `http://[64:ff9b::a9fe:a9fe]:${P()}/`,
  `http://169.254.169.254:${P()}/latest/meta-data/`,
  `http://10.0.0.1:${P()}/`,
  `http://172.16.0.1:${P()}/`,
  `http://192.168.1.1:${P()}/`,
  `http://100.64.0.1:${P()}/`,
  `http://100.127.255.254:${P()}/`,
  `http://224.0.0.1:${P()}/`,
  `http://239.255.255.250:${P()}/`,
  `http://255.255.255.255:${P()}/`,
  `http://0.1.2.3:${P()}/`,
  `http://192.0.2.1:${P()}/`,
  `http://198.18.0.1:${P()}/`,
  `http://240.0.0.1:${P()}/`,
  `http://[fe80::1]:${P()}/`,
  `http://[fd00::1]:${P()}/`,
  `http://[fc00::1]:${P()}/`,
  `http://[fec0::1]:${P()}/`,
  `http://[ff02::1]:${P()}/`,
  `http://[2001::1]:${P()}/`,
  `http://[100::1]:${P()}/`,
  `http://[64:ff9b:1::1]:${P()}/`,
  `http://localhost:${P()}/`,
  `http://foo.localhost:${P()}/`,
  `http://a.b.localhost.:${P()}/`,
  `http://private.test:${P()}/`,
  `http://ten.test:${P()}/`,
  `http://mixed.test:${P()}/`,
  `http://mixed6.test:${P()}/`,
  `http://v6loop.test:${P()}/`,
  `http://mapped.test:${P()}/`,
  `http://nat64.test:${P()}/`,
  `http://metadata.test:${P()}/`,
  `http://cgnat.test:${P()}/`,
  `http://ula.test:${P()}/`,
  `http://zero.test:${P()}/`,
  `http://user:pass@public.test:${P()}/`,
  "file:///etc/passwd",
  `ftp://127.0.0.1:${P()}/`,
  `gopher://127.0.0.1:${P()}/_GET%20/`,
  `ws://127.0.0.1:${P()}/`,
  "data:text/plain,hello",
  "javascript:alert(1)",
  `dict://127.0.0.1:${P()}/`,
];

/** Redirect payloads: public.test (allowed by name) redirects to each target. */
const redirectTargets = () => [
  `http://127.0.0.1:${P()}/secret`,
  `http://169.254.169.254/latest/meta-data/iam/security-credentials/`,
  `http://2130706433:${P()}/secret`,
  `http://[::1]:${P()}/secret`,
  `http://[::ffff:127.0.0.1]:${P()}/secret`,
  `http://localhost:${P()}/secret`,
  `http://private.test:${P()}/secret`,
  `//127.0.0.1:${P()}/protocol-relative`,
  "file:///etc/passwd",
  `gopher://127.0.0.1:${P()}/`,
];

async function expectRefused(
  call: ReturnType<typeof webRuntime>["call"],
  url: string,
  settings: Record<string, unknown> = {},
) {
  const outcome = await call(
    "web_fetch",
    { url },
    { services: { webResolver: resolver }, settings: { timeoutSeconds: 5, ...settings } },
  );
  expect(outcome.ok, `${url} must be refused`).toBe(false);
  if (!outcome.ok) expect(outcome.error.code, `${url}: ${outcome.error.message}`).toBe("access_denied");
  return outcome;
}

describe("web_fetch SSRF guard", () => {
  it("refuses the issue's loopback spellings on the counting server's port, with zero requests", async () => {
    const { call } = webRuntime();
    for (const url of issueCases()) await expectRefused(call, url);
    expect(counting.requests).toEqual([]);
    expect(counting.connections).toBe(0);
  });

  it("refuses a corpus of more than 40 direct payloads, zero getting through", async () => {
    const { call } = webRuntime();
    const corpus = directCorpus();
    expect(corpus.length).toBeGreaterThanOrEqual(40);
    for (const url of corpus) await expectRefused(call, url);
    expect(counting.requests).toEqual([]);
    expect(counting.connections).toBe(0);
  });

  it("still refuses every odd spelling when only a name is allowed (allowedHosts does not open addresses)", async () => {
    const { call } = webRuntime();
    for (const url of issueCases()) await expectRefused(call, url, { allowedHosts: ["public.test"] });
    expect(counting.connections).toBe(0);
  });

  it("refuses redirects to internal targets at the hop; nothing reaches the target", async () => {
    const { call } = webRuntime();
    const origin = `http://public.test:${redirector.port}`;
    // Sanity: the allowed public-looking host itself is fetched.
    const ok = await call(
      "web_fetch",
      { url: `${origin}/` },
      { services: { webResolver: resolver }, settings: { allowedHosts: ["public.test"] } },
    );
    expect(ok.ok && (ok.result as { content: string }).content).toBe("public page");
    const before = redirector.requests.length;
    const targets = redirectTargets();
    for (const [i, target] of targets.entries()) {
      const status = [301, 302, 303, 307, 308][i % 5];
      const url = `${origin}/to?s=${status}&u=${encodeURIComponent(target)}`;
      const outcome = await expectRefused(call, url, { allowedHosts: ["public.test"] });
      if (!outcome.ok) expect(outcome.error.message).toMatch(/^Redirect from /);
    }
    expect(redirector.requests.length - before).toBe(targets.length);
    expect(counting.requests).toEqual([]);
    expect(counting.connections).toBe(0);
  });

  it("refuses a chain that turns internal after several public-looking hops", async () => {
    const { call } = webRuntime();
    const origin = `http://public.test:${redirector.port}`;
    const last = `${origin}/to?u=${encodeURIComponent(`http://0x7f000001:${P()}/secret`)}`;
    const middle = `${origin}/to?s=307&u=${encodeURIComponent(last)}`;
    await expectRefused(call, `${origin}/to?u=${encodeURIComponent(middle)}`, { allowedHosts: ["public.test"] });
    expect(counting.connections).toBe(0);
  });

  it("bounds the number of redirects", async () => {
    const { call } = webRuntime();
    const origin = `http://public.test:${redirector.port}`;
    let url = `${origin}/`;
    for (let i = 0; i < 4; i++) url = `${origin}/to?u=${encodeURIComponent(url)}`;
    const limited = await call(
      "web_fetch",
      { url },
      { services: { webResolver: resolver }, settings: { allowedHosts: ["public.test"], maxRedirects: 2 } },
    );
    expect(limited.ok).toBe(false);
    if (!limited.ok) expect(limited.error.message).toMatch(/Too many redirects/);
    const enough = await call(
      "web_fetch",
      { url },
      { services: { webResolver: resolver }, settings: { allowedHosts: ["public.test"], maxRedirects: 4 } },
    );
    expect(enough.ok && (enough.result as { url: string }).url).toBe(`${origin}/`);
  });

  it("checks every address a name resolves to, not only the first", async () => {
    await expect(assertNoSsrf("http://mixed.test/", { resolver })).rejects.toMatchObject({ code: "access_denied" });
    await expect(assertNoSsrf("http://mixed6.test/", { resolver })).rejects.toMatchObject({ code: "access_denied" });
  });

  it("defeats DNS rebinding: the connection uses the checked address, with one lookup", async () => {
    // A benign server on 127.0.0.2 stands in for the "public" first answer (admitted by an address entry of
    // allowedHosts); the counting server listens on 127.0.0.1 at the same port, where a second lookup would lead.
    const benign = await startServer(
      (_req, res) => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("benign");
      },
      { host: "127.0.0.2" },
    );
    const secret = await startCountingServer({ port: benign.port });
    try {
      const rebind = rebindingResolver(["127.0.0.2"], ["127.0.0.1"]);
      const { call } = webRuntime();
      const outcome = await call(
        "web_fetch",
        { url: `http://rebind.test:${benign.port}/` },
        { services: { webResolver: rebind }, settings: { allowedHosts: ["127.0.0.2"] } },
      );
      expect(outcome.ok && (outcome.result as { content: string }).content).toBe("benign");
      expect(rebind.calls).toEqual(["rebind.test"]);
      expect(secret.connections).toBe(0);
      // The same resolver now answers 127.0.0.1: the next fetch is refused by the check.
      const second = await call(
        "web_fetch",
        { url: `http://rebind.test:${benign.port}/` },
        { services: { webResolver: rebind }, settings: { allowedHosts: ["127.0.0.2"] } },
      );
      expect(second.ok).toBe(false);
      if (!second.ok) expect(second.error.code).toBe("access_denied");
      expect(secret.connections).toBe(0);
    } finally {
      await benign.close();
      await secret.close();
    }
  });

  it("refuses a rebinding resolver whose later answer is loopback on a redirect hop to the same name", async () => {
    const rebind = rebindingResolver(["127.0.0.2"], ["127.0.0.1"]);
    const first = await assertNoSsrf("http://rebind.test/", { resolver: rebind, allowedHosts: ["127.0.0.2"] });
    expect(first.addresses).toEqual(["127.0.0.2"]);
    await expect(
      assertNoSsrf("http://rebind.test/", { resolver: rebind, allowedHosts: ["127.0.0.2"] }),
    ).rejects.toMatchObject({ code: "access_denied" });
    // And one whose first answer is private is refused on that first (and only) lookup.
    const early = rebindingResolver(["127.0.0.1"], ["8.8.8.8"]);
    await expect(assertNoSsrf("http://early.test/", { resolver: early })).rejects.toMatchObject({
      code: "access_denied",
    });
    expect(early.calls).toHaveLength(1);
  });

  it("lets a public-looking name resolve to a public address through the check (no connection made)", async () => {
    const checked = await assertNoSsrf("https://Example.COM./path", {
      resolver: mapResolver({ "example.com": ["93.184.215.14"] }),
    });
    expect(checked.host).toBe("example.com");
    expect(checked.addresses).toEqual(["93.184.215.14"]);
    expect(checked.allowedByList).toBe(false);
  });
});

// A host approval rule is matched on the URL the call names; a redirect must not carry a fetch past a rule that would
// deny (or ask about) its target, or a deny rule is one redirector away from nothing.
describe("approval rules of web_fetch hold on redirect hops", () => {
  it("refuses a redirect to a host a deny or ask rule names; nothing reaches it", async () => {
    const { call } = webRuntime();
    const names = mapResolver({ "public.test": ["127.0.0.1"], "blocked.test": ["127.0.0.1"] });
    const origin = `http://public.test:${redirector.port}`;
    for (const decision of ["deny", "ask"]) {
      const outcome = await call(
        "web_fetch",
        { url: `${origin}/to?u=${encodeURIComponent(`http://blocked.test:${P()}/secret`)}` },
        {
          services: { webResolver: names },
          settings: {
            allowedHosts: ["public.test", "blocked.test"],
            approvalRules: [{ decision, match: "blocked.test" }],
          },
        },
      );
      expect(outcome, decision).toMatchObject({
        ok: false,
        error: { code: "access_denied", details: { rule: "approval" } },
      });
      if (!outcome.ok) expect(outcome.error.message).toMatch(/blocked\.test/);
    }
    expect(counting.requests).toEqual([]);
    expect(counting.connections).toBe(0);
  });
});
