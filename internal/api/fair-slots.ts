/**
 * Unpack slots handed out fairly between tenants: a counting semaphore whose waiters queue
 * per tenant, and a freed permit goes to the waiting tenant served longest ago (one never
 * served first, then by arrival), so permits go round-robin across the tenants waiting. A
 * tenant with many streams queued gets one turn in each round like a tenant with one: it
 * cannot take every slot while another tenant waits. Within a tenant, first come first
 * served. A waiter gives up when its signal aborts (with the signal's reason).
 *
 * Must never: hand out more permits than it was built with, count a release twice, or keep
 * a tenant's bookkeeping once it holds and awaits nothing.
 */

export interface FairSlots {
  /** Waits for a permit for `tenantId`; the returned function gives it back (idempotent). */
  acquire(tenantId: string, signal?: AbortSignal): Promise<() => void>;
  /** Permits in use. */
  readonly active: number;
  /** Callers waiting for a permit, all tenants. */
  readonly waiting: number;
}

interface Tenant {
  /** Grants of this tenant's waiters, in arrival order. */
  queue: { grant: () => void; seq: number }[];
  /** Permits it holds now. */
  held: number;
  /** The round it was last served in; -1 never. */
  served: number;
}

/** Fair slots of `permits` (at least 1). */
export function createFairSlots(permits: number): FairSlots {
  if (!Number.isInteger(permits) || permits < 1)
    throw new RangeError(`permits must be a positive integer, got ${permits}`);
  const tenants = new Map<string, Tenant>();
  let active = 0;
  let waiting = 0;
  let round = 0;
  let arrivals = 0;

  const tenant = (id: string): Tenant => {
    let t = tenants.get(id);
    if (t === undefined) {
      t = { queue: [], held: 0, served: -1 };
      tenants.set(id, t);
    }
    return t;
  };
  const forgetIdle = (id: string, t: Tenant): void => {
    if (t.held === 0 && t.queue.length === 0) tenants.delete(id);
  };

  /** The waiting tenant whose turn it is: served longest ago, then the earliest arrival. */
  const next = (): Tenant | undefined => {
    let best: Tenant | undefined;
    for (const t of tenants.values()) {
      const head = t.queue[0];
      if (head === undefined) continue;
      const bestHead = best?.queue[0];
      if (
        best === undefined ||
        bestHead === undefined ||
        t.served < best.served ||
        (t.served === best.served && head.seq < bestHead.seq)
      )
        best = t;
    }
    return best;
  };

  const releaser = (id: string, t: Tenant): (() => void) => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      t.held--;
      forgetIdle(id, t);
      const turn = next();
      // The permit passes straight to the next tenant's first waiter: `active` does not change.
      if (turn !== undefined) turn.queue.shift()?.grant();
      else active--;
    };
  };

  return {
    get active() {
      return active;
    },
    get waiting() {
      return waiting;
    },
    acquire(tenantId, signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      const t = tenant(tenantId);
      if (active < permits) {
        active++;
        t.held++;
        t.served = round++;
        return Promise.resolve(releaser(tenantId, t));
      }
      return new Promise((resolve, reject) => {
        const entry = {
          seq: arrivals++,
          grant: (): void => {
            waiting--;
            signal?.removeEventListener("abort", onAbort);
            t.held++;
            t.served = round++;
            resolve(releaser(tenantId, t));
          },
        };
        const onAbort = (): void => {
          const i = t.queue.indexOf(entry);
          if (i >= 0) {
            t.queue.splice(i, 1);
            waiting--;
            forgetIdle(tenantId, t);
          }
          reject(signal?.reason);
        };
        t.queue.push(entry);
        waiting++;
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}
