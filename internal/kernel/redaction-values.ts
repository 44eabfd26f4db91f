/**
 * Finds known secret values in a text: every literal form (secret-forms.ts) through two
 * precompiled regexes, and hex dumps over several lines (redaction-hex-dump.ts). For live
 * streams it also answers how much of the end of a text must be held back because a form
 * of a value could still be printing there.
 *
 * Built once per set of values; it must never log or keep anything but the forms.
 */
import { createHexDumpMatcher, type HexDumpMatcher } from "./redaction-hex-dump.ts";
import { failureTable, longestPrefixAtEnd } from "./redaction-prefix.ts";
import type { Holds, Span } from "./redaction-spans.ts";
import { escapeRegex, MIN_SECRET_LENGTH, secretForms } from "./secret-forms.ts";

export interface ValueMatcher {
  /**
   * Adds a span for every form of every value in `s`, and answers the earliest index from
   * which a form of a value may still be printing at its end, as far as `holds` goes (the
   * text's length when none). `partialFirstLine`: `s` starts inside a line, which is not
   * read as a dump line.
   */
  scan(s: string, spans: Span[], partialFirstLine: boolean, holds: Holds): number;
  /** The longest literal form: a literal match never spans more. */
  maxLiteralLength: number;
}

interface LiteralForm {
  /** The form with case folded as `canonical` does. */
  folded: Uint16Array;
  fail: Int32Array;
}

/** A matcher for `values` (strings shorter than MIN_SECRET_LENGTH are ignored), or none. */
export function createValueMatcher(values: readonly string[]): ValueMatcher | undefined {
  const kept = [...new Set(values)].filter((v) => v.length >= MIN_SECRET_LENGTH);
  if (kept.length === 0) return undefined;
  const folded = new Set<string>();
  const exact = new Set<string>();
  const literals: LiteralForm[] = [];
  for (const value of kept) {
    for (const form of secretForms(value)) {
      const set = form.caseInsensitive ? folded : exact;
      if (set.has(form.text)) continue;
      set.add(form.text);
      const codes = canonical(form.text, 0, form.text.length);
      literals.push({ folded: codes, fail: failureTable(codes) });
    }
  }
  // Two regexes, not one with `(?i:…)` groups: V8 skips ahead through text that cannot
  // start any alternative only when they share their flags (10x faster on plain text).
  const regexes = [alternation(folded, "gi"), alternation(exact, "g")].filter(
    (re): re is RegExp => re !== undefined,
  );
  let maxLiteralLength = 0;
  for (const text of [...folded, ...exact])
    maxLiteralLength = Math.max(maxLiteralLength, text.length);
  const dumps: HexDumpMatcher = createHexDumpMatcher(kept.map((v) => Buffer.from(v, "utf8")));

  return {
    maxLiteralLength,
    scan(s, spans, partialFirstLine, holds) {
      for (const re of regexes) {
        re.lastIndex = 0;
        for (let m = re.exec(s); m !== null; m = re.exec(s)) {
          spans.push({ start: m.index, end: m.index + m[0].length, from: m.index, open: false });
          re.lastIndex = m.index + 1; // overlapping forms of different values are all found
        }
      }
      let hold = dumps.scan(s, spans, partialFirstLine, holds !== "none");
      if (holds === "all") {
        const from = Math.max(0, s.length - maxLiteralLength + 1);
        const end = canonical(s, from, s.length);
        for (const f of literals) {
          const k = longestPrefixAtEnd(end, end.length, f.folded, f.fail);
          if (k > 0) hold = Math.min(hold, s.length - k);
        }
      }
      return hold;
    },
  };
}

/** One regex for `texts`, longest first (where several match at one place, the longest wins). */
function alternation(texts: Set<string>, flags: string): RegExp | undefined {
  if (texts.size === 0) return undefined;
  const ordered = [...texts].sort((a, b) => b.length - a.length);
  return new RegExp(ordered.map(escapeRegex).join("|"), flags);
}

/**
 * `s[from, to)` as code units with ASCII letters upper-cased and every non-ASCII unit
 * folded into one: a coarser equality than the regex `i` flag (which never matches ASCII
 * with non-ASCII), so a prefix it misses cannot be one the regex would match.
 */
function canonical(s: string, from: number, to: number): Uint16Array {
  const out = new Uint16Array(to - from);
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    out[i - from] = c >= 128 ? 0xffff : c >= 97 && c <= 122 ? c - 32 : c;
  }
  return out;
}
