/**
 * RunQueue and Lease in process memory, for `agentd dev` (server and worker in one process):
 * the same rules as the Redis adapter (same conformance suite), modelled on it: per-band FIFO
 * lines of ready runs, a "pending" set of delivered runs whose idle time is reset by renew,
 * session lines, tenant slots and waiting sets. Epochs still go through EventLog.bumpEpoch,
 * so fencing is exactly the event log's.
 *
 * A claim never hands out a run whose log ended (EventLog.head's `ended`): it is dropped.
 *
 * Must never be shared between processes (the queue dies with the process; a dev restart
 * re-enqueues from the event log). Every operation runs under one mutex because the epoch
 * bump is async: two claims must not both pick the same run while one awaits the log.
 */
import { invalid } from "../errors.ts";
import type { EventLog } from "../eventlog/port.ts";
import { type Attempt, ClaimLoop } from "./claim-loop.ts";
import {
  checkEnqueue,
  checkRunId,
  checkTtl,
  checkWorkerId,
  type ResolvedOptions,
  resolveOptions,
  type SchedulerOptions,
} from "./options.ts";
import {
  type Claim,
  type ClaimOptions,
  type ClaimReason,
  type EnqueueRequest,
  type EnqueueResult,
  type Lease,
  type LeaseGrant,
  LeaseHeldError,
  LeaseLostError,
  MAX_PRIORITY,
  type QueuePosition,
  type QueueState,
  type QueueStats,
  type ReleaseOutcome,
  type RunQueue,
} from "./port.ts";

export interface MemoryRunQueueOptions extends SchedulerOptions {
  /** The event log whose epochs fence the leases. */
  log: EventLog;
}

type State = "session" | "tenant" | "ready" | "claimed" | "paused" | "ended";
/** Waiting for the session, for a tenant slot, or ready: queued (QueueStats). */
const QUEUED_STATES: ReadonlySet<State> = new Set(["session", "tenant", "ready"]);

interface Rec {
  runId: string;
  tenantId: string;
  sessionId: string;
  priority: number;
  /** Enqueue-time aging score and enqueue order (ties). */
  score: number;
  seq: number;
  state: State;
  next: ClaimReason;
  attempts: number;
  /** When it entered its band (admission time) and in which order (the stream entry id). */
  admittedAt: number;
  entry: number;
  /** Delivered to a worker and not acknowledged (the PEL): since when idle. */
  pendingSince: number | undefined;
  worker: string;
  epoch: number;
  endedAt: number;
  /** When it was last released as paused (ms). */
  pausedAt: number;
}

interface HeldLease {
  workerId: string;
  epoch: number;
  expiresAt: number;
}

/** Larger than any lease ttl: a requeued run looks expired to every claimer at once. */
const LONG_AGO = -Number.MAX_SAFE_INTEGER;

export class MemoryRunQueue implements RunQueue {
  readonly leases: Lease = {
    acquire: (runId, workerId, ttlMs) => this.#serial(() => this.#acquire(runId, workerId, ttlMs)),
    renew: (lease) => this.#serial(() => this.#renew(lease)),
    release: (lease) => this.#serial(async () => this.#releaseLease(lease)),
  };
  readonly #log: EventLog;
  readonly #o: ResolvedOptions;
  readonly #loop: ClaimLoop;
  readonly #recs = new Map<string, Rec>();
  /** Ended runs in the order they ended, to forget them after endedTtlMs. */
  readonly #ended = new Map<string, number>();
  readonly #sessions = new Map<string, string[]>();
  readonly #slots = new Map<string, number>();
  readonly #waiting = new Map<string, Rec[]>();
  /** Index p-1: the band's ready, undelivered runs in admission order. */
  readonly #bands: Rec[][] = Array.from({ length: MAX_PRIORITY }, () => []);
  readonly #pending = new Map<string, Rec>();
  readonly #leases = new Map<string, HeldLease>();
  /** The last epoch this queue got from the log per run. */
  readonly #epochs = new Map<string, number>();
  /** The tenants' own concurrency limits (setTenantLimits); others get tenantLimit. */
  #limits = new Map<string, number>();
  #seq = 0;
  #entry = 0;
  #mutex: Promise<unknown> = Promise.resolve();

