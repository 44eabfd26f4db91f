/**
 * How long an export sink waits between deliveries of one failing event: exponential
 * backoff with "equal jitter" — the n-th wait is uniform in [c/2, c], c = min(maxMs,
 * initialMs · 2^n). Equal, not full jitter (uniform in [0, c]): a sink's retries exist to
 * ride out a receiver's outage, so their span must have a floor that can be stated and
 * checked (`retrySpan`); the random half still spreads many senders apart. With the
 * defaults (20 attempts, 0.5 s doubling to 60 s) the retries of one event span 6.5 to 13
 * minutes: a routine 5-minute receiver outage does not dead-letter anything (the old
 * defaults, 8 attempts with full jitter, spanned 0 to 32 s).
 *
 * Must never: wait longer than maxMs, or less than half the ceiling.
 */

export interface RetryBackoff {
  initialMs: number;
  maxMs: number;
}

/** The ceiling of the n-th wait (n from 0). */
function ceiling(b: RetryBackoff, n: number): number {
  return Math.min(b.maxMs, b.initialMs * 2 ** Math.min(n, 30));
}

/** The waits of one event's deliveries, one after each failed attempt. */
export function createRetrySchedule(
  b: RetryBackoff,
  random: () => number = Math.random,
): { next(): number } {
  let n = 0;
  return {
    next() {
      const c = ceiling(b, n++);
      return Math.round(c / 2 + random() * (c / 2));
    },
  };
}

/**
 * How long the retries of one event last at least and at most, from its first failed
 * attempt to its last attempt (request times not counted): the sum of the waits between
 * `maxAttempts` attempts. A receiver down for less than `minMs` loses nothing.
 */
export function retrySpan(s: { maxAttempts: number; backoff: RetryBackoff }): {
  minMs: number;
  maxMs: number;
} {
  let minMs = 0;
  let maxMs = 0;
  for (let n = 0; n < s.maxAttempts - 1; n++) {
    const c = ceiling(s.backoff, n);
    minMs += c / 2;
    maxMs += c;
  }
  return { minMs, maxMs };
}
