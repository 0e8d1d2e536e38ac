/**
 * Times on the DATABASE's clock, for what instances judge about each other (is that heartbeat stale?): instances
 * whose own clocks disagree still agree on it. `nowSql` (turn-lease-records.ts) gives milliseconds; this module the
 * ISO-8601 text (`2026-01-02T03:04:05.678Z`) that heartbeat columns hold, so text comparison orders them in time.
 */
import { type Kysely, type RawBuilder, sql } from "kysely";
import { dialectOf } from "./transaction.js";

/**
 * The SQL of the database's clock `agoMs` milliseconds ago (default: now; a negative value is ahead), as ISO-8601
 * text in UTC.
 */
export function isoNowSql(db: Kysely<any>, agoMs = 0): RawBuilder<string> {
  const seconds = agoMs / 1000;
  return dialectOf(db) === "postgres"
    ? sql<string>`to_char((clock_timestamp() - make_interval(secs => ${seconds}::float8)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
    : sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`${-seconds} seconds`})`;
}
