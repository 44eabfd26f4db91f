/**
 * A request rate as an operator writes it: `20/s`, `600/m`, `20/s,burst=40`, or `off`.
 * Must never: accept a rate without its unit, or a zero/negative/absurd number (errors
 * say what was expected).
 */

/** `perSecond` requests a second, `burst` at once. */
export interface ParsedRate {
  perSecond: number;
  burst: number;
}

const RATE_RE = /^(\d{1,7}(?:\.\d{1,6})?)\/(s|m)(?:,burst=(\d{1,7}))?$/;

/** The rate, undefined for `off` (or empty), or an error message. */
export function parseRate(text: string): ParsedRate | undefined | string {
  const t = text.trim();
  if (t === "" || t === "off") return undefined;
  const m = RATE_RE.exec(t);
  if (m === null)
    return `${JSON.stringify(text.slice(0, 40))} is not a rate: expected N/s or N/m, optionally ",burst=B" (20/s, 600/m, 20/s,burst=40), or off`;
  const n = Number(m[1]);
  const perSecond = m[2] === "m" ? n / 60 : n;
  if (!(perSecond > 0) || perSecond > 1_000_000)
    return `${JSON.stringify(t)}: the rate must be above 0 and at most 1000000/s`;
  const burst = m[3] === undefined ? Math.max(1, Math.ceil(perSecond)) : Number(m[3]);
  if (burst < 1 || burst > 1_000_000)
    return `${JSON.stringify(t)}: burst must be between 1 and 1000000`;
  return { perSecond, burst };
}
