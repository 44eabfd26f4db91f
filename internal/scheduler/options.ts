/**
 * Options, defaults and input checks shared by both RunQueue adapters, so the two cannot
 * drift apart on a limit or a default. Holds no state and talks to no storage.
 */
import { invalid } from "../errors.ts";
import { type EnqueueRequest, MAX_PRIORITY, MIN_PRIORITY } from "./port.ts";

export interface SchedulerOptions {
  /**
   * Runs of one tenant that may be ready or claimed at once; a number for every tenant or a
   * function for per-tenant limits. Every process sharing a queue must use the same limits
   * (admission happens in whichever process enqueues or releases). Default 10.
   */
  tenantLimit?: number | ((tenantId: string) => number);
  /**
   * Aging step per priority band, ms: a band-p run is served before band-1 runs that became
   * ready more than (p - 1) * agingMs after it. Default 15 s: a default-priority (5) run
   * waits at most a minute behind a flood of priority-1 runs.
   */
  agingMs?: number;
  /**
   * Lease TTL of a claim, ms (and, on Redis, XAUTOCLAIM's min-idle). A worker renews every
   * ttl/3; a dead one's runs are taken over after ttl (+ pollMs). Default 10 s: short enough
   * for quick recovery, long enough that a GC pause or a Redis failover does not cost a run.
   * Like the limits, it must be the same in every process sharing a queue.
   */
  leaseTtlMs?: number;
  /**
   * Longest single wait inside claim(), ms. Expired leases produce no wake-up, so this
   * bounds how late a takeover is noticed. Default 1000.
   */
  pollMs?: number;
  /**
   * How long an ended run is remembered, ms, so a repeated enqueue (a retried CreateRun)
   * stays a no-op instead of running it again. Default 7 days.
   */
  endedTtlMs?: number;
}

export interface ResolvedOptions {
  tenantLimit: (tenantId: string) => number;
  agingMs: number;
  leaseTtlMs: number;
  pollMs: number;
  endedTtlMs: number;
}

export const DEFAULTS = {
  tenantLimit: 10,
  agingMs: 15_000,
  leaseTtlMs: 10_000,
  pollMs: 1000,
  endedTtlMs: 7 * 24 * 3600 * 1000,
} as const;

export function resolveOptions(o: SchedulerOptions = {}): ResolvedOptions {
  const limit = o.tenantLimit ?? DEFAULTS.tenantLimit;
  const tenantLimit = typeof limit === "function" ? limit : () => limit;
  const r: ResolvedOptions = {
    tenantLimit: (t) => {
      const n = tenantLimit(t);
      if (!Number.isInteger(n) || n < 0)
        throw invalid("tenantLimit", `must be an integer >= 0, got ${n}`);
      return n;
    },
    agingMs: o.agingMs ?? DEFAULTS.agingMs,
    leaseTtlMs: o.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
    pollMs: o.pollMs ?? DEFAULTS.pollMs,
    endedTtlMs: o.endedTtlMs ?? DEFAULTS.endedTtlMs,
  };
  for (const k of ["agingMs", "leaseTtlMs", "pollMs", "endedTtlMs"] as const) {
    if (!Number.isInteger(r[k]) || r[k] < 1) throw invalid(k, `must be an integer >= 1`);
  }
  return r;
}

/** Run ids end up in keys and sorted-set members: a safe alphabet, no separators. */
const RUN_ID_RE = /^[0-9A-Za-z_-]{1,128}$/;
/** Tenants carry no ':' so `…:{tenant}:{session}` keys stay unambiguous. */
const TENANT_RE = /^[0-9A-Za-z_-]{1,128}$/;
const SESSION_RE = /^[A-Za-z0-9._:-]{1,128}$/;

export function checkRunId(runId: string): void {
  if (!RUN_ID_RE.test(runId)) throw invalid("run_id", "must be 1-128 characters of [0-9A-Za-z_-]");
}

export function checkWorkerId(workerId: string): void {
  // Worker ids go into lease values "worker epoch" and consumer names: no spaces.
  if (!/^[\x21-\x7e]{1,200}$/.test(workerId)) {
    throw invalid("worker_id", "must be 1-200 printable ASCII characters without spaces");
  }
}

export function checkEnqueue(req: EnqueueRequest): void {
  checkRunId(req.runId);
  if (!TENANT_RE.test(req.tenantId)) {
    throw invalid("tenant_id", "must be 1-128 characters of [0-9A-Za-z_-]");
  }
  if (!SESSION_RE.test(req.sessionId)) {
    throw invalid("session_id", "must be 1-128 characters of [A-Za-z0-9._:-]");
  }
  if (
    !Number.isInteger(req.priority) ||
    req.priority < MIN_PRIORITY ||
    req.priority > MAX_PRIORITY
  ) {
    throw invalid("priority", `must be an integer ${MIN_PRIORITY}..${MAX_PRIORITY}`);
  }
}

export function checkTtl(ttlMs: number): void {
  if (!Number.isInteger(ttlMs) || ttlMs < 1) throw invalid("ttl_ms", "must be an integer >= 1");
}
