/**
 * RunQueue and Lease on Redis: a stream per priority band with one consumer group
 * (XREADGROUP to claim, XACK when terminal or paused, XAUTOCLAIM to take over a run whose
 * owner stopped heartbeating), small keys for session lines and tenant slots (redis-keys.ts),
 * and one Lua script per state change (redis-queue-lua.ts) so every change is atomic.
 *
 * The lease epoch is the event log's own `epoch` field of the run's meta hash, bumped inside
 * the claim script: a claim and its fencing token are one step. The claim script also reads
 * the log's record of a run's end (`ended`) and never hands out an ended run: its entry is
 * acknowledged and dropped instead. This module must never keep
 * queue state in process memory (any number of servers and workers share the queue); the only
 * local state is the maxRuns count and the blocking connections of waiting claims.
 */
import type { Redis } from "ioredis";
import { AgentdError, invalid } from "../errors.ts";
import { wrapRedis } from "../eventlog/redis-error.ts";
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
  type QueuePosition,
  type QueueState,
  type QueueStats,
  type ReleaseOutcome,
  type RunQueue,
  STATS_MAX_RUNS,
} from "./port.ts";
import { type SchedulerKeys, schedulerKeys } from "./redis-keys.ts";
import {
  ACQUIRE_LUA,
  CANCEL_LUA,
  CLAIM_LUA,
  ENQUEUE_LUA,
  LEASE_RELEASE_LUA,
  POSITION_LUA,
  RELEASE_LUA,
  RENEW_LUA,
  SET_LIMITS_LUA,
  STATS_LUA,
} from "./redis-queue-lua.ts";

export interface RedisRunQueueOptions extends SchedulerOptions {
  /** Connection for commands; duplicated for blocking waits. Not closed by close(). */
  client: Redis;
  /**
   * Prefix of every key; must equal the event log's (the epoch lives in its meta hash).
   * Default "agentd:".
   */
  prefix?: string;
}

const SCRIPTS = {
  agentdQueueEnqueue: ENQUEUE_LUA,
  agentdQueueClaim: CLAIM_LUA,
  agentdQueueRelease: RELEASE_LUA,
  agentdQueueCancel: CANCEL_LUA,
  agentdQueueRenew: RENEW_LUA,
  agentdQueueAcquire: ACQUIRE_LUA,
  agentdQueueLeaseRelease: LEASE_RELEASE_LUA,
  agentdQueuePosition: POSITION_LUA,
  agentdQueueStats: STATS_LUA,
  agentdQueueSetLimits: SET_LIMITS_LUA,
} as const;

type Reply = (string | number)[];

/**
 * Ended runs one claim attempt removes at most before it yields to the claim loop (which
 * tries again at once, within the caller's blockMs): bounds one attempt's work.
 */
const MAX_DROPS_PER_ATTEMPT = 16;
type ScriptClient = Record<keyof typeof SCRIPTS, (...args: (string | number)[]) => Promise<Reply>>;

export class RedisRunQueue implements RunQueue {
  readonly leases: Lease = {
    acquire: (runId, workerId, ttlMs) => this.#acquire(runId, workerId, ttlMs),
    renew: (lease) => this.#renew(lease),
    release: (lease) => this.#releaseLease(lease),
  };
  readonly #client: Redis;
  readonly #scripts: ScriptClient;
  readonly #prefix: string;
  readonly #keys: SchedulerKeys;
  readonly #o: ResolvedOptions;
  readonly #loop: ClaimLoop;
  /** Idle connections for blocking XREADs (a blocked connection serves nobody else). */
  readonly #idle: Redis[] = [];
  readonly #blockers = new Set<Redis>();

  constructor(opts: RedisRunQueueOptions) {
    this.#client = opts.client;
    this.#prefix = opts.prefix ?? "agentd:";
    this.#keys = schedulerKeys(this.#prefix);
    this.#o = resolveOptions(opts);
    this.#loop = new ClaimLoop(this.#o.pollMs);
    for (const [name, lua] of Object.entries(SCRIPTS)) {
      // EVALSHA with a fallback to EVAL: survives a Redis restart's empty script cache.
      this.#client.defineCommand(name, { numberOfKeys: 0, lua });
    }
    this.#scripts = this.#client as unknown as ScriptClient;
  }

