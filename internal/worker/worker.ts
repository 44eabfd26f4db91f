/**
 * A worker: claims runs from the queue, drives each while keeping its lease, and releases
 * it with the outcome. Several runs at once (concurrency slots).
 *
 * Faults: a storage error (Redis down, out of memory, paused) makes the slot back off
 * exponentially with jitter (reset on the next success), and a drive that failed (on
 * storage, or on a bug) is not released for an instant re-claim: its lease is left to
 * expire, so the run comes back after a TTL instead of bouncing between workers. Repeated log lines are rate-limited
 * per cause. Stopping (SIGTERM) stops claiming and lets each run reach a step boundary; when
 * the grace period is nearly over, running calls are killed (recorded `interrupted`) and
 * the runs released. Must never: keep driving a run whose lease it lost (its appends are
 * fenced anyway, and its running call is killed), or release a run it no longer owns.
 */
import { isAgentdError } from "../errors.ts";
import { projectRun } from "../projections/run-projection.ts";
import type { Claim, RunQueue } from "../scheduler/port.ts";
import { resumeIfResolved } from "../scheduler/resume.ts";
import type { Logger } from "../telemetry/logger.ts";
import { metrics } from "../telemetry/metrics.ts";
import { createBackoff } from "./backoff.ts";
import { keepLease } from "./lease-keeper.ts";
import { createLogLimiter, type LogLimiter } from "./log-limiter.ts";
import { type DriveOutcome, type DriverDeps, driveRun } from "./run-driver.ts";

export interface WorkerOptions {
  queue: RunQueue;
  driver: Omit<DriverDeps, "workerId">;
  workerId: string;
  /** Runs driven at once. */
  concurrency: number;
  /** Lease time-to-live; renewed every third of it. */
  leaseTtlMs: number;
  /** How long one claim blocks waiting for work. Default 2000 ms. */
  blockMs?: number;
  /** Backoff after storage errors: first wait at most baseMs, growing to capMs. */
  backoff?: { baseMs: number; capMs: number };
  logger: Logger;
  now?: () => number;
}

export interface Worker {
  start(): void;
  /**
   * Stops claiming; waits up to `graceMs` for active runs to reach a step boundary. A run
   * still in a call when 80% of the grace is gone has the call killed and is released.
   */
  stop(graceMs: number): Promise<void>;
  /** Runs being driven now. */
  active(): number;
}

/** A dependency failed (Redis, the disk, the Docker engine): worth backing off for. */
function isDependencyError(err: unknown): boolean {
  return (
    isAgentdError(err, "EUNAVAILABLE") ||
    isAgentdError(err, "EIO") ||
    isAgentdError(err, "ETIMEOUT")
  );
}

