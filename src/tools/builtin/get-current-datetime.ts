/**
 * get_current_datetime: the current date and time in a requested IANA timezone and BCP 47 locale, formatted with
 * Intl.DateTimeFormat. Returns ISO UTC, the local ISO time with its offset, a localized string and the UTC offset.
 *
 * Validation is explicit, because "the Intl constructor did not throw" is not validation: Intl silently falls
 * back to another language for a locale it does not support, and accepts names that are not tz database zones
 * or links (abbreviations such as "PST", offsets in some versions) by mapping them to a zone of its choice.
 * Timezones are checked against the tz database's own zone and link names instead.
 */
import { quote, ToolArgumentError } from "../../core/errors.js";
import { defineTool, stringSetting } from "../../core/settings-declaration.js";
import type { RegisteredTool, ToolParameterDescriptor } from "../../core/types.js";
import { canonicalTzName, suggestTzNames, tzDatabaseVersion } from "../time/tz-names.js";

/** Result of get_current_datetime. */
export interface CurrentDatetimeResult {
  /** Canonical IANA timezone name, e.g. "America/Sao_Paulo". */
  timezone: string;
  /** Canonical BCP 47 locale used for `localized`. */
  locale: string;
  /** The instant in ISO 8601 UTC, e.g. "2025-01-15T12:00:00.000Z". */
  utc: string;
  /** Wall-clock time in the timezone, ISO 8601 with its offset, e.g. "2025-01-15T09:00:00-03:00". */
  local: string;
  /** Human-readable date and time in the locale, e.g. "sexta-feira, 5 de junho de 2020 às 12:00:00 BRT". */
  localized: string;
  /** UTC offset as ±HH:MM, e.g. "+05:45". */
  offset: string;
  /** Weekday in the locale, e.g. "sexta-feira". */
  weekday: string;
  /** Milliseconds since the Unix epoch. */
  epochMs: number;
}

/** Longest timezone argument looked up (the longest tz database name has 32 characters). */
const MAX_TIMEZONE_CHARS = 64;

/**
 * Validates a timezone against the tz database's zone and link names (src/tools/time/tz-names.ts) and returns its
 * canonical spelling (matched case-insensitively). Throws ToolArgumentError naming it and suggesting likely zones
 * when it is not a tz name (abbreviations such as "PST" or "IST", offsets such as "GMT+3", typos), or when this
 * runtime's ICU does not know a zone newer than itself. An empty name (rule non_empty) or one longer than any tz
 * name gets no suggestions.
 */
export function validateTimezone(timezone: string, argument = "timezone"): string {
  if (timezone.trim() === "") {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": must not be empty. Send a tz database name such as "America/Sao_Paulo", "Europe/Berlin" or "UTC"${argument === "timezone" ? ", or leave timezone out to use the default" : ""}.`,
      { argument, rule: "non_empty" },
    );
  }
  if (timezone.length > MAX_TIMEZONE_CHARS) {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": ${quote(timezone, 60)} is ${timezone.length} characters long; tz database names are at most ${MAX_TIMEZONE_CHARS}. Send a name such as "America/Sao_Paulo", "Europe/Berlin" or "UTC".`,
      { argument, rule: "iana_timezone" },
    );
  }
  const fail = (why: string): never => {
    const suggestions = suggestTzNames(timezone);
    throw new ToolArgumentError(
      `Invalid argument "${argument}": ${JSON.stringify(timezone)} ${why}. ${
        suggestions.length > 0 ? `Did you mean ${suggestions.map((s) => JSON.stringify(s)).join(" or ")}? ` : ""
      }Send a tz database name such as "America/Sao_Paulo", "Europe/Berlin" or "UTC".`,
      { argument, rule: "iana_timezone", ...(suggestions.length > 0 ? { suggestions } : {}) },
    );
  };
  const canonical = canonicalTzName(timezone.trim());
  if (!canonical) {
    return fail(
      /^(GMT|UTC)?[+-]\d/i.test(timezone)
        ? "is not an IANA timezone name (offsets are not zones)"
        : `is not a zone or link name of the tz database (release ${tzDatabaseVersion()})`,
    );
  }
  // Every runtime knows UTC (ECMA-402 requires it); skipping the check for it keeps the first use of Intl, ~15 ms of
  // loading ICU's zone data, out of every process that only declares the default timezone.
  if (canonical === "UTC") return canonical;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: canonical });
  } catch {
    return fail(`is a tz database name this runtime's ICU does not know yet (update Node.js)`);
  }
  return canonical;
}

