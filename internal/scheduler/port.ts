/**
 * The scheduler's ports: RunQueue (which run a worker may take next) and Lease (who owns a
 * run right now, fenced by the run's epoch; a queue's `leases`). Two adapters implement both
 * and pass one conformance suite (conformance.ts): redis-run-queue.ts (Streams, production)
 * and memory-run-queue.ts (one process, `agentd dev`).
 *
 * Rules every adapter keeps:
 * - Fairness (both adapters, see options.ts for the defaults). A queued run's aging score is
 *   `t + (priority - 1) * agingMs`, t = when it became claimable; the ready run with the
 *   lowest score is served first (ties: the higher band). So band 1 goes first among runs
 *   that became ready together, yet a run of band p waits behind later band-1 runs for at
 *   most `(p - 1) * agingMs`: a steady stream of priority-1 runs cannot starve it. Runs that
 *   a previous owner gave back or left behind (requeue, expired lease) go before fresh ones.
 * - One active run per session: runs of a session are served in enqueue order, and a later
 *   one is not claimable until the earlier one ended (released terminal or cancelled). A
 *   paused run keeps its session.
 * - Per-tenant concurrency limit: a tenant's runs that are ready or claimed take a slot;
 *   runs over the limit stay queued and get free slots by aging score (t = enqueue time).
 * - Leases: a claim comes with a lease whose epoch is the run's event-log epoch
 *   (EventLog.bumpEpoch's counter) after being bumped, so every append of the owner carries
 *   it as `fence` and the appends of any previous owner fail with EFENCED.
 *
 * Adapters must never hand one run to two workers with live leases at once, and never bump
 * the epoch anywhere but in the event log's own counter.
 */
import { AgentdError } from "../errors.ts";

/** Priority bands: 1 is the highest, 10 the lowest; CreateRun's default is 5. */
export const MIN_PRIORITY = 1;
export const MAX_PRIORITY = 10;

export interface EnqueueRequest {
  runId: string;
  tenantId: string;
  sessionId: string;
  /** 1 (highest) … 10 (lowest). */
  priority: number;
}

/**
 * Where a run stands in the queue. "waiting": behind an earlier run of its session or over
 * its tenant's limit; "ready": claimable now; "claimed": a worker holds it; "paused": waits
 * for an approval (holds its session, no tenant slot); "ended": released terminal or cancelled.
 */
export type QueueState = "waiting" | "ready" | "claimed" | "paused" | "ended";

export interface EnqueueResult {
  /**
   * "queued": new; "resumed": a paused run was made claimable again (ResolveApproval);
   * "duplicate": the run was already known and nothing changed (enqueue is idempotent).
   */
  outcome: "queued" | "resumed" | "duplicate";
  state: QueueState;
}

export interface QueuePosition {
  state: "waiting" | "ready";
  /**
   * 1-based place in its session's line. The line holds the session's unfinished runs in
   * enqueue order, the active one (claimed, paused or ready) first: 2 = one run ahead.
   */
  session: number;
  /**
   * 1-based rank among all queued (not claimed, not paused) runs by enqueue-time aging score:
   * the order the queue serves them in when no session or tenant gate holds them back.
   */
  overall: number;
  /**
   * What holds a waiting run back: "session" (an earlier run of its session is unfinished)
   * or "tenant" (its tenant's runs fill its concurrency limit); undefined when ready.
   */
  gate?: "session" | "tenant";
}

/** A held lease. Its epoch is the fencing token for every event-log append of the holder. */
export interface LeaseGrant {
  runId: string;
  workerId: string;
  epoch: number;
  /** The lease expires this long after its last acquire/renew. */
  ttlMs: number;
}

/** Why a worker got a run. */
export type ClaimReason =
  | "new" // first claim
  | "resumed" // paused, then enqueued again after ResolveApproval
  | "requeued" // a previous owner released it with outcome "requeue"
  | "takeover"; // a previous owner's lease expired (it stopped heartbeating)

export interface Claim {
  runId: string;
  tenantId: string;
  sessionId: string;
  priority: number;
  reason: ClaimReason;
  /** How many times the run has been claimed, this claim included. */
  attempt: number;
  /** Taken in the same atomic step as the claim: a claimed run is never unleased. */
  lease: LeaseGrant;
}

export interface ClaimOptions {
  /**
   * The most claims this worker holds from this queue object at once; at that many,
   * claim() waits (up to blockMs) for one of them to be released. Unset: no limit.
   */
  maxRuns?: number;
  /** How long to wait for a claimable run; 0 = try once. */
  blockMs: number;
  /** Aborting ends the wait; claim() then resolves undefined. */
  signal?: AbortSignal;
}

