/**
 * Durations as operators write them in flags and YAML: `90s`, `15m`, `24h`, `7d`, `2w`
 * (one number and one unit; `ms` too). Must never: accept a bare number (is `30` seconds or
 * days?), a negative or fractional count of milliseconds, or a value past 100 years.
 */
const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};
const MAX_MS = 100 * 365 * 86_400_000;

/** Milliseconds of `text`, or an error message naming what is wrong (never throws). */
export function parseDuration(text: string): number | string {
  const m = /^([0-9]{1,12}(?:\.[0-9]{1,6})?)(ms|s|m|h|d|w)$/.exec(text.trim());
  if (m === null) return "must be a number and a unit (ms, s, m, h, d or w), e.g. 7d or 90m";
  const ms = Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  if (!Number.isInteger(ms)) return "must be a whole number of milliseconds";
  if (ms <= 0) return "must be more than 0";
  if (ms > MAX_MS) return "must be at most 100 years";
  return ms;
}
