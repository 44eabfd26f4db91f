/**
 * A worker: claims runs from the queue, drives each while renewing its lease, and releases
 * it with the outcome. Several runs at once (concurrency slots). Stopping (SIGTERM) stops
 * claiming, lets each run reach a step boundary and releases it for another worker.
 * Must never: keep driving a run whose lease it lost (its appends are fenced anyway), or
 * release a run it no longer owns.
 */
import { isAgentdError } from "../errors.ts";
import { projectRun } from "../projections/run-projection.ts";
import { type Claim, isLeaseLost, type RunQueue } from "../scheduler/port.ts";
import { resumeIfResolved } from "../scheduler/resume.ts";
import type { Logger } from "../telemetry/logger.ts";
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
  logger: Logger;
}

export interface Worker {
  start(): void;
  /** Stops claiming; waits up to `graceMs` for active runs to reach a step boundary. */
  stop(graceMs: number): Promise<void>;
  /** Runs being driven now. */
  active(): number;
}

export function createWorker(opts: WorkerOptions): Worker {
  const stopping = new AbortController();
  const slots: Promise<void>[] = [];
  let active = 0;
  const log = opts.logger.child({ workerId: opts.workerId });

  async function runOne(claim: Claim): Promise<void> {
    let lost = false;
    // A lost lease stops the drive at its next step boundary (or ends an approval hold),
    // like a worker stopping: its appends would be fenced anyway.
    const lostLease = new AbortController();
    const renew = setInterval(
      () => {
        opts.queue.leases.renew(claim.lease).catch((err: unknown) => {
          if (isLeaseLost(err)) {
            lost = true;
            lostLease.abort();
          } else log.warn({ err, runId: claim.runId }, "lease renewal failed; retrying");
        });
      },
      Math.max(100, Math.floor(opts.leaseTtlMs / 3)),
    );
    let outcome: DriveOutcome | "error" = "error";
    try {
      log.info(
        { runId: claim.runId, reason: claim.reason, epoch: claim.lease.epoch },
        "run claimed",
      );
      outcome = await driveRun(
        { ...opts.driver, workerId: opts.workerId },
        claim.runId,
        claim.lease.epoch,
        AbortSignal.any([stopping.signal, lostLease.signal]),
      );
      log.info({ runId: claim.runId, outcome }, "run released");
    } catch (err) {
      if (isAgentdError(err, "EFENCED")) lost = true;
      else log.error({ err, runId: claim.runId }, "driving the run failed");
    } finally {
      clearInterval(renew);
    }
    if (lost) {
      log.warn({ runId: claim.runId }, "lease lost: another worker owns the run now");
      return;
    }
    const release =
      outcome === "paused"
        ? "paused"
        : outcome === "released" || outcome === "error"
          ? "requeue"
          : "terminal";
    try {
      await opts.queue.release(claim, { outcome: release });
    } catch (err) {
      log.error({ err, runId: claim.runId }, "release failed");
      return;
    }
    if (release === "paused") await requeueIfResolved(claim);
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

  async function slot(): Promise<void> {
    let backoff = 100;
    while (!stopping.signal.aborted) {
      let claim: Claim | undefined;
      try {
        claim = await opts.queue.claim(opts.workerId, {
          blockMs: opts.blockMs ?? 2000,
          signal: stopping.signal,
        });
        backoff = 100;
      } catch (err) {
        if (stopping.signal.aborted) return;
        log.warn({ err }, "claiming failed; retrying");
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
        continue;
      }
      if (claim === undefined) continue;
      active++;
      try {
        await runOne(claim);
      } finally {
        active--;
      }
    }
  }

  return {
    start() {
      for (let i = 0; i < opts.concurrency; i++) slots.push(slot());
    },
    async stop(graceMs) {
      stopping.abort();
      await Promise.race([
        Promise.allSettled(slots),
        new Promise((r) => setTimeout(r, graceMs).unref()),
      ]);
    },
    active: () => active,
  };
}