export type ReleaseOutcome =
  /** The run ended: acknowledge, free its tenant slot and let its session's next run go. */
  | "terminal"
  /**
   * Waiting for an approval: acknowledge and free the tenant slot; the session stays held.
   * `enqueue` makes it claimable again.
   */
  | "paused"
  /** Give it back unfinished (e.g. SIGTERM): claimable again at once, keeps its place. */
  | "requeue";

export interface QueueStats {
  /** Queued runs (waiting or ready) by priority band: index 0 is band 1. */
  queuedByBand: number[];
  /** Runs paused for an approval. */
  paused: number;
}

/** Most queued runs one stats() call looks at (a scrape stays bounded). */
export const STATS_MAX_RUNS = 10_000;

export interface RunQueue {
  /** Adds a run (idempotent per runId) or makes a paused run claimable again. */
  enqueue(req: EnqueueRequest): Promise<EnqueueResult>;
  /**
   * Takes the next run for `workerId` by the fairness rule, with a fresh lease (the run's
   * epoch bumped). Resolves undefined when nothing was claimable within blockMs or on abort.
   */
  claim(workerId: string, opts: ClaimOptions): Promise<Claim | undefined>;
  /** Lets go of a claim (and its lease). Throws LeaseLostError when the claim was taken over. */
  release(claim: Claim, opts: { outcome: ReleaseOutcome }): Promise<void>;
  /**
   * Removes a run nobody holds (waiting, ready, requeued or paused): true when removed;
   * false when it is claimed, ended or unknown (a claimed run is cancelled by its owner).
   */
  cancelQueued(runId: string): Promise<boolean>;
  /** A waiting or ready run's position; undefined for any other state. */
  positionOf(runId: string): Promise<QueuePosition | undefined>;
  /** The run's state, or undefined when the queue does not know it. */
  stateOf(runId: string): Promise<QueueState | undefined>;
  /**
   * Runs released as paused and not enqueued (resumed), cancelled or ended since: the ones
   * waiting for an approval, longest paused first, at most `limit`.
   */
  pausedRuns(limit: number): Promise<string[]>;
  /** Counts for the metrics: queued runs by priority band, paused runs (bounded work). */
  stats(): Promise<QueueStats>;
  /**
   * Publishes the tenants' own concurrency limits (the auth file's concurrentRuns), replacing
   * the last published set, for every process sharing the queue; tenants not named keep the
   * queue's tenantLimit. Tenants whose limit changed get their free slots filled at once.
   */
  setTenantLimits(limits: ReadonlyMap<string, number>): Promise<void>;
  /** Each tenant's runs that hold a slot now (ready or claimed), for the limit-use gauges. */
  tenantSlots(tenantIds: readonly string[]): Promise<number[]>;
  /** The leases of this queue's store (a claim's lease is renewed here). */
  readonly leases: Lease;
  /** Ends pending waits; leaves the stored queue as it is. */
  close(): Promise<void>;
}

export interface Lease {
  /**
   * Takes a run's lease outside the queue: bumps the run's epoch and returns it. Throws
   * LeaseHeldError while another live lease holds the run, or while the queue has it claimed
   * (queued runs change owner only through claim()).
   */
  acquire(runId: string, workerId: string, ttlMs: number): Promise<LeaseGrant>;
  /**
   * Heartbeat: extends the lease by its ttl. Throws LeaseLostError when the run's epoch moved
   * on (another worker took over) or the lease was released. A queue claim may still be
   * renewed after its ttl as long as nobody took it over (the epoch is the authority).
   */
  renew(lease: LeaseGrant): Promise<void>;
  /**
   * Drops a bare lease if still held; never bumps the epoch. A claim's lease is given up
   * with RunQueue.release (dropping only its key leaves the claim to be taken over).
   */
  release(lease: LeaseGrant): Promise<void>;
}

/** A renew or release whose lease is gone: another worker took over (the run was fenced). */
export class LeaseLostError extends AgentdError {
  readonly runId: string;
  /** The run's current epoch. */
  readonly currentEpoch: number;

  constructor(lease: LeaseGrant, currentEpoch: number) {
    super(
      "EFENCED",
      `lease of run ${lease.runId} (epoch ${lease.epoch}, worker ${lease.workerId}) is lost; the run's epoch is ${currentEpoch}`,
    );
    this.name = "LeaseLostError";
    this.runId = lease.runId;
    this.currentEpoch = currentEpoch;
  }
}

/** acquire() of a run someone else holds. */
export class LeaseHeldError extends AgentdError {
  readonly runId: string;
  constructor(runId: string, holder: string) {
    super("ECONFLICT", `run ${runId} is held by ${holder}`);
    this.name = "LeaseHeldError";
    this.runId = runId;
  }
}

export function isLeaseLost(err: unknown): err is LeaseLostError {
  return err instanceof LeaseLostError;
}
