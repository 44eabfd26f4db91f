/**
 * Spans of text to redact: merging the hits of every rule, replacing them, and choosing
 * where a live stream may cut its buffer without splitting a hit.
 *
 * Pure functions on positions; they must never decide what is secret (the rules do).
 */

export const REDACTED = "[REDACTED]";

/**
 * Which holds a scan computes: "none" for a whole text (its last line is complete); for a
 * live stream's buffer, "dumps" (hex dumps that may still be printing a value) or "all"
 * (literal forms too: needed when a cut may come closer to the end than the longest form).
 */
export type Holds = "none" | "dumps" | "all";

/** A stretch of raw text to replace. */
export interface Span {
  /** First character replaced. */
  start: number;
  /** After the last character replaced. */
  end: number;
  /** Where the match that found it begins (a key's name comes before the value it hides). */
  from: number;
  /** The match reaches the end of the text and could grow with more text. */
  open: boolean;
}

/** Sorted and merged (in place: the spans are the scan's own): overlapping or touching become one. */
export function merge(spans: Span[]): Span[] {
  if (spans.length <= 1) return spans;
  let sorted = true;
  for (let i = 1; i < spans.length && sorted; i++) {
    sorted = (spans[i - 1] as Span).start <= (spans[i] as Span).start;
  }
  if (!sorted) spans.sort((a, b) => a.start - b.start || b.end - a.end);
  let w = 0;
  for (let i = 1; i < spans.length; i++) {
    const cur = spans[w] as Span;
    const s = spans[i] as Span;
    if (s.start <= cur.end) {
      if (s.end > cur.end) cur.end = s.end;
      if (s.from < cur.from) cur.from = s.from;
      cur.open = cur.open || s.open;
    } else {
      w += 1;
      spans[w] = s;
    }
  }
  spans.length = w + 1;
  return spans;
}

/**
 * `s[0, limit)` with every merged span replaced; a span that crosses `limit` is replaced
 * up to it (only a forced cut lets one cross).
 */
export function apply(s: string, spans: readonly Span[], limit: number): string {
  if (spans.length === 0) return limit === s.length ? s : s.slice(0, limit);
  let out = "";
  let at = 0;
  for (const span of spans) {
    if (span.start >= limit) break;
    out += s.slice(at, span.start) + REDACTED;
    at = Math.min(span.end, limit);
  }
  return out + s.slice(at, limit);
}

/**
 * Moves `cut` back until it lies inside no span and not right after one (a hit starting
 * at the cut would have merged with it in one scan of the whole text), before every span
 * that could still grow (counting a key before its value), and not between the halves of
 * a surrogate pair. `keepOpen` false ignores open spans (a forced cut).
 */
export function settle(s: string, spans: readonly Span[], cut: number, keepOpen = true): number {
  let c = cut;
  for (let changed = true; changed && c > 0; ) {
    changed = false;
    for (const span of spans) {
      if (span.from < c && ((keepOpen && span.open) || c <= span.end)) {
        c = span.from;
        changed = true;
      }
    }
    const code = c > 0 ? s.charCodeAt(c - 1) : 0;
    if (code >= 0xd800 && code <= 0xdbff) {
      c -= 1;
      changed = true;
    }
  }
  return Math.max(c, 0);
}
