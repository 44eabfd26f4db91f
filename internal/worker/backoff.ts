/**
 * Exponential backoff with full jitter ("Exponential Backoff And Jitter", AWS Architecture
 * Blog): the n-th wait is uniform in [0, min(cap, base * 2^n)]. A few lines rather than a
 * retry library: the worker does not retry one operation, it paces loops (claims, drives)
 * that go on forever and reset when storage answers again.
 * Must never: wait longer than `capMs`, or keep growing after a success.
 */
export interface Backoff {
  /** The next wait, ms (grows with each failure). */
  next(): number;
  /** Storage answered: start again from the base. */
  reset(): void;
  /** Failures in a row. */
  readonly failures: number;
}

export function createBackoff(opts: {
  baseMs: number;
  capMs: number;
  random?: () => number;
}): Backoff {
  const random = opts.random ?? Math.random;
  let n = 0;
  return {
    next() {
      const ceiling = Math.min(opts.capMs, opts.baseMs * 2 ** Math.min(n, 30));
      n++;
      return Math.round(random() * ceiling);
    },
    reset() {
      n = 0;
    },
    get failures() {
      return n;
    },
  };
}
