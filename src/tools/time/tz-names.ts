/**
 * The time zone database's zone and link names (the IANA tz database, as shipped by the `tzdata` npm package,
 * which tracks each tz release — it changes a few times a year; update the pinned version to follow it, then run
 * `npm run gen:tz`).
 *
 * Why a shipped list rather than the runtime's: `Intl.supportedValuesOf("timeZone")` lists only ICU's canonical
 * zones (no links such as "US/Eastern" or "Asia/Kolkata" in older ICUs, and ICU's own legacy spellings), while
 * `Intl.DateTimeFormat` accepts names that are in neither list (abbreviations like "PST" or "IST", which it maps
 * silently to a zone of its choice). The tz database's own names — zones plus links — are the contract.
 */
// The names only, generated from the tzdata package (`npm run gen:tz`): loading the package itself parses 200 KB of
// JSON rules Toolhost never reads, on every call that validates a timezone.
import { TZ_DATABASE_VERSION, TZ_NAMES } from "./tz-names-data.js";

let names: Map<string, string> | undefined;

/** Lower-cased name → canonical spelling, for every zone and link of the tz database (built on first use). */
function table(): Map<string, string> {
  names ??= new Map(TZ_NAMES.map((name) => [name.toLowerCase(), name]));
  return names;
}

/** The tz database release the list comes from, e.g. "2026d". */
export function tzDatabaseVersion(): string {
  return TZ_DATABASE_VERSION;
}

/** The canonical spelling of a tz database zone or link name (case-insensitive match), or undefined. */
export function canonicalTzName(name: string): string | undefined {
  return table().get(name.toLowerCase());
}

/** Every zone and link name, sorted. */
export function tzNames(): string[] {
  return [...table().values()].sort();
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = current;
    }
  }
  return row[b.length]!;
}

/**
 * Up to `limit` tz names a caller probably meant by `input`: the zone the runtime would silently map it to (for an
 * abbreviation such as "PST"), names whose city part matches or contains it, then close spellings.
 */
export function suggestTzNames(input: string, limit = 3): string[] {
  const out: string[] = [];
  const add = (name: string | undefined) => {
    if (name && !out.includes(name) && canonicalTzName(name)) out.push(name);
  };
  try {
    add(canonicalTzName(new Intl.DateTimeFormat("en-US", { timeZone: input }).resolvedOptions().timeZone));
  } catch {
    // not a name the runtime knows either
  }
  const key = input.toLowerCase().replace(/[\s-]+/g, "_");
  const city = key.split("/").pop() ?? key;
  const all = tzNames();
  const lastPart = (n: string) => n.toLowerCase().split("/").pop() ?? "";
  for (const name of all) if (lastPart(name) === city) add(name);
  if (city.length >= 3) for (const name of all) if (lastPart(name).includes(city)) add(name);
  const scored = all
    .map((name) => ({ name, d: Math.min(distance(key, name.toLowerCase()), distance(city, lastPart(name))) }))
    // Close means fewer edits than the typed city has letters: a one-letter "X" is two edits from every
    // two-letter link ("GB", "NZ") and resembles none of them.
    .filter(({ d }) => d <= Math.max(2, Math.floor(city.length / 4)) && d < city.length)
    .sort((a, b) => a.d - b.d);
  for (const { name } of scored) add(name);
  return out.slice(0, limit);
}