/** Validates a BCP 47 locale that this runtime can format; returns its canonical form; throws ToolArgumentError. */
export function validateLocale(locale: string, argument = "locale"): string {
  // Every ICU build Node.js ships has English (small-icu has only English): "en-US", the default, needs no lookup,
  // which would load ICU's locale data into every process that only declares the default.
  if (locale === "en-US") return locale;
  let canonical: string | undefined;
  try {
    canonical = Intl.getCanonicalLocales(locale)[0];
  } catch {
    canonical = undefined;
  }
  if (!canonical) {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": ${quote(locale)} is not a BCP 47 language tag. Use a tag such as "pt-BR" or "en-US" (hyphen, not underscore).`,
      { argument, rule: "bcp47_locale" },
    );
  }
  if (Intl.DateTimeFormat.supportedLocalesOf([canonical]).length === 0) {
    throw new ToolArgumentError(
      `Invalid argument "${argument}": locale ${quote(locale)} is not supported for date formatting here, so it would silently fall back to another language. Use a supported locale such as "pt-BR", "de-DE" or "en-US".`,
      { argument, rule: "supported_locale" },
    );
  }
  return canonical;
}

function offsetOf(date: Date, timeZone: string): string {
  const name = new Intl.DateTimeFormat("en-US", { timeZone, timeZoneName: "longOffset" })
    .formatToParts(date)
    .find((p) => p.type === "timeZoneName")?.value;
  const match = /^GMT([+-]\d{2}):?(\d{2})?$/.exec(name ?? "");
  return match ? `${match[1]}:${match[2] ?? "00"}` : "+00:00";
}

function localIso(date: Date, timeZone: string, offset: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-US", {
      timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
    })
      .formatToParts(date)
      .map((p) => [p.type, p.value]),
  );
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${offset}`;
}

/** Formats `date` for a validated timezone and locale. */
export function describeInstant(date: Date, timeZone: string, locale: string): CurrentDatetimeResult {
  const offset = offsetOf(date, timeZone);
  return {
    timezone: timeZone,
    locale,
    utc: date.toISOString(),
    local: localIso(date, timeZone, offset),
    localized: new Intl.DateTimeFormat(locale, { dateStyle: "full", timeStyle: "long", timeZone }).format(date),
    offset,
    weekday: new Intl.DateTimeFormat(locale, { weekday: "long", timeZone }).format(date),
    epochMs: date.getTime(),
  };
}

/** Runs a validator for its verdict only: the rule it broke, or undefined. */
function ruleBroken(check: () => unknown): string | undefined {
  try {
    check();
    return undefined;
  } catch (error) {
    return (error as Error).message.replace(/^Invalid argument "[^"]+": /, "").replace(/\.$/, "");
  }
}

const DEFAULT_TIMEZONE: ToolParameterDescriptor = {
  name: "defaultTimezone",
  type: "string",
  description: "IANA timezone used when the model gives none.",
  default: "UTC",
  validate: (value) => ruleBroken(() => validateTimezone(value as string, "defaultTimezone")),
};

const DEFAULT_LOCALE: ToolParameterDescriptor = {
  name: "defaultLocale",
  type: "string",
  description: "BCP 47 locale used when the model gives none.",
  default: "en-US",
  validate: (value) => ruleBroken(() => validateLocale(value as string, "defaultLocale")),
};

const parameterDescriptors: ToolParameterDescriptor[] = [DEFAULT_TIMEZONE, DEFAULT_LOCALE];

export const getCurrentDatetimeTool: RegisteredTool = defineTool({
  // Approval: allowed by default (nothing a rule could match).
  approval: { default: "allow" },
  definition: {
    name: "get_current_datetime",
    description:
      "Returns the current date and time in a timezone and locale: ISO UTC, local ISO time with UTC offset, and a localized text.",
    parameters: {
      type: "object",
      properties: {
        timezone: { type: "string", description: "IANA timezone name, e.g. America/Sao_Paulo. Default: UTC." },
        locale: { type: "string", description: "BCP 47 locale for the localized text, e.g. pt-BR. Default: en-US." },
      },
      required: [],
    },
  },
  settings: {
    title: "Current date and time",
    description: "Lets the model know the current date and time in any timezone.",
    category: "system",
    annotations: { readOnlyHint: true },
    enabledByDefault: true,
    canDisable: true,
    parameterDescriptors,
  },
  outputSchema: {
    type: "object",
    properties: {
      timezone: { type: "string" },
      locale: { type: "string" },
      utc: { type: "string" },
      local: { type: "string" },
      localized: { type: "string" },
      offset: { type: "string" },
      weekday: { type: "string" },
      epochMs: { type: "integer" },
    },
    required: ["timezone", "locale", "utc", "local", "localized", "offset", "weekday", "epochMs"],
  },
  async execute(args, context) {
    const { timezone, locale } = args as { timezone?: string; locale?: string };
    const zone = validateTimezone(
      timezone ?? stringSetting(context.settings.values, DEFAULT_TIMEZONE),
      timezone === undefined ? "defaultTimezone" : "timezone",
    );
    const tag = validateLocale(
      locale ?? stringSetting(context.settings.values, DEFAULT_LOCALE),
      locale === undefined ? "defaultLocale" : "locale",
    );
    return describeInstant(new Date(), zone, tag);
  },
});