  async enqueue(req: EnqueueRequest): Promise<EnqueueResult> {
    checkEnqueue(req);
    const r = await wrap(
      this.#scripts.agentdQueueEnqueue(
        this.#prefix,
        req.runId,
        req.tenantId,
        req.sessionId,
        req.priority,
        this.#o.agingMs,
        this.#o.tenantLimit(req.tenantId),
      ),
    );
    return { outcome: r[0] as EnqueueResult["outcome"], state: publicState(String(r[1])) };
  }

  claim(workerId: string, opts: ClaimOptions): Promise<Claim | undefined> {
    return this.#loop.run(workerId, opts, () => this.#attempt(workerId));
  }

  async #attempt(workerId: string): Promise<Attempt> {
    let r: Reply;
    for (let dropped = 0; ; dropped++) {
      r = await wrap(
        this.#scripts.agentdQueueClaim(this.#prefix, workerId, this.#o.leaseTtlMs, this.#o.agingMs),
      );
      if (r[0] !== "ENDED") break;
      // Ended in the event log: never handed out. Removed with its tenant's limit (the next
      // runs of its session and tenant move up), then the claim looks again.
      await this.cancelQueued(String(r[1]));
      if (dropped >= MAX_DROPS_PER_ATTEMPT) return { sleep: async () => undefined };
    }
    if (r[0] === "NONE") {
      const wakeId = String(r[1]);
      return { sleep: (ms, signal) => this.#sleepOnWake(wakeId, ms, signal) };
    }
    const [, runId, tenantId, sessionId, prio, epoch, attempt, reason] = r.map(String);
    return {
      claim: {
        runId: runId ?? "",
        tenantId: tenantId ?? "",
        sessionId: sessionId ?? "",
        priority: Number(prio),
        reason: reason as ClaimReason,
        attempt: Number(attempt),
        lease: { runId: runId ?? "", workerId, epoch: Number(epoch), ttlMs: this.#o.leaseTtlMs },
      },
    };
  }

  /**
   * Blocks on the doorbell stream from the id the failed attempt saw (read in the same
   * script), so a change made between the attempt and this wait is not missed.
   */
  async #sleepOnWake(afterId: string, ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    let conn = this.#idle.pop();
    if (conn === undefined) {
      conn = this.#client.duplicate({ commandTimeout: undefined }); // blocking claims: no command timeout
      conn.on("error", () => undefined); // surfaces as a failed XREAD; the claim loop retries
      this.#blockers.add(conn);
    }
    const c = conn;
    // Disconnecting is the only way to end a blocked XREAD early; the connection is dropped.
    const onAbort = () => {
      this.#blockers.delete(c);
      c.disconnect();
    };
    signal.addEventListener("abort", onAbort, { once: true });
    const started = Date.now();
    try {
      await c.call("XREAD", "BLOCK", ms, "STREAMS", this.#keys.wake, afterId);
    } catch {
      // Redis restarting or the wait aborted: sleep out the slice instead of spinning.
      const left = ms - (Date.now() - started);
      if (!signal.aborted && left > 0) await this.#loop.sleepLocal(left, signal);
    } finally {
      signal.removeEventListener("abort", onAbort);
      if (this.#blockers.has(c)) this.#idle.push(c);
    }
  }

  async release(claim: Claim, opts: { outcome: ReleaseOutcome }): Promise<void> {
    const l = claim.lease;
    try {
      const r = await wrap(
        this.#scripts.agentdQueueRelease(
          this.#prefix,
          claim.runId,
          l.workerId,
          l.epoch,
          opts.outcome,
          this.#o.tenantLimit(claim.tenantId),
          this.#o.endedTtlMs,
        ),
      );
      if (r[0] === "LOST") throw new LeaseLostError(l, Number(r[1]));
    } finally {
      this.#loop.released(claim);
    }
  }

  async cancelQueued(runId: string): Promise<boolean> {
    checkRunId(runId);
    const tenant = await wrap(this.#client.hget(this.#keys.record(runId), "tenant"));
    if (tenant === null) return false;
    const r = await wrap(
      this.#scripts.agentdQueueCancel(
        this.#prefix,
        runId,
        this.#o.tenantLimit(tenant),
        this.#o.endedTtlMs,
      ),
    );
    return r[0] === "OK";
  }

  async positionOf(runId: string): Promise<QueuePosition | undefined> {
    checkRunId(runId);
    const r = await wrap(this.#scripts.agentdQueuePosition(this.#prefix, runId));
    if (r.length < 3) return undefined;
    const raw = String(r[0]);
    return {
      state: publicState(raw) as QueuePosition["state"],
      session: Number(r[1]),
      overall: Number(r[2]),
      ...(raw === "session" || raw === "tenant" ? { gate: raw } : {}),
    };
  }

  async setTenantLimits(limits: ReadonlyMap<string, number>): Promise<void> {
    const pairs: (string | number)[] = [];
    for (const [tenant, n] of limits) {
      checkEnqueue({ runId: "x", tenantId: tenant, sessionId: "x", priority: 1 });
      if (!Number.isInteger(n) || n < 0)
        throw invalid(
          `tenants.${tenant}.limits.concurrentRuns`,
          `must be an integer >= 0, got ${n}`,
        );
      pairs.push(tenant, n);
    }
    // The default only matters for a tenant dropped from the set: it falls back to it.
    await wrap(
      this.#scripts.agentdQueueSetLimits(this.#prefix, this.#o.tenantLimit("default"), ...pairs),
    );
  }

  async tenantSlots(tenantIds: readonly string[]): Promise<number[]> {
    if (tenantIds.length === 0) return [];
    const v = await wrap(this.#client.mget(...tenantIds.map((t) => this.#keys.slots(t))));
    return v.map((x) => Number(x ?? 0));
  }

  /**
   * Adds every record in state paused to `queue:paused` (ZADD NX: the time of this call
   * for the ones missing). For a store written before the index existed; one SCAN over
   * the queue's records. Returns how many it added.
   */
  async indexPausedRuns(): Promise<number> {
    const match = `${this.#keys.record("")}*`;
    let cursor = "0";
    let added = 0;
    do {
      const [next, keys] = await wrap(this.#client.scan(cursor, "MATCH", match, "COUNT", 500));
      cursor = next;
      if (keys.length === 0) continue;
      const pipe = this.#client.pipeline();
      for (const k of keys) pipe.hget(k, "state");
      const states = (await wrap(pipe.exec())) ?? [];
      const now = Date.now();
      const members = keys
        .filter((_, i) => states[i]?.[1] === "paused")
        .flatMap((k) => [now, k.slice(match.length - 1)]);
      if (members.length > 0)
        added += Number(await wrap(this.#client.zadd(this.#keys.paused, "NX", ...members)));
    } while (cursor !== "0");
    return added;
  }

  async pausedRuns(limit: number): Promise<string[]> {
    if (limit <= 0) return [];
    return await wrap(this.#client.zrange(this.#keys.paused, "0", String(limit - 1)));
  }

  async stats(): Promise<QueueStats> {
    const r = await wrap(this.#scripts.agentdQueueStats(this.#prefix, STATS_MAX_RUNS));
    return { paused: Number(r[0]), queuedByBand: r.slice(2).map(Number) };
  }

  async stateOf(runId: string): Promise<QueueState | undefined> {
    checkRunId(runId);
    const s = await wrap(this.#client.hget(this.#keys.record(runId), "state"));
    return s === null ? undefined : publicState(s);
  }

  async #acquire(runId: string, workerId: string, ttlMs: number): Promise<LeaseGrant> {
    checkRunId(runId);
    checkWorkerId(workerId);
    checkTtl(ttlMs);
    const r = await wrap(this.#scripts.agentdQueueAcquire(this.#prefix, runId, workerId, ttlMs));
    if (r[0] === "HELD") throw new LeaseHeldError(runId, String(r[1]));
    return { runId, workerId, epoch: Number(r[1]), ttlMs };
  }

  async #renew(lease: LeaseGrant): Promise<void> {
    const r = await wrap(
      this.#scripts.agentdQueueRenew(
        this.#prefix,
        lease.runId,
        lease.workerId,
        lease.epoch,
        lease.ttlMs,
      ),
    );
    if (r[0] === "LOST") throw new LeaseLostError(lease, Number(r[1]));
  }

  async #releaseLease(lease: LeaseGrant): Promise<void> {
    await wrap(
      this.#scripts.agentdQueueLeaseRelease(this.#prefix, lease.runId, lease.workerId, lease.epoch),
    );
  }

  async close(): Promise<void> {
    this.#loop.close();
    for (const c of this.#blockers) c.disconnect();
    this.#blockers.clear();
    this.#idle.length = 0;
  }
}

function publicState(s: string): QueueState {
  switch (s) {
    case "session":
    case "tenant":
      return "waiting";
    case "ready":
    case "claimed":
    case "paused":
    case "ended":
      return s;
    default:
      throw new AgentdError("EIO", `queue record has unknown state ${JSON.stringify(s)}`);
  }
}

const wrap = <T>(p: Promise<T>): Promise<T> => wrapRedis(p);
