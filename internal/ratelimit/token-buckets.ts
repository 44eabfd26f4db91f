/**
 * Token buckets keyed by an id (a token's `tokenId`): each holds up to `burst` requests and
 * refills at `perSecond`. `take()` answers at once, from memory: allowed, or how long until
 * a request is next available. Per process: each API replica holds its own buckets.
 *
 * Must never: read a wall clock (the clock is monotonic; one that still goes backwards
 * refills nothing rather than a negative amount or a gift), grow without bound (at most
 * `maxBuckets`; full buckets go first, as a fresh one is the same; then the least recently
 * used), or do I/O.
 */

/** A bucket's rate: `burst` requests at once, refilled at `perSecond`. */
export interface Rate {
  perSecond: number;
  burst: number;
}

export type Take = { ok: true } | { ok: false; retryAfterMs: number };

export interface TokenBuckets {
  /** Takes one request from `id`'s bucket (created full at `rate`). */
  take(id: string, rate: Rate): Take;
  /** Drops every bucket whose id `keep` refuses (tokens removed from the auth file). */
  retain(keep: (id: string) => boolean): number;
  /** How many buckets are held. */
  size(): number;
}

export interface TokenBucketsOptions {
  /** Milliseconds from a monotonic clock; default `performance.now`. */
  now?: () => number;
  /** Most buckets held at once (default 100,000: ~10 MB). */
  maxBuckets?: number;
}

interface Bucket {
  tokens: number;
  at: number;
  perSecond: number;
  burst: number;
}

const OK: Take = Object.freeze({ ok: true });

export function createTokenBuckets(opts: TokenBucketsOptions = {}): TokenBuckets {
  const now = opts.now ?? (() => performance.now());
  const max = Math.max(1, opts.maxBuckets ?? 100_000);
  const buckets = new Map<string, Bucket>();
  let lastNow = Number.NEGATIVE_INFINITY;
  const clock = (): number => {
    // A clock that went backwards stands still until it passes where it was.
    const t = now();
    if (t > lastNow) lastNow = t;
    return lastNow;
  };
  return {
    take(id, rate) {
      const t = clock();
      let b = buckets.get(id);
      if (b === undefined) {
        b = { tokens: rate.burst, at: t, perSecond: rate.perSecond, burst: rate.burst };
        if (buckets.size >= max) evict(buckets, t);
      } else {
        buckets.delete(id); // re-inserted below: the Map's order is least recently used first
        refill(b, t);
        if (b.perSecond !== rate.perSecond || b.burst !== rate.burst) {
          b.perSecond = rate.perSecond;
          b.burst = rate.burst;
          b.tokens = Math.min(b.tokens, rate.burst);
        }
      }
      buckets.set(id, b);
      if (b.tokens >= 1) {
        b.tokens -= 1;
        return OK;
      }
      return { ok: false, retryAfterMs: Math.ceil(((1 - b.tokens) / b.perSecond) * 1000) };
    },
    retain(keep) {
      let dropped = 0;
      for (const id of [...buckets.keys()]) {
        if (!keep(id)) {
          buckets.delete(id);
          dropped++;
        }
      }
      return dropped;
    },
    size: () => buckets.size,
  };
}

function refill(b: Bucket, t: number): void {
  const elapsed = Math.max(0, t - b.at);
  b.tokens = Math.min(b.burst, b.tokens + (elapsed / 1000) * b.perSecond);
  b.at = t;
}

/** Makes room for one bucket: full ones first (dropping them changes nothing), else the oldest. */
function evict(buckets: Map<string, Bucket>, t: number): void {
  let scanned = 0;
  for (const [id, b] of buckets) {
    if (scanned++ >= 64) break; // bounded work per new bucket
    refill(b, t);
    if (b.tokens >= b.burst) {
      buckets.delete(id);
      return;
    }
  }
  const oldest = buckets.keys().next();
  if (!oldest.done) buckets.delete(oldest.value);
}
