/** Address classification and allowedHosts matching used by the SSRF guard. */
import { describe, expect, it } from "vitest";
import { addressInRange, classifyAddress, sameAddress } from "../../src/tools/web/address.js";
import { assertNoSsrf, hostIsAllowed } from "../../src/tools/web/ssrf.js";

describe("classifyAddress", () => {
  it("accepts only public unicast addresses", () => {
    for (const ok of [
      "8.8.8.8",
      "93.184.215.14",
      "1.1.1.1",
      "2001:4860:4860::8888",
      "2606:4700::1111",
      "[2a00:1450::1]",
    ]) {
      expect(classifyAddress(ok).public, ok).toBe(true);
    }
  });

  it("refuses every special-purpose range and embedded IPv4 forms of them", () => {
    const cases: Record<string, string> = {
      "127.0.0.1": "loopback",
      "10.1.2.3": "private",
      "172.31.255.255": "private",
      "192.168.0.1": "private",
      "169.254.169.254": "linkLocal",
      "100.64.0.1": "carrierGradeNat",
      "0.0.0.0": "unspecified",
      "224.0.0.251": "multicast",
      "255.255.255.255": "broadcast",
      "192.0.2.10": "reserved",
      "::": "unspecified",
      "::1": "loopback",
      "fe80::1": "linkLocal",
      "fd00::1": "uniqueLocal",
      "ff02::1": "multicast",
      "::ffff:10.0.0.1": "private",
      "::ffff:169.254.169.254": "linkLocal",
      "::7f00:1": "ipv4Compatible",
      "64:ff9b::7f00:1": "loopback",
      "64:ff9b::a00:1": "private",
      "2002:a9fe:a9fe::": "linkLocal",
      "2001::1": "teredo",
      "3fff::1": "reserved",
      "4000::1": "notGlobalUnicast",
      "fe80::1%eth0": "linkLocal",
      "0x7f000001": "invalid",
      "127.1": "invalid",
    };
    for (const [address, range] of Object.entries(cases)) {
      const verdict = classifyAddress(address);
      expect(verdict.public, address).toBe(false);
      expect(verdict.range, address).toBe(range);
      expect(verdict.reason, address).toBeTruthy();
    }
  });

  it("judges NAT64 and 6to4 forms by their embedded public address", () => {
    expect(classifyAddress("64:ff9b::808:808").public).toBe(true);
    expect(classifyAddress("2002:808:808::1").public).toBe(true);
  });

  it("compares and matches addresses across IPv4-mapped forms", () => {
    expect(sameAddress("127.0.0.1", "::ffff:127.0.0.1")).toBe(true);
    expect(sameAddress("127.0.0.1", "127.0.0.2")).toBe(false);
    expect(addressInRange("10.9.8.7", "10.0.0.0/8")).toBe(true);
    expect(addressInRange("::ffff:10.9.8.7", "10.0.0.0/8")).toBe(true);
    expect(addressInRange("11.0.0.1", "10.0.0.0/8")).toBe(false);
    expect(addressInRange("fd00::5", "fd00::/8")).toBe(true);
    expect(addressInRange("10.0.0.1", "not-a-cidr/8")).toBe(false);
  });
});

describe("allowedHosts", () => {
  it("matches exact names, *.suffix patterns and address entries, case- and trailing-dot-insensitively", () => {
    const list = ["Intranet.Example", "*.corp.example", "10.0.0.0/8", "[::1]"];
    expect(hostIsAllowed("intranet.example.", list)).toBe(true);
    expect(hostIsAllowed("wiki.corp.example", list)).toBe(true);
    expect(hostIsAllowed("corp.example", list)).toBe(false);
    expect(hostIsAllowed("evilcorp.example", list)).toBe(false);
    expect(hostIsAllowed("10.2.3.4", list)).toBe(true);
    expect(hostIsAllowed("::1", list)).toBe(true);
    expect(hostIsAllowed("intranet.example.evil.test", list)).toBe(false);
  });

  it("admits a private address only through the list", async () => {
    const resolver = async () => ["10.1.1.1"];
    await expect(assertNoSsrf("http://wiki.test/", { resolver })).rejects.toMatchObject({ code: "access_denied" });
    await expect(assertNoSsrf("http://wiki.test/", { resolver, allowedHosts: ["wiki.test"] })).resolves.toMatchObject({
      addresses: ["10.1.1.1"],
      allowedByList: true,
    });
    await expect(assertNoSsrf("http://wiki.test/", { resolver, allowedHosts: ["10.1.0.0/16"] })).resolves.toMatchObject(
      {
        allowedByList: true,
      },
    );
    await expect(assertNoSsrf("http://other.test/", { resolver, allowedHosts: ["wiki.test"] })).rejects.toMatchObject({
      code: "access_denied",
    });
  });

  it("reports an unresolvable name as an execution failure, not a refusal", async () => {
    const resolver = async () => {
      throw Object.assign(new Error("nope"), { code: "ENOTFOUND" });
    };
    await expect(assertNoSsrf("http://nowhere.test/", { resolver })).rejects.toMatchObject({
      code: "execution_failed",
    });
    await expect(assertNoSsrf("not a url", { resolver })).rejects.toMatchObject({ code: "validation_failed" });
  });
});