  constructor(opts: MemoryRunQueueOptions) {
    this.#log = opts.log;
    this.#o = resolveOptions(opts);
    this.#loop = new ClaimLoop(this.#o.pollMs);
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#mutex.then(fn);
    this.#mutex = p.catch(() => undefined);
    return p;
  }

  async enqueue(req: EnqueueRequest): Promise<EnqueueResult> {
    checkEnqueue(req);
    return this.#serial(async () => {
      this.#forgetEnded();
      const rec = this.#recs.get(req.runId);
      if (rec?.state === "paused") {
        // ResolveApproval: still its session's head; competes for a slot with its first score.
        rec.state = "tenant";
        rec.next = "resumed";
        this.#addWaiting(rec);
        this.#fill(rec.tenantId);
        return { outcome: "resumed", state: publicState(rec.state) };
      }
      if (rec !== undefined) return { outcome: "duplicate", state: publicState(rec.state) };
      const r = this.#addRec(req, "session");
      this.#advance(r.tenantId, r.sessionId);
      this.#fill(r.tenantId);
      return { outcome: "queued", state: publicState(r.state) };
    });
  }

  claim(workerId: string, opts: ClaimOptions): Promise<Claim | undefined> {
    return this.#loop.run(workerId, opts, () => this.#serial(() => this.#attempt(workerId)));
  }

  async #attempt(workerId: string): Promise<Attempt> {
    for (;;) {
      const next = this.#pick();
      if (next === undefined) return { sleep: (ms, signal) => this.#loop.sleepLocal(ms, signal) };
      // Terminal is terminal: a run that ended in the log is never handed out, but dropped
      // (its session's next run and its tenant's waiting runs move up); then look again.
      if ((await this.#log.head(next.rec.runId))?.ended !== undefined) this.#dropEnded(next.rec);
      else return { claim: await this.#take(next.rec, workerId, next.reason) };
    }
  }

  /** The run the fairness rule serves next, without taking it. */
  #pick(): { rec: Rec; reason: ClaimReason } | undefined {
    const now = Date.now();
    const ttl = this.#o.leaseTtlMs;
    // 1. Runs a previous owner left: requeued, or idle (not renewed) for a lease ttl.
    const left = [...this.#pending.values()].sort(
      (a, b) => a.priority - b.priority || a.entry - b.entry,
    );
    for (const r of left) {
      if (r.state === "ready") return { rec: r, reason: r.next };
      if (now - (r.pendingSince ?? now) < ttl) continue;
      const lease = this.#leases.get(r.runId);
      if (lease !== undefined && lease.epoch === r.epoch && lease.expiresAt > now) {
        r.pendingSince = now; // its owner is alive after all: hand it back
        continue;
      }
      return { rec: r, reason: "takeover" };
    }
    // 2. Fresh runs: each band's first; lowest aging score wins, ties to the higher band.
    let best: Rec | undefined;
    let bestScore = 0;
    for (const band of this.#bands) {
      const head = band[0];
      if (head === undefined) continue;
      const score = head.admittedAt + (head.priority - 1) * this.#o.agingMs;
      if (best === undefined || score < bestScore) [best, bestScore] = [head, score];
    }
    return best === undefined ? undefined : { rec: best, reason: best.next };
  }

  /** Removes a ready (or dead-owned claimed) run that ended in the log: it frees its slot. */
  #dropEnded(r: Rec): void {
    const band = this.#bands[r.priority - 1] ?? [];
    const i = band.indexOf(r);
    if (i >= 0) band.splice(i, 1);
    this.#pending.delete(r.runId);
    r.pendingSince = undefined;
    this.#addSlots(r.tenantId, -1);
    this.#finish(r);
    this.#fill(r.tenantId);
  }

  /** The run becomes the worker's: epoch bumped first (if the log fails, nothing changed). */
  async #take(r: Rec, workerId: string, reason: ClaimReason): Promise<Claim> {
    const epoch = await this.#log.bumpEpoch(r.runId);
    this.#epochs.set(r.runId, epoch);
    const now = Date.now();
    this.#leases.set(r.runId, { workerId, epoch, expiresAt: now + this.#o.leaseTtlMs });
    const band = this.#bands[r.priority - 1] ?? [];
    if (band[0] === r) band.shift();
    r.state = "claimed";
    r.worker = workerId;
    r.epoch = epoch;
    r.attempts += 1;
    r.pendingSince = now;
    this.#pending.set(r.runId, r);
    return {
      runId: r.runId,
      tenantId: r.tenantId,
      sessionId: r.sessionId,
      priority: r.priority,
      reason,
      attempt: r.attempts,
      lease: { runId: r.runId, workerId, epoch, ttlMs: this.#o.leaseTtlMs },
    };
  }

  async release(claim: Claim, opts: { outcome: ReleaseOutcome }): Promise<void> {
    try {
      await this.#serial(async () => this.#release(claim, opts.outcome));
    } finally {
      this.#loop.released(claim);
    }
  }

  #release(claim: Claim, outcome: ReleaseOutcome): void {
    const l = claim.lease;
    const r = this.#recs.get(claim.runId);
    if (
      r === undefined ||
      r.state !== "claimed" ||
      r.worker !== l.workerId ||
      r.epoch !== l.epoch
    ) {
      throw new LeaseLostError(l, this.#epochs.get(claim.runId) ?? 0);
    }
    this.#dropLease(l);
    if (outcome === "requeue") {
      // Keeps its place, slot and session; looks long expired so the next claim takes it.
      r.state = "ready";
      r.next = "requeued";
      r.pendingSince = LONG_AGO;
      this.#loop.notify();
      return;
    }
    this.#pending.delete(r.runId);
    r.pendingSince = undefined;
    this.#addSlots(r.tenantId, -1);
    if (outcome === "paused") {
      r.state = "paused";
      r.pausedAt = Date.now();
    } else this.#finish(r);
    this.#fill(r.tenantId);
    this.#loop.notify();
  }

  async cancelQueued(runId: string): Promise<boolean> {
    checkRunId(runId);
    return this.#serial(async () => {
      const r = this.#recs.get(runId);
      if (r === undefined) return false;
      if (r.state === "claimed" || r.state === "ended") return false;
      if (r.state === "tenant") this.#removeWaiting(r);
      if (r.state === "ready") {
        const band = this.#bands[r.priority - 1] ?? [];
        const i = band.indexOf(r);
        if (i >= 0) band.splice(i, 1);
        this.#pending.delete(r.runId);
        this.#addSlots(r.tenantId, -1);
      }
      this.#finish(r);
      this.#fill(r.tenantId);
      return true;
    });
  }

  async positionOf(runId: string): Promise<QueuePosition | undefined> {
    checkRunId(runId);
    const r = this.#recs.get(runId);
    if (r === undefined || !isQueued(r)) return undefined;
    const line = this.#sessions.get(sessionKey(r)) ?? [];
    let ahead = 0;
    for (const o of this.#recs.values()) if (isQueued(o) && before(o, r)) ahead++;
    return {
      state: publicState(r.state) as QueuePosition["state"],
      session: line.indexOf(runId) + 1,
      overall: ahead + 1,
      ...(r.state === "session" || r.state === "tenant" ? { gate: r.state } : {}),
    };
  }

  async setTenantLimits(limits: ReadonlyMap<string, number>): Promise<void> {
    for (const [tenant, n] of limits) {
      if (!Number.isInteger(n) || n < 0)
        throw invalid(
          `tenants.${tenant}.limits.concurrentRuns`,
          `must be an integer >= 0, got ${n}`,
        );
    }
    await this.#serial(async () => {
      const touched = new Set([...this.#limits.keys(), ...limits.keys()]);
      this.#limits = new Map(limits);
      for (const t of touched) this.#fill(t);
    });
  }

  async tenantSlots(tenantIds: readonly string[]): Promise<number[]> {
    return tenantIds.map((t) => this.#slots.get(t) ?? 0);
  }

  /**
   * Records a run that was paused (waiting for an approval) before this in-process queue
   * existed, e.g. found in the embedded log at start: it holds its session and is listed
   * by pausedRuns; enqueue resumes it. A run the queue knows already is left as it is.
   */
  async restorePaused(req: EnqueueRequest): Promise<void> {
    checkEnqueue(req);
    await this.#serial(async () => {
      if (this.#recs.has(req.runId)) return;
      this.#addRec(req, "paused");
    });
  }

  /**
   * A new record: a fresh run joins the end of its session's line; a restored paused one
   * heads it (it was claimed, so it was the head).
   */
  #addRec(req: EnqueueRequest, state: "session" | "paused"): Rec {
    const now = Date.now();
    const r: Rec = {
      ...req,
      score: now + (req.priority - 1) * this.#o.agingMs,
      seq: ++this.#seq,
      state,
      next: "new",
      attempts: state === "paused" ? 1 : 0,
      admittedAt: 0,
      entry: 0,
      pendingSince: undefined,
      worker: "",
      epoch: 0,
      endedAt: 0,
      pausedAt: state === "paused" ? now : 0,
    };
    this.#recs.set(r.runId, r);
    const key = sessionKey(r);
    const line = this.#sessions.get(key) ?? [];
    if (state === "paused") line.unshift(r.runId);
    else line.push(r.runId);
    this.#sessions.set(key, line);
    return r;
  }

  async pausedRuns(limit: number): Promise<string[]> {
    return [...this.#recs.values()]
      .filter((r) => r.state === "paused")
      .sort((a, b) => a.pausedAt - b.pausedAt)
      .slice(0, Math.max(0, limit))
      .map((r) => r.runId);
  }

  async stats(): Promise<QueueStats> {
    const queuedByBand = new Array<number>(10).fill(0);
    let paused = 0;
    for (const r of this.#recs.values()) {
      if (r.state === "paused") paused++;
      else if (QUEUED_STATES.has(r.state) && r.priority >= 1 && r.priority <= 10)
        queuedByBand[r.priority - 1] = (queuedByBand[r.priority - 1] ?? 0) + 1;
    }
    return { queuedByBand, paused };
  }

  async stateOf(runId: string): Promise<QueueState | undefined> {
    checkRunId(runId);
    const r = this.#recs.get(runId);
    return r === undefined ? undefined : publicState(r.state);
  }

  async #acquire(runId: string, workerId: string, ttlMs: number): Promise<LeaseGrant> {
    checkRunId(runId);
    checkWorkerId(workerId);
    checkTtl(ttlMs);
    const r = this.#recs.get(runId);
    if (r?.state === "claimed")
      throw new LeaseHeldError(runId, `the queue (claimed by ${r.worker})`);
    const held = this.#leases.get(runId);
    if (held !== undefined && held.expiresAt > Date.now()) {
      throw new LeaseHeldError(runId, held.workerId);
    }
    const epoch = await this.#log.bumpEpoch(runId);
    this.#epochs.set(runId, epoch);
    this.#leases.set(runId, { workerId, epoch, expiresAt: Date.now() + ttlMs });
    return { runId, workerId, epoch, ttlMs };
  }

  async #renew(l: LeaseGrant): Promise<void> {
    // The log's epoch is the authority (someone may have bumped it without this queue).
    const logged = (await this.#log.head(l.runId))?.epoch ?? 0;
    const cur = Math.max(logged, this.#epochs.get(l.runId) ?? 0);
    if (cur !== l.epoch) throw new LeaseLostError(l, cur);
    const now = Date.now();
    const r = this.#recs.get(l.runId);
    const claimed = r?.state === "claimed" && r.worker === l.workerId && r.epoch === l.epoch;
    const held = this.#leases.get(l.runId);
    const mine =
      held !== undefined &&
      held.workerId === l.workerId &&
      held.epoch === l.epoch &&
      held.expiresAt > now;
    // A bare lease must still exist; a claim only needs the epoch (nobody took it over).
    if (!claimed && !mine) throw new LeaseLostError(l, cur);
    this.#leases.set(l.runId, { workerId: l.workerId, epoch: l.epoch, expiresAt: now + l.ttlMs });
    if (claimed && r !== undefined) r.pendingSince = now;
  }

  #releaseLease(l: LeaseGrant): void {
    this.#dropLease(l);
  }

  #dropLease(l: LeaseGrant): void {
    const held = this.#leases.get(l.runId);
    if (held?.workerId === l.workerId && held.epoch === l.epoch) this.#leases.delete(l.runId);
  }

  async close(): Promise<void> {
    this.#loop.close();
  }

  // --- the admission rules (the same as the Lua helpers in redis-queue-lua.ts) ---

  #addSlots(tenantId: string, n: number): void {
    this.#slots.set(tenantId, (this.#slots.get(tenantId) ?? 0) + n);
  }

  #addWaiting(r: Rec): void {
    const w = this.#waiting.get(r.tenantId) ?? [];
    w.push(r);
    w.sort((a, b) => (before(a, b) ? -1 : 1));
    this.#waiting.set(r.tenantId, w);
  }

  #removeWaiting(r: Rec): void {
    const w = this.#waiting.get(r.tenantId) ?? [];
    const i = w.indexOf(r);
    if (i >= 0) w.splice(i, 1);
  }

  /** Into its band: claimable now, holding a tenant slot. */
  #admit(r: Rec): void {
    r.state = "ready";
    r.admittedAt = Date.now();
    r.entry = ++this.#entry;
    this.#bands[r.priority - 1]?.push(r);
    this.#addSlots(r.tenantId, 1);
    this.#loop.notify();
  }

  #fill(tenantId: string): void {
    const limit = this.#limits.get(tenantId) ?? this.#o.tenantLimit(tenantId);
    const w = this.#waiting.get(tenantId) ?? [];
    while ((this.#slots.get(tenantId) ?? 0) < limit) {
      const next = w.shift();
      if (next === undefined) break;
      this.#admit(next);
    }
  }

  #advance(tenantId: string, sessionId: string): void {
    const head = this.#sessions.get(sessionKey({ tenantId, sessionId }))?.[0];
    const r = head === undefined ? undefined : this.#recs.get(head);
    if (r?.state === "session") {
      r.state = "tenant";
      this.#addWaiting(r);
    }
  }

  #finish(r: Rec): void {
    const key = sessionKey(r);
    const line = (this.#sessions.get(key) ?? []).filter((id) => id !== r.runId);
    if (line.length === 0) this.#sessions.delete(key);
    else this.#sessions.set(key, line);
    r.state = "ended";
    r.endedAt = Date.now();
    this.#ended.set(r.runId, r.endedAt);
    this.#advance(r.tenantId, r.sessionId);
  }

  /** Forgets ended runs older than endedTtlMs (oldest first: the map is in end order). */
  #forgetEnded(): void {
    const cutoff = Date.now() - this.#o.endedTtlMs;
    for (const [id, at] of this.#ended) {
      if (at > cutoff) break;
      this.#ended.delete(id);
      this.#recs.delete(id);
      this.#epochs.delete(id);
    }
  }
}

function sessionKey(r: { tenantId: string; sessionId: string }): string {
  return `${r.tenantId}:${r.sessionId}`;
}

function isQueued(r: Rec): boolean {
  return r.state === "session" || r.state === "tenant" || r.state === "ready";
}

/** Aging order of the waiting sets and of positionOf's overall rank. */
function before(a: Rec, b: Rec): boolean {
  return a.score < b.score || (a.score === b.score && a.seq < b.seq);
}

function publicState(s: State): QueueState {
  return s === "session" || s === "tenant" ? "waiting" : s;
}
