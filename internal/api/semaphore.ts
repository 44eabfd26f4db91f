/**
 * A counting semaphore whose waiters can give up: `acquire` resolves with a release
 * function once a permit is free, first come first served, or rejects with the signal's
 * reason when the caller's signal aborts first (a waiter never outlives its request).
 * Never hands out more permits than it was built with, and a release counts only once.
 */

export interface Semaphore {
  /** Waits for a permit; the returned function gives it back (idempotent). */
  acquire(signal?: AbortSignal): Promise<() => void>;
  /** Permits in use. */
  readonly active: number;
  /** Callers waiting for a permit. */
  readonly waiting: number;
}

/** A semaphore of `permits` (at least 1). */
export function createSemaphore(permits: number): Semaphore {
  if (!Number.isInteger(permits) || permits < 1)
    throw new RangeError(`permits must be a positive integer, got ${permits}`);
  let active = 0;
  const queue: (() => void)[] = [];

  const releaser = (): (() => void) => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = queue.shift();
      // The permit passes straight to the next waiter: `active` does not change.
      if (next !== undefined) next();
      else active--;
    };
  };

  return {
    get active() {
      return active;
    },
    get waiting() {
      return queue.length;
    },
    acquire(signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      if (active < permits) {
        active++;
        return Promise.resolve(releaser());
      }
      return new Promise((resolve, reject) => {
        const grant = (): void => {
          signal?.removeEventListener("abort", onAbort);
          resolve(releaser());
        };
        const onAbort = (): void => {
          const i = queue.indexOf(grant);
          if (i >= 0) queue.splice(i, 1);
          reject(signal?.reason);
        };
        queue.push(grant);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}
