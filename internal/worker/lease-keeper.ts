/**
 * Keeps a claimed run's lease: renews it every third of its TTL and knows, by its own
 * clock, until when it surely holds it — the send time of the last renewal that succeeded,
 * plus the TTL (Redis applied it after it was sent, so it expires later than that). When a
 * renewal is refused (another worker took the run over) or that time passes without one,
 * `lost` aborts: the drive stops and its running call is killed, before another worker can
 * have taken the run (a takeover needs the lease idle for a whole TTL).
 *
 * Timing: with a 10 s TTL, renewals go every 3.3 s, so a storage stall shorter than about
 * 6.6 s (TTL minus one interval) never costs a live worker its lease; a longer one makes it
 * let go of the run, which another worker then resumes. Must never: let a drive run on past
 * the moment its lease may be gone.
 */
import { isLeaseLost, type Lease, type LeaseGrant } from "../scheduler/port.ts";

export interface LeaseKeeper {
  /** Aborted (reason "lost" or "expired") when the lease is gone or may be. */
  readonly lost: AbortSignal;
  stop(): void;
}

export function keepLease(opts: {
  leases: Lease;
  grant: LeaseGrant;
  ttlMs: number;
  /**
   * When the claim that granted the lease returned. Redis set the lease a moment before;
   * the keeper counts from here less a tenth of the TTL, and renews at once.
   */
  grantedAt: number;
  onRenewError: (err: unknown) => void;
  now?: () => number;
}): LeaseKeeper {
  const now = opts.now ?? Date.now;
  const ac = new AbortController();
  let validUntil = opts.grantedAt + opts.ttlMs - Math.floor(opts.ttlMs / 10);
  const renew = async (): Promise<void> => {
    const sentAt = now();
    try {
      await opts.leases.renew(opts.grant);
      validUntil = Math.max(validUntil, sentAt + opts.ttlMs);
    } catch (err) {
      if (isLeaseLost(err)) ac.abort("lost");
      else opts.onRenewError(err);
    }
  };
  const every = Math.max(100, Math.floor(opts.ttlMs / 3));
  void renew();
  const renewer = setInterval(() => void renew(), every);
  // Checked often: the margin between "may be gone" and a takeover is what this buys.
  const checker = setInterval(
    () => {
      if (now() >= validUntil) ac.abort("expired");
    },
    Math.max(50, Math.floor(opts.ttlMs / 20)),
  );
  const stop = (): void => {
    clearInterval(renewer);
    clearInterval(checker);
  };
  ac.signal.addEventListener("abort", stop, { once: true });
  return { lost: ac.signal, stop };
}
