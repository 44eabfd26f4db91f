/**
 * Durations as a job dashboard shows them: "1.5h", "2m", "45s". Parsing and the short
 * unit names come from `ms`; the rounding rule is ours.
 */
import ms from "ms";

/** Milliseconds in a duration written like "90s", "1.5h" or "2 days". */
export function parse(text: string): number {
  const value = ms(text as ms.StringValue);
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`not a duration: ${JSON.stringify(text)}`);
  }
  return value;
}

/** The total of several durations, shown with the largest unit that fits. */
export function total(texts: readonly string[]): string {
  let sum = 0;
  for (const t of texts) sum += parse(t);
  return ms(Math.round(sum / 1000));
}
