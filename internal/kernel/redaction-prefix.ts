/**
 * How much of the end of a sequence could be the beginning of a pattern: what a live
 * stream must hold back because a secret form may be printing there. KMP (Knuth-Morris-
 * Pratt) over the last `pattern.length - 1` items, so the work is linear in the pattern.
 *
 * Pure functions on numbers (bytes or folded code units); they must never allocate per item.
 */

/** KMP failure table: fail[i] is the longest proper border of `p[0, i]`. */
export function failureTable(p: ArrayLike<number>): Int32Array {
  const fail = new Int32Array(p.length);
  for (let i = 1, k = 0; i < p.length; i++) {
    while (k > 0 && p[i] !== p[k]) k = fail[k - 1] as number;
    if (p[i] === p[k]) k++;
    fail[i] = k;
  }
  return fail;
}

/**
 * The length of the longest proper prefix of `p` that `text[0, n)` ends with (KMP over the
 * last `p.length - 1` items only: a longer tail cannot be a proper prefix).
 */
export function longestPrefixAtEnd(
  text: ArrayLike<number>,
  n: number,
  p: ArrayLike<number>,
  fail: Int32Array,
): number {
  let k = 0;
  for (let i = Math.max(0, n - p.length + 1); i < n; i++) {
    while (k > 0 && text[i] !== p[k]) k = fail[k - 1] as number;
    if (text[i] === p[k]) k++;
  }
  return k;
}
