/**
 * "Did you mean …?" for agentctl: the known names closest to a mistyped one by edit
 * distance (Levenshtein). It only suggests; it must never pick a command or flag for the
 * user.
 */

/**
 * The edit distance between a and b: Levenshtein's insertions, deletions and
 * substitutions, plus swapping two neighbours as one edit ("wiat" is 1 from "wait").
 */
export function levenshtein(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => d[i]?.[j] as number;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, at(i - 2, j - 2) + 1);
      (d[i] as number[])[j] = v;
    }
  }
  return at(a.length, b.length);
}

/**
 * The known names nearest to `typed`: at most a third of its length away (at least 1,
 * at most 3 edits), the nearest first; names that start with what was typed count too.
 */
export function closest(typed: string, known: readonly string[]): string[] {
  const limit = Math.min(3, Math.max(1, Math.floor(typed.length / 3)));
  const scored = known
    .map((k) => ({ k, d: levenshtein(typed.toLowerCase(), k.toLowerCase()) }))
    .filter(({ k, d }) => d <= limit || (typed.length >= 3 && k.startsWith(typed)));
  if (scored.length === 0) return [];
  const best = Math.min(...scored.map((s) => s.d));
  return scored.filter((s) => s.d === best || s.k.startsWith(typed)).map((s) => s.k);
}

/** " (did you mean X or Y?)", or "" when nothing is close. */
export function didYouMean(typed: string, known: readonly string[], prefix = ""): string {
  const c = closest(typed, known);
  return c.length === 0 ? "" : ` (did you mean ${c.map((x) => `${prefix}${x}`).join(" or ")}?)`;
}