export function createWorker(opts: WorkerOptions): Worker {
  const now = opts.now ?? Date.now;
  const stopping = new AbortController();
  const halting = new AbortController();
  const slots: Promise<void>[] = [];
  let active = 0;
  const log = opts.logger.child({ workerId: opts.workerId });
  const limited = createLogLimiter({ logger: log });
  const pace = opts.backoff ?? { baseMs: 100, capMs: 10_000 };

  async function slot(): Promise<void> {
    const backoff = createBackoff(pace);
    while (!stopping.signal.aborted) {
      let claim: Claim | undefined;
      try {
        claim = await opts.queue.claim(opts.workerId, {
          blockMs: opts.blockMs ?? 2000,
          signal: stopping.signal,
        });
      } catch (err) {
        if (stopping.signal.aborted) return;
        limited.warn(causeOf("claim", err), { err }, "claiming failed; backing off");
        await sleep(backoff.next(), stopping.signal);
        continue;
      }
      if (claim === undefined) {
        backoff.reset();
        continue;
      }
      active++;
      metrics.runsActive.inc();
      if (claim.reason === "takeover") metrics.leaseTakeovers.inc();
      let storageFailed = false;
      try {
        storageFailed = await runOne(claim, now(), limited);
      } finally {
        active--;
        metrics.runsActive.dec();
      }
      if (storageFailed) await sleep(backoff.next(), stopping.signal);
      else backoff.reset();
    }
  }

  /** Drives one claimed run; true when the drive or its release failed (the slot backs off). */
  async function runOne(claim: Claim, claimedAt: number, limited: LogLimiter): Promise<boolean> {
    // claimedAt: when claim() returned (a blocking claim may have waited long before).
    const lease = keepLease({
      leases: opts.queue.leases,
      grant: claim.lease,
      ttlMs: opts.leaseTtlMs,
      grantedAt: claimedAt,
      now,
      onRenewError: (err) =>
        limited.warn(
          causeOf("renew", err),
          { err, runId: claim.runId },
          "lease renewal failed; retrying",
        ),
    });
    let outcome: DriveOutcome | "error" = "error";
    let failure: unknown;
    try {
      log.info(
        { runId: claim.runId, reason: claim.reason, epoch: claim.lease.epoch },
        "run claimed",
      );
      outcome = await driveRun(
        { ...opts.driver, workerId: opts.workerId },
        claim.runId,
        claim.lease.epoch,
        {
          stop: AbortSignal.any([stopping.signal, lease.lost]),
          // A lease that is gone (or may be) kills the running call at once: another worker may
          // take the run over from now on.
          halt: AbortSignal.any([halting.signal, lease.lost]),
          // The previous owner's lease lapsed: its drive never closed its spans.
          takeover: claim.reason === "takeover",
        },
      );
      log.info({ runId: claim.runId, outcome }, "run released");
    } catch (err) {
      failure = err;
    } finally {
      lease.stop();
    }
    if (lease.lost.aborted || isAgentdError(failure, "EFENCED")) {
      log.warn(
        { runId: claim.runId, why: lease.lost.reason ?? "fenced" },
        "lease lost: another worker may own the run now",
      );
      return false;
    }
    // The run ended under this drive (someone else ended it): nothing is left to drive.
    if (isAgentdError(failure, "EENDED")) return release(claim, "completed", limited);
    if (failure !== undefined) {
      // Not released: the lease expires and the run is taken over after a TTL, rather than
      // re-claimed at once by a worker that would fail the same way (storage down, a bug).
      limited.error(
        causeOf("drive", failure),
        { err: failure, runId: claim.runId },
        "driving the run failed; its lease is left to expire",
      );
      return true;
    }
    return release(claim, outcome, limited);
  }

  /** Gives the run back with its outcome; true when storage failed doing so. */
  async function release(
    claim: Claim,
    outcome: DriveOutcome | "error",
    limited: LogLimiter,
  ): Promise<boolean> {
    const how =
      outcome === "paused"
        ? "paused"
        : outcome === "released" || outcome === "error"
          ? "requeue"
          : "terminal";
    try {
      await opts.queue.release(claim, { outcome: how });
    } catch (err) {
      limited.error(
        causeOf("release", err),
        { err, runId: claim.runId },
        "release failed; the lease will expire",
      );
      return isDependencyError(err);
    }
    if (how === "paused") await requeueIfResolved(claim);
    return false;
  }

  /**
   * A ResolveApproval that landed while this worker was still pausing the run found it
   * claimed, and its enqueue was a no-op. Now that the run is released, look again: if the
   * approval is already resolved, queue the run ourselves (enqueue is idempotent).
   */
  async function requeueIfResolved(claim: Claim): Promise<void> {
    try {
      const events = await opts.driver.log.read(claim.runId, 0);
      await resumeIfResolved(
        opts.queue,
        projectRun(
          claim.runId,
          events.map((e) => e.event),
        ),
      );
    } catch (err) {
      log.error({ err, runId: claim.runId }, "re-queueing a resolved pause failed");
    }
  }

  return {
    start() {
      for (let i = 0; i < opts.concurrency; i++) slots.push(slot());
    },
    async stop(graceMs) {
      stopping.abort();
      // Calls still running late in the grace period are killed, so their runs are released
      // with every call settled instead of being taken over with a call interrupted midway.
      const halt = setTimeout(() => halting.abort(), Math.floor(graceMs * 0.8));
      halt.unref();
      await Promise.race([Promise.allSettled(slots), sleep(graceMs)]);
      clearTimeout(halt);
    },
    active: () => active,
  };
}

/** A log cause: where it failed and the error's code (one line per cause per interval). */
function causeOf(where: string, err: unknown): string {
  const code = (err as { code?: unknown })?.code;
  return `${where}:${typeof code === "string" ? code : ((err as Error)?.name ?? "error")}`;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    t.unref?.();
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}
