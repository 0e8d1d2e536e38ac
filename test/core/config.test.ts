/**
 * The configuration reader: every TOOLHOST_* variable's shape, default and error message, stated once.
 */
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, ConfigError, DEFAULT_MAX_BODY_BYTES, readConfig } from "../../src/core/config.js";

describe("readConfig", () => {
  it("gives the defaults for an empty environment (and treats empty values as unset)", () => {
    const config = readConfig({ TOOLHOST_PORT: "", TOOLHOST_DATA_DIR: "  " });
    expect(config).toMatchObject({
      dataDir: undefined,
      databaseUrl: undefined,
      chatRoots: null,
      maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
      validateResponses: false,
      traceContent: false,
      logLevel: "warn",
      port: "8787",
      host: "127.0.0.1",
      mcpAllowedHosts: undefined,
    });
    expect([...config.adminUsers]).toEqual(["local"]);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("parses each variable into its unit", () => {
    const config = readConfig({
      TOOLHOST_DATA_DIR: "/srv/th",
      TOOLHOST_ADMIN_USERS: " ana, ,bo ",
      TOOLHOST_CHAT_ROOTS: "/srv/work/{user}::/tmp/x",
      TOOLHOST_CHAT_MAX_ITERATIONS: "12",
      TOOLHOST_APPROVAL_TIMEOUT_SECONDS: "1.5",
      TOOLHOST_APPROVAL_STALE_MS: "0",
      TOOLHOST_MAX_BODY_BYTES: "1024",
      TOOLHOST_MCP_ALLOWED_HOSTS: "Tools.Example.com, *",
      TOOLHOST_OTEL_CAPTURE_CONTENT: "TRUE",
      TOOLHOST_SPILL_TTL_DAYS: "2",
      TOOLHOST_SPILL_QUOTA_MB: "3",
      TOOLHOST_PORT: " 0 ",
    });
    expect(config).toMatchObject({
      dataDir: "/srv/th",
      chatRoots: ["/srv/work/{user}", "/tmp/x"],
      chatMaxIterations: 12,
      approvalTimeoutMs: 1500,
      approvalStaleMs: 0,
      maxBodyBytes: 1024,
      mcpAllowedHosts: ["tools.example.com", "*"],
      traceContent: true,
      spillTtlMs: 2 * 24 * 60 * 60 * 1000,
      spillQuotaBytes: 3 * 1024 * 1024,
      port: "0",
    });
    expect([...config.adminUsers]).toEqual(["ana", "bo"]);
    // Set but empty: no admins at all (a deliberate choice doctor warns about), unlike unset.
    expect([...readConfig({ TOOLHOST_ADMIN_USERS: "" }).adminUsers]).toEqual([]);
  });

  it.each([
    ["TOOLHOST_MAX_BODY_BYTES", "lots", /TOOLHOST_MAX_BODY_BYTES must be a positive number of bytes; got "lots"/],
    ["TOOLHOST_MAX_BODY_BYTES", "0", /positive number of bytes/],
    ["TOOLHOST_CHAT_MAX_ITERATIONS", "2.5", /TOOLHOST_CHAT_MAX_ITERATIONS must be a positive integer/],
    ["TOOLHOST_APPROVAL_TIMEOUT_SECONDS", "-1", /TOOLHOST_APPROVAL_TIMEOUT_SECONDS must be positive seconds/],
    ["TOOLHOST_APPROVAL_STALE_MS", "soon", /TOOLHOST_APPROVAL_STALE_MS must be milliseconds/],
    ["TOOLHOST_SPILL_QUOTA_MB", "Infinity", /TOOLHOST_SPILL_QUOTA_MB must be a positive number of MiB/],
    ["TOOLHOST_PORT", "abc", /TOOLHOST_PORT must be a port number from 0 to 65535; got "abc"/],
    ["TOOLHOST_PORT", "99999", /TOOLHOST_PORT must be a port number from 0 to 65535/],
    ["TOOLHOST_PORT", "1.5", /TOOLHOST_PORT must be a port number from 0 to 65535/],
    // Past what a timer holds, a lease's renewal or a deadline would fire every millisecond.
    ["TOOLHOST_TURN_LEASE_MS", "99999999999", /TOOLHOST_TURN_LEASE_MS must be .* at most 3600000/],
    ["TOOLHOST_BODY_TIMEOUT_SECONDS", "10000000", /TOOLHOST_BODY_TIMEOUT_SECONDS must be .* at most 3600/],
    ["TOOLHOST_HEADERS_TIMEOUT_SECONDS", "1e9", /TOOLHOST_HEADERS_TIMEOUT_SECONDS must be .* at most 3600/],
  ])("a malformed %s=%s is a ConfigError naming it, never a silent default", (name, value, message) => {
    let error: unknown;
    try {
      readConfig({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(name);
    expect((error as ConfigError).code).toBe("invalid_config");
    expect((error as Error).message).toMatch(message);
  });

  it("names every variable the project documents, each once", () => {
    const names = Object.values(CONFIG_VARIABLES);
    expect(new Set(names).size).toBe(names.length);
    expect(names.every((n) => n.startsWith("TOOLHOST_"))).toBe(true);
  });
});
