import { createRequire } from "node:module";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TZ_DATABASE_VERSION, TZ_NAMES } from "../../src/tools/time/tz-names-data.js";
import { memoryRuntime } from "../helpers/runtime.js";

const call = (args: unknown) => memoryRuntime().runtime.executeTool("get_current_datetime", args, { userId: "u" });

describe("get_current_datetime with a frozen clock", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each([
    ["Etc/GMT+3", "2025-01-15T09:00:00-03:00", "-03:00"],
    ["Etc/GMT-14", "2025-01-16T02:00:00+14:00", "+14:00"],
    ["America/Sao_Paulo", "2025-01-15T09:00:00-03:00", "-03:00"],
    ["Asia/Kathmandu", "2025-01-15T17:45:00+05:45", "+05:45"],
    ["UTC", "2025-01-15T12:00:00+00:00", "+00:00"],
  ])("at 2025-01-15T12:00:00Z, %s is %s", async (timezone, local, offset) => {
    vi.setSystemTime(new Date("2025-01-15T12:00:00Z"));
    const outcome = await call({ timezone });
    expect(outcome).toMatchObject({ ok: true, result: { timezone, local, offset, utc: "2025-01-15T12:00:00.000Z" } });
  });

  it("localizes in Portuguese for pt-BR", async () => {
    vi.setSystemTime(new Date("2020-06-05T15:00:00Z"));
    const outcome = await call({ timezone: "America/Sao_Paulo", locale: "pt-BR" });
    expect(outcome.ok).toBe(true);
    const result = (outcome as { result: { localized: string; weekday: string } }).result;
    expect(result.localized).toContain("sexta-feira");
    expect(result.localized).toContain("5 de junho de 2020");
    expect(result.weekday).toBe("sexta-feira");
  });

  it("defaults to UTC and en-US", async () => {
    vi.setSystemTime(new Date("2025-01-15T12:00:00Z"));
    expect(await call({})).toMatchObject({ ok: true, result: { timezone: "UTC", locale: "en-US", offset: "+00:00" } });
    expect(await call({ timezone: null, locale: null })).toMatchObject({ ok: true, result: { timezone: "UTC" } });
  });
});

describe("get_current_datetime validation", () => {
  it.each([
    [{ timezone: "Mars/Olympus" }, "timezone", /Mars\/Olympus/],
    [{ timezone: "GMT+3" }, "timezone", /not an IANA timezone/],
    [{ timezone: "+05:00" }, "timezone", /not an IANA timezone/],
    [{ timezone: "" }, "timezone", /must not be empty\. Send a tz database name/],
    [{ timezone: "   " }, "timezone", /must not be empty/],
    [{ timezone: "Europe/".repeat(100_000) }, "timezone", /700000 characters long; tz database names are at most 64/],
    [{ locale: "zz-ZZ" }, "locale", /not supported.*fall back/],
    [{ locale: "pt_BR" }, "locale", /not a BCP 47 language tag/],
    [{ timezone: 42 }, "timezone", /must be string/],
    [{ locale: ["pt-BR"] }, "locale", /must be string/],
  ])("%j is validation_failed naming %s", async (args, argument, message) => {
    const outcome = await call(args);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error.code).toBe("validation_failed");
      expect(outcome.error.details).toMatchObject({ argument });
      expect(outcome.error.message).toMatch(message);
    }
  });
});

describe("get_current_datetime settings", () => {
  it("refuses an invalid default timezone or locale when saved", async () => {
    const { normalizeToolParameters } = await import("../../src/core/settings-policy.js");
    const { getCurrentDatetimeTool } = await import("../../src/tools/builtin/get-current-datetime.js");
    expect(() => normalizeToolParameters(getCurrentDatetimeTool, { defaultTimezone: "Mars/Olympus" })).toThrow(
      /"defaultTimezone".*not a zone or link name of the tz database/,
    );
    expect(() => normalizeToolParameters(getCurrentDatetimeTool, { defaultLocale: "pt_BR" })).toThrow(
      /"defaultLocale".*BCP 47/,
    );
    expect(
      normalizeToolParameters(getCurrentDatetimeTool, { defaultTimezone: "Asia/Tokyo", defaultLocale: "pt-BR" }),
    ).toEqual({
      defaultTimezone: "Asia/Tokyo",
      defaultLocale: "pt-BR",
    });
  });
});

describe("get_current_datetime: tz database names", () => {
  it("refuses abbreviations Intl would silently map, suggesting the zone it would have picked", async () => {
    for (const [input, expected] of [
      ["PST", "America/Los_Angeles"],
      ["JST", "Asia/Tokyo"],
    ] as const) {
      const outcome = await call({ timezone: input });
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) {
        expect(outcome.error.code).toBe("validation_failed");
        expect(outcome.error.message).toMatch(/is not a zone or link name of the tz database \(release \d{4}[a-z]\)/);
        expect(outcome.error.details?.suggestions).toContain(expected);
        expect(outcome.error.message).toContain(`Did you mean "${expected}"`);
      }
    }
  });

  it("accepts links and any letter case, answering with the tz database's spelling", async () => {
    expect(await call({ timezone: "US/Eastern" })).toMatchObject({ ok: true, result: { timezone: "US/Eastern" } });
    expect(await call({ timezone: "Asia/Kolkata" })).toMatchObject({ ok: true, result: { offset: "+05:30" } });
    expect(await call({ timezone: "america/sao_paulo" })).toMatchObject({
      ok: true,
      result: { timezone: "America/Sao_Paulo" },
    });
  });

  it("suggests likely zones for a typo or a bare city", async () => {
    const typo = await call({ timezone: "Europe/Pari" });
    expect(!typo.ok && typo.error.details?.suggestions).toContain("Europe/Paris");
    const city = await call({ timezone: "Kathmandu" });
    expect(!city.ok && city.error.details?.suggestions).toContain("Asia/Kathmandu");
  });

  it("suggests nothing rather than unrelated zones when the city part is too short to resemble one", async () => {
    // A one-letter city is within two edits of every two-letter link ("GB", "NZ"), none of them a likely meaning.
    const outcome = await call({ timezone: "Mars/X" });
    expect(outcome.ok).toBe(false);
    expect(!outcome.ok && outcome.error.details?.suggestions).toBeUndefined();
    expect(!outcome.ok && outcome.error.message).not.toContain("Did you mean");
    const short = await call({ timezone: "Europe/Rom" });
    expect(!short.ok && short.error.details?.suggestions).toContain("Europe/Rome");
  });
});

describe("tz database names", () => {
  it("are the pinned tzdata package's zone and link names and release (run `npm run gen:tz` after updating it)", () => {
    const data = createRequire(import.meta.url)("tzdata") as { version: string; zones: Record<string, unknown> };
    expect(TZ_DATABASE_VERSION).toBe(data.version);
    expect(TZ_NAMES).toEqual(Object.keys(data.zones));
  });
});
