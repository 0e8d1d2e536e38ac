/**
 * The time bounds of an audit listing (`since`, `until`), as the CLI and the HTTP API both take them: an ISO-8601
 * time, or a duration ago (`15m`, `2h`, `7d`; units s, m, h, d).
 */

/** What a time bound may be, for error messages. */
export const TIME_BOUND_RULE = "an ISO-8601 time (e.g. 2026-12-01T10:00:00Z) or a duration ago like 15m, 2h, 7d";

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * The ISO-8601 time `value` names (a duration counts back from `now`, ms since the epoch), or undefined when it is
 * neither form.
 */
export function parseTimeBound(value: string, now = Date.now()): string | undefined {
  const relative = /^(\d+)\s*([smhd])$/.exec(value.trim());
  if (relative) {
    const ms = now - Number(relative[1]) * UNIT_MS[relative[2] as keyof typeof UNIT_MS];
    return Number.isFinite(ms) && Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : undefined;
  }
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}
